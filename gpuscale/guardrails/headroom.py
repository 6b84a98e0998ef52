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
