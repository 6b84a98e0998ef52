"""Spare GPU nodes kept ready before a burst (``models[].headroom``).

Between a warm replica (serving, paid for all day) and a cold start (a new node, then the image, the weights and the
engine), a model may keep spare *nodes*: the GPUs for N more replicas, launched ahead of demand so a scale-up skips the
node's launch and GPU registration. N is sized from the workload (``gpuscale.headroom``); this section only says how
the spare nodes are held.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gpuscale.spec.base import Spec

HeadroomMode = Literal["none", "capacity-buffer", "placeholder-pods"]


class HeadroomSpec(Spec):
    """How a model keeps spare GPU nodes for its scale-ups."""

    mode: HeadroomMode = "none"
    """``capacity-buffer``: a Karpenter ``CapacityBuffer`` per role (autoscaling.x-k8s.io/v1beta1, alpha in Karpenter
    v1.14.1; needs ``topology.provisioning.capacity_buffer_gate: true``): Karpenter keeps nodes for virtual pods that
    no scheduler ever sees, so KAI charges no queue for them. ``placeholder-pods``: for a Karpenter without the gate, a
    Deployment per role of low-priority, preemptible pods of a replica's size in the model's own queue (they pull the
    vLLM image on the spare nodes); the serving pods then carry no KAI preemption delay, so they evict a placeholder at
    once (``gpuscale.headroom`` says what else that lets them evict). ``none``: no spare nodes."""
    max_usd_per_day: float | None = Field(default=None, gt=0, le=1e9)
    """Most the spare nodes may cost per day (their GPU-hours at the instance's on-demand price); sized headroom that
    costs more is refused. None: no cap."""
