"""Layer 2: where a replica's pods land, all at once (KAI gang) or one by one (default kube-scheduler).

A multi-pod replica (LeaderWorkerSet group, Ray workers) serves only when every pod is running. KAI places a
PodGroup with ``minMember`` = all pods or nothing; the default scheduler binds each pod as soon as some node has
the GPUs, so the first pods hold their GPUs idle until the last one lands (the 7-of-8 trap, perf-model.md 5.6).

Placement is deterministic: ``binpack`` (KAI's default) picks the fullest node that fits, ``spread`` the emptiest;
a gang that fits one node goes there, otherwise it fills the emptiest nodes first (fewest nodes per replica).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from gpuscale.sim.nodes import Node
from gpuscale.sim.states import NodeState
from gpuscale.spec.base import Spec

if TYPE_CHECKING:
    from gpuscale.sim.replicas import Pod, Replica
    from gpuscale.sim.simulation import Run

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


def place_one(need: int, nodes: list[Node], placement: Placement) -> Node | None:
    """The node one pod binds to, or None."""
    fits = [n for n in nodes if n.free >= need]
    if not fits:
        return None
    if placement == "binpack":
        return min(fits, key=lambda n: (n.free, n.nid))
    return min(fits, key=lambda n: (-n.free, n.nid))


def place_gang(needs: list[int], nodes: list[Node], placement: Placement) -> list[Node] | None:
    """A node for every pod, or None when the whole group cannot be placed now."""
    total = sum(needs)
    single = place_one(total, nodes, placement)
    if single is not None:
        return [single] * len(needs)
    free = {n.nid: n.free for n in nodes}
    order = sorted(nodes, key=lambda n: (-n.free, n.nid))
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


class Scheduler:
    """The layer-2 scheduler of a run: binds the pods of pending replicas, in creation order, to ready nodes."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.spec: SchedulerSpec = run.variant.scheduler
        self.pending: list[Replica] = []

    def unbound_needs(self) -> list[int]:
        """GPUs of every pod still waiting for a node (what the provisioner sees, pod by pod)."""
        return [p.gpus for r in self.pending for p in r.pods if p.node is None]

    def schedule(self) -> None:
        run = self.run
        if not self.pending:
            run.provisioner.demand_since = None
            return
        sched = self.spec
        ready_nodes = [n for n in run.provisioner.nodes if n.state == NodeState.READY and not n.cordoned]
        still: list[Replica] = []
        changed = False
        for rep in self.pending:
            unbound = [p for p in rep.pods if p.node is None]
            if sched.gang:
                assign = place_gang([p.gpus for p in unbound], ready_nodes, sched.placement)
                if assign is not None:
                    for pod, node in zip(unbound, assign, strict=True):
                        self.bind(pod, node)
                    changed = True
            else:
                for pod in unbound:
                    target = place_one(pod.gpus, ready_nodes, sched.placement)
                    if target is not None:
                        self.bind(pod, target)
                        changed = True
            if all(p.node is not None for p in rep.pods):
                run.replicas.start_loading(rep)
            else:
                still.append(rep)
        self.pending = still
        if changed:
            run.accounting.gpu_change()
        if still:
            run.provisioner.demand()
        else:
            run.provisioner.demand_since = None

    def bind(self, pod: Pod, node: Node) -> None:
        run = self.run
        now = run.env.now
        node.free -= pod.gpus
        node.pods += 1
        node.last_change = now
        pod.node = node
        pod.bound_at = now
        if node.pull_done_at is None:
            st = run.startup
            node.pull_done_at = now + st.sample(run.draws(f"pull/{node.nid}"), st.image_pull_s)
        pod.pull_done_at = max(node.pull_done_at, now)
