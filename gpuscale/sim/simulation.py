"""One policy variant, all three layers: arrivals -> router -> engines <- autoscaler; pods -> scheduler -> nodes.

* Router: each request goes to the ready replica with the least outstanding work (decode: least KV in use);
  with no ready replica the gateway holds it until one is ready or the client's timeout passes.
* Layer 3: the variant's controller reads the last scrape (every 15 s: duty cycle over the interval,
  ``num_requests_waiting``, ``kv_cache_usage_perc``, and ``rate(vllm:prompt_tokens_total[1m])`` per pod from the
  scrapes of the last minute) and sets replicas per role. A removed replica drains (no new
  requests; in-flight ones finish or are lost at ``request_timeout_s``); a pending or loading one is deleted.
* Layer 2: pending replicas are placed in creation order, as a gang or pod by pod (``gang.py``).
* Layer 1: unplaceable pods make the provisioner launch nodes (``nodes.py``); the disruption controller removes
  empty nodes after ``consolidateAfter`` and, under ``WhenEmptyOrUnderutilized``, evicts replicas to repack.

GPU time is integrated piecewise between cluster changes by what each GPU is doing (provisioning, loading,
waiting for its gang, empty, serving); free GPUs on nodes shared with other tenants are not the model's cost.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Literal

import numpy as np
from pydantic import Field

from gpuscale.sim import gang as gang_mod
from gpuscale.sim import metrics as M
from gpuscale.sim.engine import PRIORITY_ARRIVAL, PRIORITY_CONTROL, Environment
from gpuscale.sim.gang import SchedulerSpec
from gpuscale.sim.nodes import READY, ConsolidationSpec, Node, ProvisionerSpec, StartupSpec, consolidation_candidate
from gpuscale.sim.policies import Controller, ControllerContext, PolicySpec, RoleObservation, build_controller
from gpuscale.sim.replica import DROPPED, Engine, ItlHistogram, ReplicaModel, Request
from gpuscale.sim.traffic import Arrivals
from gpuscale.sizing import RATE_WINDOW_S, RoleSizing
from gpuscale.spec.base import Spec
from gpuscale.spec.model import Role

MAX_EVENTS_LOGGED = 300


class RoleSetup(Spec):
    """One serving role of the model."""

    role: Role
    initial_replicas: int = Field(ge=0)
    """Ready replicas at t = 0 (placed on warm nodes)."""
    sizing: RoleSizing
    """The sized autoscaler numbers (gpuscale policy, maxima, oracle capacity)."""


class InitialNode(Spec):
    """A node present at t = 0 that other tenants partly use (the fragmented cluster of the gang scenario)."""

    foreign_gpus: int = Field(default=0, ge=0)
    """GPUs other workloads hold on it for the whole run."""


class SimSetup(Spec):
    """Everything about the model and cluster a run needs, derived from spec and sizing."""

    stack: str
    model: str
    mode: Literal["aggregated", "disaggregated"]
    replica: ReplicaModel
    pods_per_replica: int = Field(gt=0)
    gpus_per_pod: int = Field(gt=0)
    instance_type: str
    gpus_per_node: int = Field(gt=0)
    usd_per_gpu_hour: float = Field(gt=0)
    pool_gpu_limit: int = Field(gt=0)
    """NodePool ``limits['nvidia.com/gpu']``: the provisioner never exceeds it."""
    ttft_slo_s: float = Field(gt=0)
    itl_slo_s: float = Field(gt=0)
    request_timeout_s: float = Field(gt=0)
    roles: list[RoleSetup] = Field(min_length=1)
    startup: StartupSpec
    backend: Literal["keda", "hpa"] = "keda"
    extra_nodes: list[InitialNode] = Field(default_factory=list)
    duration_s: float = Field(gt=0)
    scrape_s: float = Field(default=15.0, gt=0)
    """Prometheus scrape (and DCGM averaging) interval."""
    series_s: float = Field(default=15.0, gt=0)
    """Sampling interval of the reported time series."""


class Variant(Spec):
    """One policy compared in a scenario: the autoscaler plus the layer-1 and layer-2 settings it runs with."""

    name: str
    description: str
    policy: PolicySpec
    provisioner: ProvisionerSpec
    consolidation: ConsolidationSpec
    scheduler: SchedulerSpec
    retry_evicted: bool = False
    """Clients retry requests lost to an eviction (else they count as lost)."""
    initial_replicas: int | None = Field(default=None, ge=0)
    """Override the setup's initial replicas for every role."""


PENDING, LOADING, SERVING, DRAINING, GONE = range(5)


class _Pod:
    __slots__ = ("bound_at", "gpus", "node", "pull_done_at")

    def __init__(self, gpus: int) -> None:
        self.gpus = gpus
        self.node: Node | None = None
        self.bound_at = 0.0
        self.pull_done_at = 0.0


class _Replica:
    __slots__ = (
        "counter_samples", "created_at", "duty_mark", "duty_mark_t", "engine", "evicted", "gen", "pods", "ready_at", "rid",
        "role", "state",
    )

    def __init__(self, rid: int, role: _Role, pods: int, gpus_per_pod: int, t: float) -> None:
        self.rid = rid
        self.role = role
        self.state = PENDING
        self.pods = [_Pod(gpus_per_pod) for _ in range(pods)]
        self.engine: Engine | None = None
        self.created_at = t
        self.ready_at = 0.0
        self.gen = 0
        self.evicted = False
        self.duty_mark = 0.0
        self.duty_mark_t = t
        self.counter_samples: deque[tuple[float, int, int]] = deque()
        """(scrape time, prompt tokens, generation tokens) of this engine's counters within the rate window."""

    def bound_gpus(self) -> int:
        return sum(p.gpus for p in self.pods if p.node is not None)


class _Role:
    __slots__ = ("desired", "does_decode", "does_prefill", "gateway", "name", "obs", "ready", "replicas", "series", "setup")

    def __init__(self, setup: RoleSetup) -> None:
        self.name = setup.role
        self.setup = setup
        self.replicas: list[_Replica] = []
        """Replicas the workload counts (not draining)."""
        self.ready: list[_Replica] = []
        """Serving and routable."""
        self.gateway: deque[Request] = deque()
        self.desired = 0
        self.does_prefill = setup.role in ("aggregated", "prefill")
        self.does_decode = setup.role in ("aggregated", "decode")
        self.obs = RoleObservation(setup.role, 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0)
        self.series: dict[str, list[float | int | None]] = {k: [] for k in ("desired", "ready", "queue", "duty", "kv")}


class Simulation:
    """Runs one variant of a scenario; ``run()`` returns its ``PolicyResult`` (score filled in by the runner)."""

    def __init__(self, setup: SimSetup, variant: Variant, arrivals: Arrivals, seed: int) -> None:
        self.setup = setup
        self.variant = variant
        self.arrivals = arrivals
        self.seed = seed

    def run(self, progress: Callable[[float], None] | None = None) -> M.PolicyResult:
        return _Run(self.setup, self.variant, self.arrivals, self.seed).execute(progress)


class _Run:
    """Mutable state of one run; implements the engines' sink."""

    def __init__(self, setup: SimSetup, variant: Variant, arrivals: Arrivals, seed: int) -> None:
        self.s = setup
        self.v = variant
        self.a = arrivals
        self.env = Environment()
        # common random numbers: every variant draws node and startup latencies from the same streams
        self.rng_nodes = random.Random(f"{seed}/nodes")
        self.rng_start = random.Random(f"{seed}/startup")
        self.itl = ItlHistogram()
        n = len(arrivals)
        self.status = np.zeros(n, dtype=np.int8)
        self.first = np.full(n, np.nan)
        self.done = np.full(n, np.nan)
        self.deadline = np.empty(n)
        self._t = arrivals.arrival_s.tolist()
        self._p = arrivals.prompt_tokens.tolist()
        self._o = arrivals.output_tokens.tolist()
        self.roles = [_Role(r) for r in setup.roles]
        self.by_name: dict[str, _Role] = {r.name: r for r in self.roles}
        self.first_role = self.roles[0]
        self.decode_role = self.by_name.get("decode")
        self.nodes: list[Node] = []
        self.reps: list[_Replica] = []
        self.pending: list[_Replica] = []
        self.owner: dict[Engine, _Replica] = {}
        self._nid = 0
        self._rid = 0
        self.retried = self.evictions = self.scale_events = 0
        self.launched = self.terminated = self.max_nodes = 0
        self.ready_latencies: list[float] = []
        self.decision_pending = False
        self.demand_since: float | None = None
        self.last_scale_up_t = -math.inf
        self.events: list[M.SimEvent] = []
        self._last_t = 0.0
        self._counts = (0, 0, 0, 0, 0, 0)
        self._integ = [0.0] * 6  # provisioning, empty, gang_wait, loading, serving, eviction reload
        self.series_t: list[float] = []
        self.series_gpus: list[int] = []
        self.series_nodes: list[int] = []
        self._next_series = 0.0
        ctx = ControllerContext(
            roles={r.role: r.sizing for r in setup.roles}, replica=setup.replica, arrivals=arrivals,
            duration_s=setup.duration_s,
            lead_s=variant.provisioner.worst_case_s + setup.startup.worst_case_s + setup.scrape_s * 2,
            itl_slo_s=setup.itl_slo_s, mode=setup.mode,
        )
        self.controller: Controller = build_controller(variant.policy, ctx, setup.backend)

    # ------------------------------------------------------------------ set-up and main loop

    def execute(self, progress: Callable[[float], None] | None) -> M.PolicyResult:
        s, env = self.s, self.env
        self._initial_state()
        if len(self.a):
            env.at(self._t[0], self._arrive, 0, priority=PRIORITY_ARRIVAL)
        env.at(s.scrape_s, self._scrape, priority=PRIORITY_CONTROL)
        env.at(s.scrape_s * 1.5, self._sync, priority=PRIORITY_CONTROL)
        if self.v.consolidation.policy != "none":
            env.at(self.v.consolidation.poll_s, self._disrupt, priority=PRIORITY_CONTROL)
        if self.v.provisioner.scan_interval_s > 0:
            env.at(self.v.provisioner.scan_interval_s, self._ca_scan, priority=PRIORITY_CONTROL)
        chunks = 50 if progress is not None else 1
        for i in range(1, chunks + 1):
            env.run(s.duration_s * i / chunks)
            if progress is not None:
                progress(i / chunks)
        self._account()
        return self._result()

    def _initial_state(self) -> None:
        s = self.s
        for spec in s.extra_nodes:
            node = self._new_node(0.0, foreign=spec.foreign_gpus)
            node.state, node.ready_at = READY, 0.0
        for role in self.roles:
            n = self.v.initial_replicas if self.v.initial_replicas is not None else role.setup.initial_replicas
            for _ in range(n):
                rep = self._create_replica(role)
                needs = [p.gpus for p in rep.pods]
                ready = [x for x in self.nodes if x.state == READY]
                assign = gang_mod.place_gang(needs, ready, "binpack")
                while assign is None:  # warm nodes with the image cached, as if they had run all along
                    node = self._new_node(0.0)
                    node.state, node.ready_at, node.pull_done_at = READY, 0.0, 0.0
                    assign = gang_mod.place_gang(needs, [x for x in self.nodes if x.state == READY], "binpack")
                for pod, node in zip(rep.pods, assign, strict=True):
                    self._bind(pod, node)
                self.pending.remove(rep)
                self._make_ready(rep)
            role.desired = n
        self._account()

    # ------------------------------------------------------------------ requests

    def _arrive(self, i: int) -> None:
        env = self.env
        if i + 1 < len(self._t):
            env.at(self._t[i + 1], self._arrive, i + 1, priority=PRIORITY_ARRIVAL)
        t = self._t[i]
        timeout = self.a.timeouts_s.get(i, self.s.request_timeout_s) if self.a.timeouts_s else self.s.request_timeout_s
        self.deadline[i] = t + timeout
        req = Request(i, t, self._p[i], self._o[i], t + timeout)
        if not self.s.replica.fits(req.prompt, req.output):
            self.status[i] = M.REJECTED
            req.state = DROPPED
            return
        self._route(self.first_role, req)

    def _route(self, role: _Role, req: Request) -> None:
        ready = role.ready
        if not ready:
            role.gateway.append(req)
            return
        if len(ready) == 1:
            best = ready[0]
        elif role.does_prefill:
            best = min(ready, key=_prefill_load)
        else:
            best = min(ready, key=_decode_load)
        assert best.engine is not None
        best.engine.submit(req)

    def _flush_gateway(self, role: _Role) -> None:
        t = self.env.now
        gw = role.gateway
        while gw and role.ready:
            req = gw.popleft()
            if req.deadline < t:
                self.on_timeout(req, t)
            else:
                self._route(role, req)

    def _purge_gateway(self, role: _Role, t: float) -> int:
        gw = role.gateway
        while gw and gw[0].deadline < t:
            self.on_timeout(gw.popleft(), t)
        return len(gw)

    # engine sink
    def on_first_token(self, req: Request, t: float) -> None:
        req.first_t = t
        self.first[req.rid] = t

    def on_done(self, req: Request, t: float) -> None:
        if self.status[req.rid] == M.IN_SYSTEM:
            self.done[req.rid] = t
            self.status[req.rid] = M.COMPLETED

    def on_prefill_done(self, req: Request, t: float) -> None:
        self.env.at(t + self.s.replica.kv_transfer_s(req.prompt), self._handoff, req)

    def on_timeout(self, req: Request, t: float) -> None:
        req.state = DROPPED
        if self.status[req.rid] == M.IN_SYSTEM:
            self.status[req.rid] = M.TIMED_OUT

    def on_drained(self, engine: Engine) -> None:
        rep = self.owner.get(engine)
        if rep is not None and rep.state == DRAINING:
            self.env.at(self.env.now, self._delete_replica, rep, rep.gen)

    def _handoff(self, req: Request) -> None:
        if req.state == DROPPED:
            return
        if req.deadline < self.env.now:
            self.on_timeout(req, self.env.now)
            return
        assert self.decode_role is not None
        self._route(self.decode_role, req)

    # ------------------------------------------------------------------ layer 3: metrics and controller

    def _scrape(self) -> None:
        t = self.env.now
        for role in self.roles:
            duty = kv = queue = running = prompt_rate = gen_rate = 0.0
            for rep in role.ready:
                e = rep.engine
                assert e is not None
                busy = e.busy_time(t)
                span = t - rep.duty_mark_t
                duty += min((busy - rep.duty_mark) / span, 1.0) if span > 0 else 0.0
                rep.duty_mark, rep.duty_mark_t = busy, t
                queue += e.num_waiting(t)
                kv += e.kv_usage
                running += e.num_running
                p_rate, g_rate = _counter_rates(rep, t, e)
                prompt_rate += p_rate
                gen_rate += g_rate
            gw = self._purge_gateway(role, t)
            role.obs = RoleObservation(
                role.name, role.desired, len(role.ready), duty, queue, float(gw), kv, running, prompt_rate, gen_rate,
            )
        if t >= self._next_series - 1e-9:
            self._record_series(t)
            self._next_series = t + self.s.series_s
        self.env.at(t + self.s.scrape_s, self._scrape, priority=PRIORITY_CONTROL)

    def _record_series(self, t: float) -> None:
        self.series_t.append(round(t, 3))
        for role in self.roles:
            o, ser = role.obs, role.series
            ser["desired"].append(role.desired)
            ser["ready"].append(o.ready)
            ser["queue"].append(o.queue + o.gateway)
            ser["duty"].append(round(o.duty_sum / o.ready, 4) if o.ready else None)
            ser["kv"].append(round(o.kv_sum / o.ready, 4) if o.ready else None)
        prov, empty, gang, loading, serving, _ = self._counts
        self.series_gpus.append(prov + empty + gang + loading + serving)
        self.series_nodes.append(len(self.nodes))

    def _sync(self) -> None:
        t = self.env.now
        obs: dict[str, RoleObservation] = {r.name: replace(r.obs, current=r.desired) for r in self.roles}
        for name, n in self.controller.decide(t, obs).items():
            role = self.by_name[name]
            if n != role.desired:
                self._log("scale", f"{name} {role.desired} -> {n}")
                self.scale_events += 1
                self._set_desired(role, n)
        self.env.at(t + self.controller.sync_period_s, self._sync, priority=PRIORITY_CONTROL)

    def _set_desired(self, role: _Role, n: int) -> None:
        role.desired = n
        while len(role.replicas) < n:
            self._create_replica(role)
        while len(role.replicas) > n:
            self._remove_one(role)
        self._schedule()
        self._account()

    def _create_replica(self, role: _Role) -> _Replica:
        self._rid += 1
        rep = _Replica(self._rid, role, self.s.pods_per_replica, self.s.gpus_per_pod, self.env.now)
        role.replicas.append(rep)
        self.reps.append(rep)
        self.pending.append(rep)
        return rep

    def _remove_one(self, role: _Role) -> None:
        def rank(rep: _Replica) -> tuple[int, float, float]:
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
            self._drop_replica(victim)
            return
        victim.state = DRAINING
        role.ready.remove(victim)
        assert victim.engine is not None
        victim.engine.draining = True
        if victim.engine.is_empty():
            self._delete_replica(victim, victim.gen)
        else:
            self.env.at(self.env.now + self.s.request_timeout_s, self._drain_deadline, victim, victim.gen)

    def _drain_deadline(self, rep: _Replica, gen: int) -> None:
        if rep.state != DRAINING or rep.gen != gen:
            return
        assert rep.engine is not None
        waiting, running = rep.engine.abort_all(self.env.now)
        for r in waiting + running:
            self._lose(r)
        self._delete_replica(rep, gen)

    def _delete_replica(self, rep: _Replica, gen: int) -> None:
        if rep.gen != gen or rep.state == GONE:
            return
        self._drop_replica(rep)
        self._schedule()
        self._account()

    def _drop_replica(self, rep: _Replica) -> None:
        self._release_pods(rep)
        if rep.engine is not None:
            self.owner.pop(rep.engine, None)
            rep.engine = None
        rep.state = GONE
        rep.gen += 1
        if rep in self.pending:
            self.pending.remove(rep)
        self.reps.remove(rep)

    def _lose(self, req: Request) -> None:
        req.state = DROPPED
        if self.status[req.rid] == M.IN_SYSTEM:
            self.status[req.rid] = M.LOST

    # ------------------------------------------------------------------ layer 2: placement and start-up

    def _schedule(self) -> None:
        if not self.pending:
            self.demand_since = None
            return
        now = self.env.now
        sched = self.v.scheduler
        ready_nodes = [n for n in self.nodes if n.state == READY]
        still: list[_Replica] = []
        changed = False
        for rep in self.pending:
            unbound = [p for p in rep.pods if p.node is None]
            if sched.gang:
                assign = gang_mod.place_gang([p.gpus for p in unbound], ready_nodes, sched.placement)
                if assign is not None:
                    for pod, node in zip(unbound, assign, strict=True):
                        self._bind(pod, node)
                    changed = True
            else:
                for pod in unbound:
                    target = gang_mod.place_one(pod.gpus, ready_nodes, sched.placement)
                    if target is not None:
                        self._bind(pod, target)
                        changed = True
            if all(p.node is not None for p in rep.pods):
                self._start_loading(rep)
            else:
                still.append(rep)
        self.pending = still
        if changed:
            self._account()
        if still:
            if self.demand_since is None:
                self.demand_since = now
            if self.v.provisioner.scan_interval_s == 0 and not self.decision_pending:
                self.decision_pending = True
                self.env.after(self.v.provisioner.sample_launch_delay(self.rng_nodes), self._provision)
        else:
            self.demand_since = None

    def _bind(self, pod: _Pod, node: Node) -> None:
        now = self.env.now
        node.free -= pod.gpus
        node.pods += 1
        node.last_change = now
        pod.node = node
        pod.bound_at = now
        if node.pull_done_at is None:
            node.pull_done_at = now + self.s.startup.sample(self.rng_start, self.s.startup.image_pull_s)
        pod.pull_done_at = max(node.pull_done_at, now)

    def _release_pods(self, rep: _Replica) -> None:
        now = self.env.now
        for pod in rep.pods:
            node = pod.node
            if node is not None:
                node.free += pod.gpus
                node.pods -= 1
                node.last_change = now
                pod.node = None

    def _start_loading(self, rep: _Replica) -> None:
        st = self.s.startup
        rep.state = LOADING
        start = max(self.env.now, max(p.pull_done_at for p in rep.pods))
        ready_t = start + st.sample(self.rng_start, st.weights_s) + st.sample(self.rng_start, st.engine_init_s)
        rep.gen += 1
        self.env.at(ready_t, self._replica_ready, rep, rep.gen)

    def _replica_ready(self, rep: _Replica, gen: int) -> None:
        if rep.gen != gen or rep.state != LOADING:
            return
        self._make_ready(rep)
        self._log("ready", f"{rep.role.name} replica {rep.rid} after {self.env.now - rep.created_at:.0f} s")
        self._flush_gateway(rep.role)
        self._account()

    def _make_ready(self, rep: _Replica) -> None:
        role = rep.role
        rep.state = SERVING
        rep.evicted = False
        rep.ready_at = self.env.now
        rep.engine = Engine(
            self.env, self.s.replica, self, self.itl, prefill=role.does_prefill, decode=role.does_decode,
            name=f"{role.name}-{rep.rid}",
        )
        self.owner[rep.engine] = rep
        rep.duty_mark, rep.duty_mark_t = 0.0, self.env.now
        rep.counter_samples = deque()  # a new engine: its counters (and their series) start from zero
        role.ready.append(rep)

    def _evict(self, rep: _Replica) -> None:
        now = self.env.now
        role = rep.role
        if rep.engine is not None:
            waiting, running = rep.engine.abort_all(now)
            self.owner.pop(rep.engine, None)
            rep.engine = None
            if rep in role.ready:
                role.ready.remove(rep)
            for r in waiting:  # never started: the router sends them elsewhere
                self._route(role, r)
            for r in running:
                if self.v.retry_evicted and r.deadline >= now:
                    self.retried += 1
                    r.first_t = None
                    r.prefilled = 0
                    self.first[r.rid] = np.nan
                    self._route(self.first_role, r)
                else:
                    self._lose(r)
        if rep.state == DRAINING:
            self._drop_replica(rep)
            return
        self._release_pods(rep)
        rep.state = PENDING
        rep.evicted = True
        rep.gen += 1
        if rep not in self.pending:
            self.pending.append(rep)
        self.evictions += 1

    # ------------------------------------------------------------------ layer 1: nodes

    def _new_node(self, requested_at: float, foreign: int = 0) -> Node:
        self._nid += 1
        node = Node(self._nid, self.s.gpus_per_node, requested_at, foreign=foreign)
        self.nodes.append(node)
        self.max_nodes = max(self.max_nodes, len(self.nodes))
        return node

    def _ca_scan(self) -> None:
        if not self.decision_pending and any(p.node is None for r in self.pending for p in r.pods):
            self.decision_pending = True
            self.env.after(self.v.provisioner.sample_launch_delay(self.rng_nodes), self._provision)
        self.env.at(self.env.now + self.v.provisioner.scan_interval_s, self._ca_scan, priority=PRIORITY_CONTROL)

    def _provision(self) -> None:
        self.decision_pending = False
        now = self.env.now
        needs = [p.gpus for r in self.pending for p in r.pods if p.node is None]
        if not needs:
            return
        left = gang_mod.unplaced(needs, [n.free for n in self.nodes])
        if not left:
            return
        k = gang_mod.nodes_for(left, self.s.gpus_per_node)
        room = (self.s.pool_gpu_limit - sum(n.gpus for n in self.nodes)) // self.s.gpus_per_node
        k = min(k, max(room, 0))
        if k <= 0:
            self._log("limit", f"NodePool GPU limit {self.s.pool_gpu_limit} reached; {len(left)} pod(s) stay Pending")
            return
        since = self.demand_since if self.demand_since is not None else now
        for _ in range(k):
            node = self._new_node(since)
            self.launched += 1
            self.env.after(self.v.provisioner.sample_boot(self.rng_nodes), self._node_ready, node)
        self.last_scale_up_t = now
        self._log("launch", f"{k} x {self.s.instance_type} ({self.v.provisioner.kind})")
        self._account()

    def _node_ready(self, node: Node) -> None:
        if node.state != 0:  # PROVISIONING
            return
        node.state = READY
        node.ready_at = self.env.now
        node.last_change = self.env.now
        self.ready_latencies.append(self.env.now - node.requested_at)
        self._log("node", f"node {node.nid} ready {self.env.now - node.requested_at:.0f} s after its pods went Pending")
        self._schedule()
        self._account()

    def _pods_on(self, node: Node) -> list[tuple[_Replica, _Pod]]:
        return [(r, p) for r in self.reps for p in r.pods if p.node is node]

    def _fits_elsewhere(self, node: Node) -> bool:
        needs = [p.gpus for _, p in self._pods_on(node)]
        others = [n.free for n in self.nodes if n is not node and n.state == READY]
        return not gang_mod.unplaced(needs, others)

    def _disrupt(self) -> None:
        now = self.env.now
        spec = self.v.consolidation
        for _ in range(spec.budget_nodes):
            cand = consolidation_candidate(self.nodes, now, spec, self.last_scale_up_t, self._fits_elsewhere)
            if cand is None:
                break
            node, evict = cand
            if evict:
                victims = {id(r): r for r, _ in self._pods_on(node)}
                for rep in victims.values():
                    self._log("evict", f"{rep.role.name} replica {rep.rid} evicted from node {node.nid} ({spec.policy})")
                    self._evict(rep)
            node.state = 2  # GONE
            self.nodes.remove(node)
            self.terminated += 1
            self._log("terminate", f"node {node.nid} ({'underutilized' if evict else 'empty'})")
            self._schedule()
            self._account()
        self.env.at(now + spec.poll_s, self._disrupt, priority=PRIORITY_CONTROL)

    # ------------------------------------------------------------------ accounting and results

    def _account(self) -> None:
        t = self.env.now
        dt = t - self._last_t
        if dt > 0:
            for i, c in enumerate(self._counts):
                self._integ[i] += c * dt
        self._last_t = t
        prov = empty = gang = loading = serving = reload = 0
        for n in self.nodes:
            if n.state == READY:
                if n.foreign == 0:  # free GPUs of a shared node stay available to its other tenants
                    empty += n.free
            else:
                prov += n.gpus - n.foreign
        for r in self.reps:
            bound = r.bound_gpus()
            if r.state == PENDING:
                gang += bound
            elif r.state == LOADING:
                loading += bound
            else:
                serving += bound
            if r.evicted:
                reload += bound
        self._counts = (prov, empty, gang, loading, serving, reload)

    def _log(self, kind: str, detail: str) -> None:
        if len(self.events) < MAX_EVENTS_LOGGED:
            self.events.append(M.SimEvent(t_s=round(self.env.now, 3), kind=kind, detail=detail))

    def _result(self) -> M.PolicyResult:
        s, v = self.s, self.v
        end = s.duration_s
        arr = self.a.arrival_s
        status = self.status
        # a request still waiting for its first token past its client's timeout has been dropped by now
        late = (status == M.IN_SYSTEM) & np.isnan(self.first) & (self.deadline < end) & (arr < end)
        status[late] = M.TIMED_OUT
        n = int(np.count_nonzero(arr < end)) if len(arr) else 0
        status_n = status[:n]
        completed = status_n == M.COMPLETED
        first, done = self.first[:n], self.done[:n]
        out = self.a.output_tokens[:n].astype(float)
        ttft = first - arr[:n]
        with np.errstate(invalid="ignore", divide="ignore"):
            tpot = np.where(out > 1, (done - first) / np.maximum(out - 1, 1), 0.0)
        still = int(np.count_nonzero(status_n == M.IN_SYSTEM))
        decided = max(n - still, 1)
        ttft_ok = completed & (ttft <= s.ttft_slo_s)
        itl_ok = completed & (tpot <= s.itl_slo_s)
        answered = ttft[~np.isnan(ttft)]
        ttft_p99 = M.percentile(answered, 99)
        itl_p99 = self.itl.quantile(0.99)
        tp = tpot[completed & (out > 1)]
        prov, empty, gangw, loading, serving, reload = (x / 60.0 for x in self._integ)
        gpu_hours = (prov + empty + gangw + loading + serving) / 60.0
        return M.PolicyResult(
            name=v.name, description=v.description, policy=v.policy.kind, provisioner=v.provisioner.kind,
            consolidation=_consolidation_label(v.consolidation), scheduler=v.scheduler.label,
            arrived=n, completed=int(completed.sum()),
            dropped_timeout=int(np.count_nonzero(status_n == M.TIMED_OUT)),
            dropped_rejected=int(np.count_nonzero(status_n == M.REJECTED)),
            lost_in_flight=int(np.count_nonzero(status_n == M.LOST)), retried=self.retried, still_queued=still,
            ttft_attainment=round(float(ttft_ok.sum()) / decided, 6),
            itl_attainment=round(float(itl_ok.sum()) / decided, 6),
            slo_attainment=round(float((ttft_ok & itl_ok).sum()) / decided, 6),
            ttft_p50_s=_r(M.percentile(answered, 50)), ttft_p99_s=_r(ttft_p99),
            itl_p50_s=_r(self.itl.quantile(0.5)), itl_p99_s=_r(itl_p99),
            tpot_mean_s=_r(float(tp.mean())) if tp.size else None,
            ttft_p99_met=ttft_p99 is not None and ttft_p99 <= s.ttft_slo_s,
            itl_p99_met=itl_p99 is not None and itl_p99 <= s.itl_slo_s,
            gpu_hours=round(gpu_hours, 4), cost_usd=round(gpu_hours * s.usd_per_gpu_hour, 2),
            serving_gpu_minutes=round(serving, 2),
            idle_gpu_minutes=M.IdleGpuMinutes(
                provisioning=round(prov, 2), loading=round(loading, 2), gang_wait=round(gangw, 2), empty=round(empty, 2)
            ),
            evictions=self.evictions, eviction_reload_gpu_minutes=round(reload, 2), scale_events=self.scale_events,
            replicas_max={r.name: int(max(r.series["desired"], default=0) or 0) for r in self.roles},  # type: ignore[type-var]
            replicas_mean={r.name: round(float(np.mean([x or 0 for x in r.series["ready"]])), 3) if r.series["ready"] else 0.0 for r in self.roles},
            nodes=M.NodeStats(
                launched=self.launched, terminated=self.terminated, max_alive=self.max_nodes,
                first_ready_latency_s=_r(self.ready_latencies[0]) if self.ready_latencies else None,
                mean_ready_latency_s=_r(float(np.mean(self.ready_latencies))) if self.ready_latencies else None,
            ),
            tracked=self._tracked(ttft),
            events=self.events,
            series=self._series(ttft, status_n, n),
        )

    def _tracked(self, ttft: np.ndarray) -> list[M.TrackedRequest]:
        out = []
        for i, label in sorted(self.a.labels.items()):
            if i >= len(ttft):
                continue
            out.append(M.TrackedRequest(
                label=label, arrival_s=float(self.a.arrival_s[i]), prompt_tokens=int(self.a.prompt_tokens[i]),
                output_tokens=int(self.a.output_tokens[i]),
                timeout_s=self.a.timeouts_s.get(i, self.s.request_timeout_s),
                outcome=M.OUTCOMES[int(self.status[i])],
                ttft_s=None if np.isnan(ttft[i]) else round(float(ttft[i]), 3),
            ))
        return out

    def _series(self, ttft: np.ndarray, status: np.ndarray, n: int) -> M.TimeSeries:
        width = self.s.series_s
        bins = len(self.series_t)
        idx = np.minimum((self.a.arrival_s[:n] // width).astype(np.int64), max(bins - 1, 0))
        p50: list[float | None] = [None] * bins
        p99: list[float | None] = [None] * bins
        arrived = np.bincount(idx, minlength=bins)[:bins] if n else np.zeros(bins, dtype=np.int64)
        bad = (status == M.TIMED_OUT) | (status == M.REJECTED) | (status == M.LOST)
        unanswered = np.bincount(idx[bad], minlength=bins)[:bins] if n else np.zeros(bins, dtype=np.int64)
        ok = ~np.isnan(ttft)
        if n and ok.any():
            order = np.argsort(idx[ok], kind="stable")
            b, v = idx[ok][order], ttft[ok][order]
            cuts = np.flatnonzero(np.diff(b)) + 1
            for grp_b, grp_v in zip(np.split(b, cuts), np.split(v, cuts), strict=True):
                k = int(grp_b[0])
                p50[k] = round(float(np.percentile(grp_v, 50)), 4)
                p99[k] = round(float(np.percentile(grp_v, 99)), 4)
        return M.TimeSeries(
            t_s=self.series_t,
            roles=[
                M.RoleSeries(
                    role=r.name, desired=r.series["desired"], ready=r.series["ready"],
                    queue_depth=r.series["queue"], duty_cycle=r.series["duty"], kv_usage=r.series["kv"],
                )
                for r in self.roles
            ],
            gpus=self.series_gpus, nodes=self.series_nodes, ttft_p50_s=p50, ttft_p99_s=p99,
            arrived=[int(x) for x in arrived], unanswered=[int(x) for x in unanswered],
        )


def _counter_rates(rep: _Replica, t: float, e: Engine) -> tuple[float, float]:
    """Record this scrape of the engine's counters; return their per-second increase over the window's scrapes
    (Prometheus ``rate()`` needs two samples: a pod scraped once reports no rate yet)."""
    samples = rep.counter_samples
    samples.append((t, e.prompt_tokens, e.generation_tokens))
    while samples[0][0] <= t - RATE_WINDOW_S + 1e-9:
        samples.popleft()
    t0, p0, g0 = samples[0]
    span = t - t0
    if span <= 0:
        return 0.0, 0.0
    return (e.prompt_tokens - p0) / span, (e.generation_tokens - g0) / span


def _prefill_load(rep: _Replica) -> int:
    return rep.engine.load if rep.engine is not None else 1 << 30


def _decode_load(rep: _Replica) -> tuple[int, int]:
    e = rep.engine
    return (len(e.waiting), e.kv_used) if e is not None else (1 << 30, 0)


def _r(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(x, nd)


def _consolidation_label(c: ConsolidationSpec) -> str:
    if c.policy in ("WhenEmpty", "WhenEmptyOrUnderutilized"):
        return f"{c.policy} after {c.consolidate_after_s:g} s"
    return c.policy
