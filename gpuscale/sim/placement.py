"""Layer 2: where a replica's pods land, all at once (KAI gang) or one by one (default kube-scheduler).

A multi-pod replica (LeaderWorkerSet group, Ray workers) serves only when every pod is running. KAI places a
PodGroup with ``minMember`` = all pods or nothing; the default scheduler binds each pod as soon as some node has
the GPUs, so the first pods hold their GPUs idle until the last one lands (the 7-of-8 trap, perf-model.md 5.6).

These are the pure placement decisions; ``gpuscale.sim.scheduler`` is the actor that applies them during a run.
Placement is deterministic: ``binpack`` (KAI's default) picks the fullest node that fits, ``spread`` the emptiest;
a gang that fits one node goes there, otherwise it fills the emptiest nodes first (fewest nodes per replica).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from gpuscale.sim.nodes import Node
from gpuscale.spec.base import Spec

Placement = Literal["binpack", "spread"]


class SchedulerSpec(Spec):
    """The layer-2 scheduler of a run."""

    gang: bool
    """All-or-nothing placement of a replica's pods (KAI PodGroup ``minMember`` = pods)."""
    placement: Placement = "binpack"
    """Node choice for each pod."""

    @property
    def label(self) -> str:
        return "kai-gang" if self.gang else "default-scheduler"


KAI = SchedulerSpec(gang=True, placement="binpack")
DEFAULT = SchedulerSpec(gang=False, placement="spread")


def place_one(need: int, nodes: list[Node], placement: Placement, held: Mapping[int, int] | None = None) -> Node | None:
    """The node one pod binds to, or None. ``held``: GPUs per node id the pod may not take (placeholders it may not
    evict yet)."""
    left = {n.nid: n.free - (held or {}).get(n.nid, 0) for n in nodes}
    fits = [n for n in nodes if left[n.nid] >= need]
    if not fits:
        return None
    if placement == "binpack":
        return min(fits, key=lambda n: (left[n.nid], n.nid))
    return min(fits, key=lambda n: (-left[n.nid], n.nid))


def place_gang(
    needs: list[int], nodes: list[Node], placement: Placement, held: Mapping[int, int] | None = None,
) -> list[Node] | None:
    """A node for every pod, or None when the whole group cannot be placed now (``held`` as in ``place_one``)."""
    total = sum(needs)
    single = place_one(total, nodes, placement, held)
    if single is not None:
        return [single] * len(needs)
    free = {n.nid: n.free - (held or {}).get(n.nid, 0) for n in nodes}
    order = sorted(nodes, key=lambda n: (-free[n.nid], n.nid))
    out: list[Node] = []
    for need in needs:
        node = next((n for n in order if free[n.nid] >= need), None)
        if node is None:
            return None
        free[node.nid] -= need
        out.append(node)
    return out


def unplaced(needs: list[int], capacities: list[int]) -> list[int]:
    """The ``needs`` (largest first) that do not fit ``capacities`` placed one pod at a time (first fit).

    The node provisioner's view: Karpenter and Cluster Autoscaler simulate kube-scheduler pod by pod and know
    nothing of gangs.
    """
    caps = sorted(capacities, reverse=True)
    left: list[int] = []
    for need in sorted(needs, reverse=True):
        for i, c in enumerate(caps):
            if c >= need:
                caps[i] -= need
                break
        else:
            left.append(need)
    return left


def nodes_for(needs: list[int], gpus_per_node: int) -> int:
    """New nodes needed to hold ``needs`` (first-fit decreasing)."""
    bins: list[int] = []
    for need in sorted(needs, reverse=True):
        for i, free in enumerate(bins):
            if free >= need:
                bins[i] -= need
                break
        else:
            bins.append(gpus_per_node - need)
    return len(bins)
