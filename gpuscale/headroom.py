"""How many spare GPU nodes a role keeps for its scale-ups, what they cost, and whether they pay: the one definition
sizing stores (``RoleSizing.headroom``) and validate, the manifests, the simulator and the plan read.

A spare node saves a scale-up the node's wait: Karpenter's batch window, the launch to node Ready and the GPUs'
registration (``node_wait_s``). The replicas a role needs during that wait come from the workload: the rate at the top
of a burst (``burst.multiplier`` x ``peak_rps``, or ``peak_rps`` without bursts) plus the Poisson fluctuation of the
arrivals counted over the wait, at the 99th percentile (``rate + z * sqrt(rate / wait)``, the normal approximation of
the count's quantile divided by the window). Replicas at full utilisation for that rate, less the peak replicas the
autoscaler already keeps at its target (their spare share absorbs the rest), is the shortfall; N is the shortfall the
role's ``max_replicas`` still lets the autoscaler add (a spare node beyond the ceiling is never used).

It pays only when a replica started on a spare node at the burst's start serves before the burst is over (image,
weights and engine start shorter than the burst): otherwise the spare node's replica arrives after the burst just as a
cold one would, and the spare GPUs are pure cost. The plan prices it against the misses it saves in the simulator's
``headroom`` scenario.

Placeholder pods (``placeholder-pods``, for a Karpenter without the CapacityBuffer gate) hold the same spare GPUs with
real pods under KAI, and the preemption delay decides how fast a serving pod gets them back. Read at
kai-scheduler/KAI-Scheduler v0.17.0:

- the delay belongs to the *preemptor* only: the preempt, reclaim and consolidation actions build their list of pending
  jobs with ``FilterWithinPreemptionDelay: true`` (``pkg/scheduler/actions/preempt/preempt.go`` L56-61,
  ``reclaim/reclaim.go`` L56-61, ``consolidation/consolidation.go`` L48-54) and ``InitializeWithJobs`` skips a job
  still inside its window (``pkg/scheduler/actions/utils/input_jobs.go`` L75-80; the window runs from
  max(creation, last eviction), ``pkg/scheduler/api/podgroup_info/job_info.go`` L206-222). Nothing about the victim
  (its queue, priority or preemptibility) is consulted: a serving pod with the stack's 90 s delay evicts no placeholder,
  in its own queue or any other, for 90 s, which is the node time the placeholder exists to save;
- so the delay cannot be kept for reclaim and waived for preempt: it is one value per PodGroup. A role with placeholder
  headroom carries delay 0 (``serving_preemption_delay_s``). What that also lets it evict at once: within its queue, the
  preempt action takes only preemptible jobs of lower priority in the same queue (``preempt.go`` L151-159): of what
  gpuscale emits, the placeholders alone (every model of a leaf gets the leaf's preemptibility and priority class),
  plus any lower-priority preemptible workload (e.g. ``train``) users run in that queue themselves; across queues,
  reclaim (which KAI runs before preempt: ``allocate, consolidation, reclaim, preempt``,
  ``pkg/scheduler/conf_util/scheduler_conf_util.go`` L38) may take GPUs other queues borrowed above their quota
  without first giving Karpenter the node time;
- placeholders are preemptible, so KAI's quota check for the non-preemptible serving pods does not count them
  (``pkg/scheduler/plugins/proportion/capacity_policy/quota_check.go`` L26-30 returns early for a preemptible job and
  L70 compares only ``AllocatedNotPreemptible``): in the model's own queue they never take a serving replica's quota;
- a placeholder must never evict anyone itself (pending, in a queue below its fair share, it could reclaim): it carries
  a preemption delay of ``PLACEHOLDER_PREEMPTION_DELAY`` (a year), which keeps it out of all three actions while leaving
  plain allocation into free capacity as it is (``docs/preemption-delay/README.md``, "Behavior").
"""

from __future__ import annotations

import math

from pydantic import Field

from gpuscale.first_answer import ColdStart
from gpuscale.spec.base import Spec
from gpuscale.spec.headroom import HeadroomMode
from gpuscale.spec.workload import WorkloadSpec

KARPENTER_BATCH_IDLE_S = 1.0
"""Karpenter's ``BATCH_IDLE_DURATION`` default (``pkg/operator/options/options.go`` L130 at kubernetes-sigs/karpenter
v1.14.1): a provisioning batch closes this long after its last new trigger (``pkg/controllers/provisioning/batcher.go``
L90-107), so a lone trigger (one pending pod, or a CapacityBuffer's reconcile) is acted on after 1 s."""
KARPENTER_BATCH_MAX_S = 10.0
"""Karpenter's ``BATCH_MAX_DURATION`` default (``options.go`` L129 at v1.14.1): the longest a batch stays open while
triggers keep arriving (``batcher.go`` L89, L104-105); what a scale-up waits at worst before the launch decision."""
BURST_QUANTILE_Z = 2.326
"""z of the 99th percentile of the normal distribution: the arrivals' fluctuation over the node wait sized for."""
BUFFER_RESYNC_S = 30.0
"""Karpenter v1.14.1's CapacityBuffer controller requeues every buffer each 30 s and triggers a provisioning pass
(``pkg/controllers/capacitybuffer/controller.go`` L120-124: ``c.trigger.Trigger(cb.UID)``, ``RequeueAfter: 30 *
time.Second``). Nothing else triggers a pass when a serving pod takes a spare node: the pod fits, so no scheduler marks
it ``Unschedulable`` and Karpenter's pod trigger (``pkg/controllers/provisioning/controller.go`` L67-70) never fires.
So the taken node is relaunched at the buffer's next reconcile (a point in its own 30 s cycle, unrelated to the
scale-up) plus one batch idle window. Placeholder pods are refilled sooner: the evicted placeholder's replacement is a
pending pod KAI marks ``Unschedulable`` (module docstring), which triggers a pass at once."""


PLACEHOLDER_PRIORITY = 10
"""``value`` of the placeholders' PriorityClass: below every class KAI's chart installs (``train`` 50, the lowest), so a
serving pod of any class outranks them (KAI preempts only lower-priority jobs, ``preempt.go`` L155 at v0.17.0)."""
PLACEHOLDER_PREEMPTION_DELAY = "8760h"
"""The placeholders' own ``kai.scheduler/preemption-delay`` (a Go duration, one year): a pending placeholder never
triggers preempt, reclaim or consolidation; it only takes GPUs that are free."""


def serving_preemption_delay_s(mode: HeadroomMode, node_delay_s: int) -> int:
    """The KAI preemption delay of a serving workload: the sized node time, except for a model whose spare capacity is
    held by placeholder pods, whose serving pods must evict them at once (module docstring)."""
    return 0 if mode == "placeholder-pods" else node_delay_s


def replica_load_s(mode: HeadroomMode, cold: ColdStart) -> float:
    """A replica's load on a spare node: the image pull (unless a placeholder already pulled it), weights, engine."""
    pull = 0.0 if mode == "placeholder-pods" else cold.image_pull_s
    return pull + cold.weights_s + cold.engine_init_s


class HeadroomSizing(Spec):
    """The spare nodes of one role: N replicas' worth, the rate they are sized for, their price, and whether they pay."""

    mode: HeadroomMode
    replicas: int = Field(ge=0)
    """N: replicas' worth of spare GPU nodes (0: none)."""
    pods: int = Field(ge=0)
    """Virtual pods of the CapacityBuffer: N x pods per replica."""
    gpus: int = Field(ge=0)
    nodes: int = Field(ge=0)
    """Spare nodes the N replicas' GPUs fill on the instance type (the pool's buffers share nodes: the model's total
    can be fewer than the roles' sum)."""
    node_wait_s: float
    """What a spare node saves each scale-up: the batch window, launch to Ready and GPU registration."""
    burst_rps: float
    """The rate sized for: the burst's top plus the 99th-percentile fluctuation over ``node_wait_s``."""
    needed_replicas: int
    """Replicas at full utilisation for ``burst_rps``."""
    load_s: float
    """A replica on a spare node: image pull (not with placeholder pods, which pulled it), weights and engine start."""
    gpu_hours_per_day: float
    usd_per_day: float
    pays: bool
    """N > 0 and a replica on a spare node serves before the burst is over."""
    why: str
    """One sentence on how N came out (and why it does or does not pay)."""

    @property
    def emitted(self) -> bool:
        """Whether the manifests hold it: asked for, sized above zero, and paying."""
        return self.mode != "none" and self.pays


def node_wait_s(cold: ColdStart) -> float:
    """What a scale-up waits for a new node before its pod can bind: the batch window at its longest (a burst's pods
    keep arriving, so the window runs to ``BATCH_MAX_DURATION``) + launch to Ready + GPU registration."""
    return KARPENTER_BATCH_MAX_S + cold.node_s + cold.gpu_ready_s


def burst_rps(workload: WorkloadSpec, window_s: float) -> float:
    """The arrival rate a role meets within ``window_s`` at the 99th percentile: the burst's top (or the peak), plus the
    Poisson count's fluctuation over the window expressed as a rate."""
    b = workload.burst
    top = workload.peak_rps * (b.multiplier if b.per_hour > 0 else 1.0)
    return top + BURST_QUANTILE_Z * math.sqrt(top / window_s) if top > 0 else 0.0


def size_headroom(
    *, mode: HeadroomMode, role: str, workload: WorkloadSpec, cold: ColdStart, replicas_per_rps: float,
    target_utilisation: float, replicas_at_peak: int, max_replicas: int, gpus_per_replica: int, pods_per_replica: int,
    gpus_per_node: int, usd_per_gpu_hour: float, target_label: str = "",
) -> HeadroomSizing:
    """N for one role (module docstring), its GPUs priced at the on-demand rate all day (Karpenter keeps them always).
    ``target_label`` names the load target in the rationale (default ``target <utilisation>``)."""
    wait = node_wait_s(cold)
    rate = burst_rps(workload, wait)
    # replicas_per_rps holds the autoscaler's target utilisation; at full utilisation a replica carries 1/target more
    needed = max(0, math.ceil(replicas_per_rps * target_utilisation * rate - 1e-9))
    shortfall = max(0, needed - replicas_at_peak)
    room = max(0, max_replicas - replicas_at_peak)
    n = min(shortfall, room)
    load = replica_load_s(mode, cold)
    b = workload.burst
    lasts = b.duration_s if b.per_hour > 0 and b.multiplier > 1 else wait
    answers = load < lasts
    gpus = n * gpus_per_replica
    nodes = math.ceil(gpus / gpus_per_node) if gpus else 0
    # the GPUs it holds: Karpenter packs the virtual pods of every buffer of the pool onto the same nodes
    gpu_h = float(gpus * 24)
    if shortfall == 0:
        why = (f"{replicas_at_peak} peak replica(s) at {target_label or f'target {target_utilisation:g}'} carry {rate:.1f} req/s "
               f"({needed} needed at full utilisation): no spare node needed")
    elif n == 0:
        why = f"{shortfall} more replica(s) would be needed but max_replicas {max_replicas} leaves no room above the peak"
    elif not answers:
        why = (f"{n} replica(s) short at {rate:.1f} req/s, but a replica on a spare node needs {load:.0f} s ("
               f"{'weights, engine' if mode == 'placeholder-pods' else 'image, weights, engine'}) and the burst lasts {lasts:.0f} s: it would arrive after the burst, so spare nodes "
               f"do not pay; lower the target utilisation instead (warm replicas)")
    else:
        why = (f"{n} replica(s) short at {rate:.1f} req/s within {wait:.0f} s of node wait; a replica on a spare node "
               f"serves after {load:.0f} s, inside the {lasts:.0f} s burst")
    return HeadroomSizing(
        mode=mode, replicas=n, pods=n * pods_per_replica, gpus=gpus, nodes=nodes, node_wait_s=round(wait, 1),
        burst_rps=round(rate, 2), needed_replicas=needed, load_s=round(load, 1), gpu_hours_per_day=gpu_h,
        usd_per_day=round(gpu_h * usd_per_gpu_hour, 2), pays=n > 0 and answers, why=why,
    )
