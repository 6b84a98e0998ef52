"""Spare GPU nodes: what a ``CapacityBuffer`` needs from Karpenter, and the cap on what spare nodes may cost.

Karpenter v1.14.1 builds the CapacityBuffer controller and injects its virtual pods only with the ``CapacityBuffer``
feature gate (``pkg/controllers/controllers.go``, ``pkg/controllers/provisioning/provisioner.go`` at v1.14.1), which
defaults to off (``pkg/operator/options/options.go``: ``CapacityBuffer=false``); the chart sets it from
``settings.featureGates.capacityBuffer`` (karpenter-provider-aws v1.14.1 ``charts/karpenter/values.yaml``). Without
the gate a CapacityBuffer is stored and ignored: no node is ever kept, silently.
"""

from __future__ import annotations


def capacity_buffer_breach(mode: str, gate: bool, provisioner: str) -> str | None:
    """Why ``headroom.mode`` cannot be a CapacityBuffer on this stack, or None."""
    if mode != "capacity-buffer":
        return None
    if provisioner != "karpenter":
        return ("headroom.mode capacity-buffer is a Karpenter feature here (gpuscale pins no Cluster Autoscaler); "
                "use node_provisioner: karpenter, or headroom.mode: placeholder-pods or none")
    if not gate:
        return ("headroom.mode capacity-buffer needs Karpenter's CapacityBuffer feature gate (alpha, off by default in "
                "v1.14.1: without it Karpenter stores the CapacityBuffer and keeps no node). Set "
                "topology.provisioning.capacity_buffer_gate: true (ModelOnClusterArgs.capacity_buffer_gate on a cluster "
                "gpuscale did not create), or headroom.mode: placeholder-pods (needs no gate) or none")
    return None


def cost_breach(usd_per_day: float, cap: float | None, replicas: int, role: str) -> str | None:
    """Why sized headroom of ``replicas`` costing ``usd_per_day`` exceeds the stack's cap, or None."""
    if cap is None or usd_per_day <= cap:
        return None
    return (f"{role}: the sized headroom ({replicas} replica(s) of spare nodes) costs ${usd_per_day:,.0f} a day, above "
            f"headroom.max_usd_per_day ${cap:,.0f}; raise the cap or set headroom.mode: none")


def placeholder_limit_breach(queue: str, limit: float, serving_gpus: int,
                             placeholders: list[tuple[str, str, int]]) -> str | None:
    """Why placeholder pods under ``queue`` could be refused by KAI while Karpenter launches a node for them, or None.

    ``serving_gpus``: the GPUs of every serving role under the queue at its ``max_replicas``; ``placeholders``:
    ``(model, role, GPUs)`` of each role's placeholder pods under it. Read at the pinned versions:

    - KAI v0.17.0 refuses a job, preemptible or not, whose allocation would pass a ``limit`` of its queue or of any
      ancestor (``pkg/scheduler/actions/common/allocate.go`` L29 -> ``capacity_policy.go`` L33 ``resultsOverLimit``,
      ``max_allowed_check.go`` L19-46, L61); a pending pod it does not place is marked ``PodScheduled=False`` reason
      ``Unschedulable`` (``cache/status_updater/default_status_updater.go`` L249-260, L382-383; the PodGroup's
      ``markUnschedulable`` defaults to true, ``scheduler/utils/pod_group_utils.go`` L16, L62-66), whatever the reason;
    - Karpenter v1.14.1 provisions for any pod so marked, whatever its ``schedulerName`` (kubernetes-sigs/karpenter
      ``pkg/utils/pod/scheduling.go`` L102-108, L125-131), and every pass that still finds it pending nominates the
      node it launched for it (``provisioning/scheduling/scheduler.go`` L316), which keeps that node out of
      disruption (``state/statenode.go`` L225-228) while the pod controller re-triggers every 10 s
      (``provisioning/controller.go`` L77).

    So a placeholder evicted by a serving pod and recreated while the serving pods and the other placeholders already
    fill the limit gets a new GPU node that no pod ever uses, billed until the serving pods scale down. Serving pods at
    their ``max_replicas`` plus every placeholder must fit each limit on the chain."""
    held = sum(g for _, _, g in placeholders)
    if not placeholders or limit < 0 or serving_gpus + held <= limit:
        return None
    roles = ", ".join(f"{m} {r} ({g} GPUs)" for m, r, g in placeholders)
    room = max(int(limit) - serving_gpus, 0)
    return (f"placeholder pods of {roles} under queue {queue} (gpu_limit {limit:g}) need {held} GPUs beside the "
            f"{serving_gpus} its serving roles reach at max_replicas: once the serving pods pass {room} GPU(s) of "
            f"room, KAI refuses a recreated placeholder (over the queue's limit) but marks it Unschedulable, and "
            f"Karpenter launches a GPU node for it that stays empty and is never consolidated while the placeholder "
            f"waits. Raise {queue}'s gpu_limit to at least {serving_gpus + held}, lower max_replicas, or use "
            f"headroom.mode: capacity-buffer (its virtual pods count against no queue)")
