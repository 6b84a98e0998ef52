"""Layer 2 in a run: the scheduler that binds the pods of pending replicas, in creation order, to ready nodes.

KAI places a replica's pods all at once (``placement.place_gang``); the default scheduler one by one
(``placement.place_one``). Binding a pod starts the image pull on a node that has not pulled it yet. A replica whose
pods are all bound starts loading (``Loader``); pods still unbound are demand for the node provisioner (``NodePool``).
"""

from __future__ import annotations

from typing import Protocol

from gpuscale.sim.context import RunContext
from gpuscale.sim.events import Environment
from gpuscale.sim.nodes import Node
from gpuscale.sim.placement import place_gang, place_one
from gpuscale.sim.pods import Pod, Replica
from gpuscale.sim.states import NodeState


class NodePool(Protocol):
    """The node provisioner, as the scheduler sees it."""

    @property
    def nodes(self) -> list[Node]: ...
    def demand(self) -> None:
        """Pods are pending (the provisioner reacts at once or at its next scan)."""

    def demand_met(self) -> None:
        """No pod is pending any more."""

    def held_gpus(self) -> dict[int, int]:
        """GPUs per node that placeholder (or virtual) pods hold now."""


class Loader(Protocol):
    """The ReplicaSet: a replica whose pods are all bound starts loading."""

    def start_loading(self, rep: Replica) -> None: ...


class Scheduler:
    """Binds pending replicas' pods; ``schedule()`` runs whenever nodes or replicas change."""

    def __init__(self, ctx: RunContext, env: Environment) -> None:
        self.ctx = ctx
        self.env = env
        self.spec = ctx.variant.scheduler
        self.pending: list[Replica] = []
        self.started: list[Replica] = []
        """Replicas this scheduler placed (scale-ups and re-placed evicted ones; not the warm replicas at t = 0), in
        the order they started loading: their ``created_at`` to ``ready_at`` is a scale-up's first answer."""
        self._pending_since: dict[int, float] = {}
        """Replica id -> when it last became pending (created or evicted): KAI's preemption-delay anchor."""
        h = ctx.variant.headroom
        self._evict_delay_s = h.preemption_delay_s if h is not None and h.prepull else 0.0
        """How long a pending replica leaves placeholders in place (``HeadroomSim.preemption_delay_s``)."""
        self._pool: NodePool
        self._loader: Loader

    def connect(self, pool: NodePool, loader: Loader) -> None:
        self._pool, self._loader = pool, loader

    def add(self, rep: Replica) -> None:
        """A replica to place (new, or evicted and pending again)."""
        if rep not in self.pending:
            self.pending.append(rep)
            self._pending_since[id(rep)] = self.env.now
            if self._evict_delay_s > 0:  # its delay ends: the placeholders' GPUs become its to take
                self.env.after(self._evict_delay_s, self.schedule)

    def discard(self, rep: Replica) -> None:
        if rep in self.pending:
            self.pending.remove(rep)
            self._pending_since.pop(id(rep), None)

    def unbound_needs(self) -> list[int]:
        """GPUs of every pod still waiting for a node (what the provisioner sees, pod by pod)."""
        return [p.gpus for r in self.pending for p in r.pods if p.node is None]

    def schedule(self) -> None:
        if not self.pending:
            self._pool.demand_met()
            return
        sched = self.spec
        ready_nodes = [n for n in self._pool.nodes if n.state == NodeState.READY and not n.cordoned]
        still: list[Replica] = []
        for rep in self.pending:
            unbound = [p for p in rep.pods if p.node is None]
            held = self._held_for(rep)
            if sched.gang:
                assign = place_gang([p.gpus for p in unbound], ready_nodes, sched.placement, held)
                if assign is not None:
                    for pod, node in zip(unbound, assign, strict=True):
                        self.bind(pod, node)
            else:
                for pod in unbound:
                    target = place_one(pod.gpus, ready_nodes, sched.placement, held)
                    if target is not None:
                        self.bind(pod, target)
            if all(p.node is not None for p in rep.pods):
                self.started.append(rep)
                self._pending_since.pop(id(rep), None)
                self._loader.start_loading(rep)
            else:
                still.append(rep)
        self.pending = still
        if still:
            self._pool.demand()
        else:
            self._pool.demand_met()

    def _held_for(self, rep: Replica) -> dict[int, int] | None:
        """The placeholders' GPUs ``rep`` may not take yet: all of them while it is inside its preemption delay."""
        if self._evict_delay_s <= 0:
            return None
        since = self._pending_since.get(id(rep), rep.created_at)
        return self._pool.held_gpus() if self.env.now < since + self._evict_delay_s else None

    def scale_up_ready_s(self) -> tuple[tuple[float, float], ...]:
        """``(created_at, seconds to ready)`` of every placed replica that became ready, once each."""
        seen: dict[int, tuple[float, float]] = {}
        for rep in self.started:
            if rep.ready_at >= rep.created_at and rep.ready_at > 0:
                seen[id(rep)] = (rep.created_at, rep.ready_at - rep.created_at)
        return tuple(sorted(seen.values()))

    def bind(self, pod: Pod, node: Node) -> None:
        now = self.env.now
        node.free -= pod.gpus
        node.pods += 1
        node.last_change = now
        pod.node = node
        if node.pull_done_at is None:
            st = self.ctx.startup
            node.pull_done_at = now + st.sample(self.ctx.draws(f"pull/{node.nid}"), st.image_pull_s)
        pod.pull_done_at = max(node.pull_done_at, now)
