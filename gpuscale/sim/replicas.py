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
from typing import TYPE_CHECKING

from gpuscale.sim.nodes import Node
from gpuscale.sim.policies import RoleObservation
from gpuscale.sim.setup import RoleSetup
from gpuscale.sim.states import LossReason, ReplicaState
from gpuscale.sim.vllm_engine import Engine, Request

if TYPE_CHECKING:
    from gpuscale.sim.simulation import Run

PENDING, LOADING, SERVING, DRAINING, GONE = (
    ReplicaState.PENDING, ReplicaState.LOADING, ReplicaState.SERVING, ReplicaState.DRAINING, ReplicaState.GONE,
)


class Pod:
    __slots__ = ("bound_at", "gpus", "node", "pull_done_at")

    def __init__(self, gpus: int) -> None:
        self.gpus = gpus
        self.node: Node | None = None
        self.bound_at = 0.0
        self.pull_done_at = 0.0


class CounterSample:
    """One scrape of an engine's token counters (for ``rate()``)."""

    __slots__ = ("generation", "prompt", "t")

    def __init__(self, t: float, prompt: int, generation: int) -> None:
        self.t = t
        self.prompt = prompt
        self.generation = generation


class Replica:
    __slots__ = (
        "counter_samples", "created_at", "duty_mark", "duty_mark_t", "engine", "evicted", "gen", "loads", "pods", "ready_at",
        "rid", "role", "state",
    )

    def __init__(self, rid: int, role: RoleGroup, pods: int, gpus_per_pod: int, t: float) -> None:
        self.rid = rid
        self.role = role
        self.state = PENDING
        self.pods = [Pod(gpus_per_pod) for _ in range(pods)]
        self.engine: Engine | None = None
        self.created_at = t
        self.ready_at = 0.0
        self.gen = 0
        """Bumped on every state change, so stale scheduled callbacks can be ignored."""
        self.evicted = False
        """Reloading after an eviction (its GPU time is the eviction's cost)."""
        self.loads = 0
        self.duty_mark = 0.0
        self.duty_mark_t = t
        self.counter_samples: deque[CounterSample] = deque()

    def bound_gpus(self) -> int:
        return sum(p.gpus for p in self.pods if p.node is not None)


class RoleGroup:
    """One role's replicas, its gateway queue and its last observation."""

    __slots__ = ("desired", "does_decode", "does_prefill", "gateway", "name", "obs", "ready", "replicas", "series", "setup")

    def __init__(self, setup: RoleSetup) -> None:
        self.name = setup.role
        self.setup = setup
        self.replicas: list[Replica] = []
        """Replicas the workload counts (not draining)."""
        self.ready: list[Replica] = []
        """Serving and routable."""
        self.gateway: deque[Request] = deque()
        """Requests held because no replica of this role is ready."""
        self.desired = 0
        self.does_prefill = setup.role in ("aggregated", "prefill")
        self.does_decode = setup.role in ("aggregated", "decode")
        self.obs = RoleObservation(setup.role, 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0)
        self.series: dict[str, list[float | int | None]] = {k: [] for k in ("desired", "ready", "queue", "duty", "kv")}

    def starting(self) -> int:
        """Replicas asked for and not yet serving."""
        return sum(1 for r in self.replicas if r.state != SERVING)


class ReplicaSet:
    """Every replica of the model, all roles."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.roles = [RoleGroup(r) for r in run.setup.roles]
        self.by_name: dict[str, RoleGroup] = {r.name: r for r in self.roles}
        self.all: list[Replica] = []
        self.owner: dict[Engine, Replica] = {}
        self._rid = 0
        self.evictions = 0

    # ------------------------------------------------------------------ lifecycle

    def create(self, role: RoleGroup) -> Replica:
        s = self.run.setup
        self._rid += 1
        rep = Replica(self._rid, role, s.pods_per_replica, s.gpus_per_pod, self.run.env.now)
        role.replicas.append(rep)
        self.all.append(rep)
        self.run.scheduler.pending.append(rep)
        return rep

    def set_desired(self, role: RoleGroup, n: int) -> None:
        role.desired = n
        while len(role.replicas) < n:
            self.create(role)
        while len(role.replicas) > n:
            self._remove_one(role)
        self.run.scheduler.schedule()
        self.run.accounting.gpu_change()

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
        victim.engine.draining = True
        if victim.engine.is_empty():
            self._delete(victim, victim.gen)
        else:
            self.run.env.at(self.run.env.now + self.run.setup.request_timeout_s, self._drain_deadline, victim, victim.gen)

    def on_drained(self, engine: Engine) -> None:
        rep = self.owner.get(engine)
        if rep is not None and rep.state == DRAINING:
            self.run.env.at(self.run.env.now, self._delete, rep, rep.gen)

    def _drain_deadline(self, rep: Replica, gen: int) -> None:
        if rep.state != DRAINING or rep.gen != gen:
            return
        assert rep.engine is not None
        waiting, running = rep.engine.abort_all(self.run.env.now)
        for r in waiting + running:
            self.run.router.lose(r, LossReason.DRAIN)
        self._delete(rep, gen)

    def _delete(self, rep: Replica, gen: int) -> None:
        if rep.gen != gen or rep.state == GONE:
            return
        self.drop(rep)
        self.run.scheduler.schedule()
        self.run.accounting.gpu_change()

    def drop(self, rep: Replica) -> None:
        self.release_pods(rep)
        if rep.engine is not None:
            self.owner.pop(rep.engine, None)
            rep.engine = None
        rep.state = GONE
        rep.gen += 1
        if rep in self.run.scheduler.pending:
            self.run.scheduler.pending.remove(rep)
        self.all.remove(rep)

    def release_pods(self, rep: Replica) -> None:
        now = self.run.env.now
        for pod in rep.pods:
            node = pod.node
            if node is not None:
                node.free += pod.gpus
                node.pods -= 1
                node.last_change = now
                pod.node = None

    def start_loading(self, rep: Replica) -> None:
        """Every pod is bound: wait for the image, load the weights (locally when cached), initialise the engine."""
        run = self.run
        st = run.startup
        rep.loads += 1
        rng = run.draws(f"load/{rep.rid}/{rep.loads}")
        rep.state = LOADING
        start = max(run.env.now, max(p.pull_done_at for p in rep.pods))
        local = st.local_weights_s is not None and all(p.node is not None and p.node.weights_cached for p in rep.pods)
        weights = st.sample(rng, st.local_weights_s if local and st.local_weights_s is not None else st.weights_s)
        ready_t = start + weights + st.sample(rng, st.engine_init_s)
        rep.gen += 1
        run.env.at(ready_t, self._ready, rep, rep.gen)

    def _ready(self, rep: Replica, gen: int) -> None:
        if rep.gen != gen or rep.state != LOADING:
            return
        if self.run.startup.local_weights_s is not None:
            for p in rep.pods:
                if p.node is not None:
                    p.node.weights_cached = True
        self.make_ready(rep)
        self.run.log("ready", f"{rep.role.name} replica {rep.rid} after {self.run.env.now - rep.created_at:.0f} s")
        self.run.router.flush_gateway(rep.role)
        self.run.accounting.gpu_change()

    def make_ready(self, rep: Replica) -> None:
        run = self.run
        role = rep.role
        rep.state = SERVING
        rep.evicted = False
        rep.ready_at = run.env.now
        rep.engine = Engine(
            run.env, run.setup.replica, run.router, run.itl, prefill=role.does_prefill, decode=role.does_decode,
            name=f"{role.name}-{rep.rid}",
        )
        self.owner[rep.engine] = rep
        run.engines_seen.append(rep.engine)
        rep.duty_mark, rep.duty_mark_t = 0.0, run.env.now
        rep.counter_samples = deque()  # a new engine: its counters (and their series) start from zero
        role.ready.append(rep)

    def evict(self, rep: Replica, reason: LossReason, grace_s: float) -> None:
        """Evict ``rep`` from its node: in-flight requests get ``grace_s`` to finish on the old engine (no new ones),
        waiting ones go back to the router; the replica is pending again at once (its replacement pod)."""
        run = self.run
        now = run.env.now
        role = rep.role
        old = rep.engine
        if old is not None:
            self.owner.pop(old, None)
            rep.engine = None
            if rep in role.ready:
                role.ready.remove(rep)
            waiting = list(old.waiting)
            old.waiting.clear()
            for r in waiting:  # never started: the router sends them elsewhere
                run.router.route(role, r)
            if grace_s > 0 and not old.is_empty():
                old.draining = True
                run.env.at(now + grace_s, self._kill, old, reason)
            else:
                self._kill(old, reason)
        if rep.state == DRAINING:
            self.drop(rep)
            return
        self.release_pods(rep)
        rep.state = PENDING
        rep.evicted = True
        rep.gen += 1
        if rep not in run.scheduler.pending:
            run.scheduler.pending.append(rep)
        self.evictions += 1

    def _kill(self, engine: Engine, reason: LossReason) -> None:
        waiting, running = engine.abort_all(self.run.env.now)
        router = self.run.router
        for r in waiting:
            router.route(router.first_role, r)
        for r in running:
            router.aborted(r, reason)
