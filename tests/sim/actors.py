"""Build one simulator actor alone: a run context on the tiny stack and fakes of the protocols the actor consumes."""

from __future__ import annotations

from gpuscale.sim import traffic
from gpuscale.sim.context import RunContext
from gpuscale.sim.nodes import Node
from gpuscale.sim.placement import DEFAULT, KAI
from gpuscale.sim.pods import Pod, Replica, RoleGroup
from gpuscale.sim.scenarios import build_scenario
from gpuscale.sim.states import LossReason, NodeState
from gpuscale.sim.vllm_engine import Engine, Request
from tests.sim.conftest import spec_of


def context(stack: str = "tiny-aggregated", *, gang: bool = True, duration_s: float = 120.0, **setup: object) -> RunContext:
    """The ``stack`` scenario's first variant on ``stack``, with ``setup`` fields replaced (e.g. multi-GPU nodes)."""
    sc = build_scenario("stack", spec_of(stack), duration_s=duration_s)
    s = sc.setup.model_copy(update=setup) if setup else sc.setup
    v = sc.variants[0].model_copy(update={"scheduler": KAI if gang else DEFAULT})
    return RunContext(setup=s, variant=v, arrivals=traffic.generate(sc.traffic, 0, s.duration_s), seed=0)


def ready_node(nid: int, gpus: int, free: int | None = None) -> Node:
    n = Node(nid, gpus, 0.0)
    n.state, n.ready_at = NodeState.READY, 0.0
    if free is not None:
        n.free = free
    return n


class CountingWatch:
    """A ``StateWatch`` that counts the changes it is told of."""

    def __init__(self) -> None:
        self.changes = 0

    def will_change(self) -> None:
        self.changes += 1


class FakePool:
    """``scheduler.NodePool``: a fixed list of nodes; records demand."""

    def __init__(self, nodes: list[Node], held: dict[int, int] | None = None) -> None:
        self._nodes = nodes
        self.held = held or {}
        """GPUs per node id placeholder pods hold (``held_gpus``)."""
        self.demands = 0
        self.met = 0

    @property
    def nodes(self) -> list[Node]:
        return self._nodes

    def demand(self) -> None:
        self.demands += 1

    def demand_met(self) -> None:
        self.met += 1

    def held_gpus(self) -> dict[int, int]:
        return dict(self.held)


class FakeLoader:
    """``scheduler.Loader``."""

    def __init__(self) -> None:
        self.loading: list[Replica] = []

    def start_loading(self, rep: Replica) -> None:
        self.loading.append(rep)


class FakePendingPods:
    """``provisioner.PendingPods`` and ``replica_set.PendingQueue``: pods waiting, and who asked to schedule."""

    def __init__(self, needs: list[int] | None = None) -> None:
        self.needs = needs or []
        self.schedules = 0
        self.pending: list[Replica] = []

    def unbound_needs(self) -> list[int]:
        return list(self.needs)

    def schedule(self) -> None:
        self.schedules += 1

    def add(self, rep: Replica) -> None:
        self.discard(rep)
        self.pending.append(rep)

    def discard(self, rep: Replica) -> None:
        self.pending = [r for r in self.pending if r is not rep]


class FakeWorkloads:
    """``provisioner.Workloads``: replicas bound to nodes by hand; records evictions."""

    def __init__(self) -> None:
        self.bound: list[tuple[Replica, Pod]] = []
        self.evicted: list[tuple[int, LossReason, float]] = []

    def on_node(self, node: Node) -> list[tuple[Replica, Pod]]:
        return [(r, p) for r, p in self.bound if p.node is node]

    def evict(self, rep: Replica, reason: LossReason, grace_s: float) -> None:
        self.evicted.append((rep.rid, reason, grace_s))
        for _, p in [(r, p) for r, p in self.bound if r is rep]:
            if p.node is not None:
                p.node.free += p.gpus
                p.node.pods -= 1
            p.node = None


class FakeRequests:
    """``replica_set.RequestPath``: records where requests are sent; an engine sink that does nothing."""

    def __init__(self) -> None:
        self.routed: list[tuple[str, int]] = []
        self.lost: list[tuple[int, LossReason]] = []
        self.aborted_: list[tuple[int, LossReason]] = []
        self.flushed: list[str] = []

    def route(self, role: RoleGroup, req: Request) -> None:
        self.routed.append((role.name, req.rid))

    def route_first(self, req: Request) -> None:
        self.routed.append(("first", req.rid))

    def lose(self, req: Request, reason: LossReason) -> None:
        self.lost.append((req.rid, reason))

    def aborted(self, req: Request, reason: LossReason) -> None:
        self.aborted_.append((req.rid, reason))

    def flush_gateway(self, role: RoleGroup) -> None:
        self.flushed.append(role.name)

    def on_first_token(self, req: Request, t: float) -> None:
        return None

    def on_done(self, req: Request, t: float) -> None:
        return None

    def on_prefill_done(self, req: Request, t: float, engine: Engine) -> None:
        return None

    def on_timeout(self, req: Request, t: float) -> None:
        return None

    def on_drained(self, engine: Engine) -> None:
        return None


class NoOwners:
    """``router.Owners`` when no engine belongs to a replica set (KV transfers then skip link contention)."""

    def owner_of(self, engine: Engine) -> Replica | None:
        return None

    def on_drained(self, engine: Engine) -> None:
        return None


class FakeCapacity:
    """``router.Capacity``: counts prewarm requests."""

    def __init__(self) -> None:
        self.prewarms = 0

    def prewarm(self) -> None:
        self.prewarms += 1
