"""Layer 3 replicas: the ReplicaSet of each role (create, start, drain, evict), as the Deployment controller does it.

* Scale-up creates pending replicas; the scheduler places them and they load (image pull, weights, engine init).
* Scale-down deletes pending or loading replicas first; among serving ones the victim is the replica on the node
  holding the most replicas of its role, then the newest (the ReplicaSet's ranking). A serving victim drains: no new
  requests, in-flight ones finish or are lost at ``request_timeout_s``.
* An eviction (consolidation, spot interruption, drift) gives in-flight requests the disruption's grace period, then
  aborts the old engine; the replica itself is pending again at once (its replacement pod) and reloads elsewhere.
"""

from __future__ import annotations

from collections import deque
from typing import Protocol

from gpuscale.sim.context import Log, RunContext
from gpuscale.sim.events import Environment
from gpuscale.sim.nodes import UNWATCHED, Node, StateWatch
from gpuscale.sim.pods import Pod, Replica, RoleGroup
from gpuscale.sim.states import LossReason, ReplicaState
from gpuscale.sim.vllm_engine import Engine, EngineSink, ItlHistogram, Request

PENDING, LOADING, SERVING, DRAINING = ReplicaState.PENDING, ReplicaState.LOADING, ReplicaState.SERVING, ReplicaState.DRAINING


class PendingQueue(Protocol):
    """The layer-2 scheduler, as the ReplicaSet sees it."""

    def add(self, rep: Replica) -> None: ...
    def discard(self, rep: Replica) -> None: ...
    def schedule(self) -> None: ...


class RequestPath(EngineSink, Protocol):
    """The router: where the requests of a replica that goes away are sent, and the sink of every engine."""

    def route(self, role: RoleGroup, req: Request) -> None: ...
    def route_first(self, req: Request) -> None:
        """Back to the first role (a request that never started on a killed engine)."""

    def lose(self, req: Request, reason: LossReason) -> None: ...
    def aborted(self, req: Request, reason: LossReason) -> None: ...
    def flush_gateway(self, role: RoleGroup) -> None: ...


class ReplicaSet:
    """Every replica of the model, all roles."""

    def __init__(
        self, ctx: RunContext, env: Environment, log: Log, itl: ItlHistogram, watch: StateWatch = UNWATCHED,
    ) -> None:
        self.ctx = ctx
        self.env = env
        self._log = log
        self.itl = itl
        """Every engine's inter-token gaps (the run's ITL percentiles)."""
        self._watch = watch
        self.roles = [RoleGroup(r) for r in ctx.setup.roles]
        self.by_name: dict[str, RoleGroup] = {r.name: r for r in self.roles}
        self.all: list[Replica] = []
        self.owner: dict[Engine, Replica] = {}
        self.engines: list[Engine] = []
        """Every engine started in the run (their counters feed the result)."""
        self._rid = 0
        self.evictions = 0
        self._pending: PendingQueue
        self._requests: RequestPath

    def connect(self, pending: PendingQueue, requests: RequestPath) -> None:
        self._pending, self._requests = pending, requests

    def owner_of(self, engine: Engine) -> Replica | None:
        return self.owner.get(engine)

    def on_node(self, node: Node) -> list[tuple[Replica, Pod]]:
        """Every pod bound to ``node``, with its replica."""
        return [(r, p) for r in self.all for p in r.pods if p.node is node]

    # ------------------------------------------------------------------ lifecycle

    def create(self, role: RoleGroup) -> Replica:
        s = self.ctx.setup
        self._rid += 1
        rep = Replica(self._rid, role, s.pods_per_replica, s.gpus_per_pod, self.env.now, self._watch)
        role.replicas.append(rep)
        self.all.append(rep)
        self._pending.add(rep)
        return rep

    def set_desired(self, role: RoleGroup, n: int) -> None:
        role.desired = n
        while len(role.replicas) < n:
            self.create(role)
        while len(role.replicas) > n:
            self._remove_one(role)
        self._pending.schedule()

    def _remove_one(self, role: RoleGroup) -> None:
        def rank(rep: Replica) -> tuple[int, float, float]:
            if rep.state == PENDING:
                return (0, rep.bound_gpus(), -rep.rid)
            if rep.state == LOADING:
                return (1, 0.0, -rep.rid)
            node = rep.pods[0].node
            doubled = sum(1 for r in role.replicas if r.state == SERVING and r.pods[0].node is node)
            return (2, -doubled, -rep.ready_at)

        victim = min(role.replicas, key=rank)
        role.replicas.remove(victim)
        if victim.state in (PENDING, LOADING):
            self.drop(victim)
            return
        victim.state = DRAINING
        role.ready.remove(victim)
        assert victim.engine is not None
        victim.engine.drain()
        if victim.engine.is_empty():
            self._delete(victim, victim.gen)
        else:
            self.env.at(self.env.now + self.ctx.setup.request_timeout_s, self._drain_deadline, victim, victim.gen)

    def on_drained(self, engine: Engine) -> None:
        rep = self.owner.get(engine)
        if rep is not None and rep.state == DRAINING:
            self.env.at(self.env.now, self._delete, rep, rep.gen)

    def _drain_deadline(self, rep: Replica, gen: int) -> None:
        if rep.state != DRAINING or rep.gen != gen:
            return
        assert rep.engine is not None
        waiting, running = rep.engine.abort_all(self.env.now)
        for r in waiting + running:
            self._requests.lose(r, LossReason.DRAIN)
        self._delete(rep, gen)

    def _delete(self, rep: Replica, gen: int) -> None:
        if rep.gen != gen or rep.state == ReplicaState.GONE:
            return
        self.drop(rep)
        self._pending.schedule()

    def drop(self, rep: Replica) -> None:
        self.release_pods(rep)
        if rep.engine is not None:
            self.owner.pop(rep.engine, None)
            rep.engine = None
        rep.state = ReplicaState.GONE
        rep.gen += 1
        self._pending.discard(rep)
        self.all.remove(rep)

    def release_pods(self, rep: Replica) -> None:
        now = self.env.now
        for pod in rep.pods:
            node = pod.node
            if node is not None:
                node.free += pod.gpus
                node.pods -= 1
                node.last_change = now
                pod.node = None

    def start_loading(self, rep: Replica) -> None:
        """Every pod is bound: wait for the image, load the weights (locally when cached), initialise the engine."""
        st = self.ctx.startup
        rep.loads += 1
        rng = self.ctx.draws(f"load/{rep.rid}/{rep.loads}")
        rep.state = LOADING
        start = max(self.env.now, max(p.pull_done_at for p in rep.pods))
        local = st.local_weights_s is not None and all(p.node is not None and p.node.weights_cached for p in rep.pods)
        weights = st.sample(rng, st.local_weights_s if local and st.local_weights_s is not None else st.weights_s)
        ready_t = start + weights + st.sample(rng, st.engine_init_s)
        rep.gen += 1
        self.env.at(ready_t, self._ready, rep, rep.gen)

    def _ready(self, rep: Replica, gen: int) -> None:
        if rep.gen != gen or rep.state != LOADING:
            return
        if self.ctx.startup.local_weights_s is not None:
            for p in rep.pods:
                if p.node is not None:
                    p.node.weights_cached = True
        self.make_ready(rep)
        self._log.log("ready", f"{rep.role.name} replica {rep.rid} after {self.env.now - rep.created_at:.0f} s")
        self._requests.flush_gateway(rep.role)

    def make_ready(self, rep: Replica) -> None:
        role = rep.role
        rep.state = SERVING
        rep.evicted = False
        rep.ready_at = self.env.now
        rep.engine = Engine(
            self.env, self.ctx.setup.replica, self._requests, self.itl, prefill=role.does_prefill,
            decode=role.does_decode, name=f"{role.name}-{rep.rid}", lazy=True,
        )
        self.owner[rep.engine] = rep
        self.engines.append(rep.engine)
        rep.duty_mark, rep.duty_mark_t = 0.0, self.env.now
        rep.counter_samples = deque()  # a new engine: its counters (and their series) start from zero
        role.ready.append(rep)

    def evict(self, rep: Replica, reason: LossReason, grace_s: float) -> None:
        """Evict ``rep`` from its node: in-flight requests get ``grace_s`` to finish on the old engine (no new ones),
        waiting ones go back to the router; the replica is pending again at once (its replacement pod)."""
        now = self.env.now
        role = rep.role
        old = rep.engine
        if old is not None:
            self.owner.pop(old, None)
            rep.engine = None
            if rep in role.ready:
                role.ready.remove(rep)
            old.sync(now)
            waiting = list(old.waiting)
            old.waiting.clear()
            for r in waiting:  # never started: the router sends them elsewhere
                self._requests.route(role, r)
            if grace_s > 0 and not old.is_empty():
                old.drain()
                self.env.at(now + grace_s, self._kill, old, reason)
            else:
                self._kill(old, reason)
        if rep.state == DRAINING:
            self.drop(rep)
            return
        self.release_pods(rep)
        rep.state = PENDING
        rep.evicted = True
        rep.gen += 1
        self._pending.add(rep)
        self.evictions += 1

    def sync(self, t: float) -> None:
        """Bring every lazy engine to ``t`` (``Engine.sync``): before the run reads what every request became."""
        for e in self.engines:
            e.sync(t)

    def _kill(self, engine: Engine, reason: LossReason) -> None:
        waiting, running = engine.abort_all(self.env.now)
        for r in waiting:
            self._requests.route_first(r)
        for r in running:
            self._requests.aborted(r, reason)
