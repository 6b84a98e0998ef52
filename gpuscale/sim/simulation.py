"""One policy variant, all three layers wired together: the composition root of a run.

The actors, one module each, each behind the small protocols its consumers declare: ``router`` (arrivals, routing,
gateway, KV transfers), ``replica_set`` (the ReplicaSet of each role), ``scheduler`` (layer-2 placement),
``provisioner`` (layer-1 nodes: launch, consolidation, spot, drift), and the ledgers of ``accounting`` (request fates,
GPU time as an observer of nodes and replicas, events). This module builds them on one frozen ``RunContext``, adds the
metric scrape and the autoscaler sync, places the initial replicas, and runs the clock: arrivals over
[0, duration_s], then a drain until every request is decided (bounded by the longest client timeout plus one more for
streams in progress). The result is ``accounting.policy_result`` of what the run recorded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from gpuscale.signals import promql, slo_target
from gpuscale.sim import metrics as M
from gpuscale.sim.accounting import (
    EventLog,
    GpuLedger,
    RequestLedger,
    RoleRecord,
    RunRecord,
    WarmupMark,
    gpu_states,
    policy_result,
    scored_record,
)
from gpuscale.sim.context import RunContext
from gpuscale.sim.events import PRIORITY_CONTROL, Environment
from gpuscale.sim.inputs import SimSetup, Variant
from gpuscale.sim.placement import place_gang
from gpuscale.sim.pods import CounterSample, Replica
from gpuscale.sim.policies import Controller, ControllerContext, RoleObservation, build_controller
from gpuscale.sim.provisioner import NodeLayer
from gpuscale.sim.replica_set import ReplicaSet
from gpuscale.sim.router import Router
from gpuscale.sim.scheduler import Scheduler
from gpuscale.sim.states import NodeState
from gpuscale.sim.traffic import Arrivals, scored_part
from gpuscale.sim.vllm_engine import Engine, ItlHistogram
from gpuscale.sizing import MEAN_PROMPT_WINDOW_S, RATE_WINDOW_S

DISPERSION_WINDOW_S = promql.duration_s(slo_target.DISPERSION_WINDOW)


class Simulation:
    """One variant of a scenario: ``run()`` returns its ``PolicyResult`` (bound and score filled by the runner).

    Every actor is built here on the same ``RunContext`` and wired to the others' narrow protocols; the only shared
    mutable records are the nodes, pods and replicas themselves (``nodes``, ``pods``)."""

    def __init__(
        self, setup: SimSetup, variant: Variant, arrivals: Arrivals, seed: int, servable: np.ndarray, *,
        warmup: tuple[int, float] = (0, 0.0),
    ) -> None:
        """``warmup``: (requests, seconds) of a warm-up at the start of ``arrivals`` (``traffic.with_warmup``) that is
        replayed but not scored: the result covers the requests after the first ``warmup[0]`` and the time after
        ``warmup[1]``, on that window's clock."""
        self.ctx = ctx = RunContext(setup=setup, variant=variant, arrivals=arrivals, seed=seed)
        self.servable = servable
        self.warmup = warmup
        self._mark: WarmupMark | None = None
        self.env = env = Environment()
        self.requests = RequestLedger(len(arrivals))
        self.gpus = GpuLedger(env)
        self.events = EventLog(env)
        self.itl = ItlHistogram()
        self.provisioner = NodeLayer(ctx, env, self.events, self.gpus)
        self.scheduler = Scheduler(ctx, env)
        self.replicas = ReplicaSet(ctx, env, self.events, self.itl, self.gpus)
        self.router = Router(ctx, env, self.requests, self.replicas.roles)
        self.provisioner.connect(pods=self.scheduler, workloads=self.replicas)
        self.scheduler.connect(pool=self.provisioner, loader=self.replicas)
        self.replicas.connect(pending=self.scheduler, requests=self.router)
        self.router.connect(owners=self.replicas, capacity=self.provisioner)
        self.gpus.connect(lambda: gpu_states(self.provisioner.nodes, self.replicas.all))
        self.scale_events = 0
        self.series_t: list[float] = []
        self.series_gpus: list[int] = []
        self.series_nodes: list[int] = []
        self._next_series = 0.0
        cctx = ControllerContext(
            roles=variant.sizing if variant.sizing is not None else {r.role: r.sizing for r in setup.roles},
            replica=setup.replica, backend=setup.backend,
            clock_start=setup.clock_start, clock_rate=setup.clock_rate, horizon_s=setup.duration_s + 2 * setup.request_timeout_s,
        )
        self.controller: Controller = build_controller(variant.policy, cctx)

    # ------------------------------------------------------------------ main loop

    def run(self, progress: Callable[[float], None] | None = None) -> M.PolicyResult:
        s, env, ledger = self.ctx.setup, self.env, self.requests
        self._initial_state()
        self.provisioner.start()
        self.router.start()
        env.at(s.scrape_s, self._scrape, priority=PRIORITY_CONTROL)
        if self.ctx.variant.front_door is not None:
            env.at(self.ctx.variant.front_door.poll_s, self._scrape_door, priority=PRIORITY_CONTROL)
        env.at(s.scrape_s * 1.5, self._sync, priority=PRIORITY_CONTROL)
        if self.warmup[1] > 0:
            env.at(self.warmup[1], self._open_scored_window, priority=PRIORITY_CONTROL)
        chunks = 50 if progress is not None else 1
        for i in range(1, chunks + 1):
            env.run(s.duration_s * i / chunks)
            if progress is not None:
                progress(i / chunks)
        # drain: keep every layer running until each request is decided, within the longest client timeout plus one
        # more for streams in progress
        longest = max([s.request_timeout_s, *self.ctx.arrivals.timeouts_s.values()])
        bound = s.duration_s + longest + s.request_timeout_s
        self.replicas.sync(env.now)  # the lazy engines' completions so far, before the ledger is read
        while ledger.open and env.now < bound:
            env.run(min(env.now + s.scrape_s, bound))
            self.replicas.sync(env.now)
        if ledger.open:
            ledger.close(env.now)
        end = max(s.duration_s, ledger.last_decided_t)
        if self._mark is None:
            return policy_result(self.ctx, self.record(end), self.servable)
        mark = self._mark
        itl = ItlHistogram()
        itl.counts = [max(a - b, 0.0) for a, b in zip(self.itl.counts, mark.itl_counts, strict=True)]
        itl.total = sum(itl.counts)
        scored = scored_record(self.record(end), mark, (itl.quantile(0.5), itl.quantile(0.99)))
        ctx = replace(self.ctx, arrivals=scored_part(self.ctx.arrivals, mark.warm, mark.warmup_s))
        return policy_result(ctx, scored, self.servable[mark.warm:])

    def _open_scored_window(self) -> None:
        """The warm-up ends: note what has been recorded so far, which the scored result leaves out."""
        t = self.env.now
        self.replicas.sync(t)
        self._mark = WarmupMark(self.warmup[0], t, self.record(t), tuple(self.itl.counts))
        # the scored window's peak node count starts from the nodes alive now
        self.provisioner.max_nodes = len(self.provisioner.nodes)

    def record(self, end_t: float) -> RunRecord:
        """What the run measured up to ``end_t``, frozen."""
        q, engines, prov = self.requests, self.replicas.engines, self.provisioner
        return RunRecord(
            end_t=end_t, status=np.asarray(q.status, dtype=np.int8), loss=np.asarray(q.loss, dtype=np.int8),
            flags=np.asarray(q.flags, dtype=np.int8), first=np.asarray(q.first, dtype=float),
            done=np.asarray(q.done, dtype=float), gpu_seconds=self.gpus.integral(end_t),
            itl_p50_s=self.itl.quantile(0.5), itl_p99_s=self.itl.quantile(0.99),
            preemptions=sum(e.preemptions for e in engines), prefix_hit_tokens=sum(e.prefix_hit_tokens for e in engines),
            prefix_query_tokens=sum(e.prefix_query_tokens for e in engines), retried=self.router.retried,
            evictions=self.replicas.evictions, interruptions=prov.interruptions, launched=prov.launched,
            terminated=prov.terminated, max_nodes=prov.max_nodes, ready_latencies=tuple(prov.ready_latencies),
            scale_events=self.scale_events, roles=tuple(RoleRecord(r.name, r.series) for r in self.replicas.roles),
            series_t=self.series_t, series_gpus=self.series_gpus, series_nodes=self.series_nodes,
            events=self.events.events, scale_up_ready=self.scheduler.scale_up_ready_s(),
        )

    def _initial_state(self) -> None:
        reps = self.replicas
        init = self.ctx.variant.initial_replicas
        for role in reps.roles:
            n = init.get(role.name, role.setup.initial_replicas) if init is not None else role.setup.initial_replicas
            for _ in range(n):
                rep = reps.create(role)
                self._place_warm(rep)
            role.desired = n

    def _place_warm(self, rep: Replica) -> None:
        prov = self.provisioner
        needs = [p.gpus for p in rep.pods]
        assign = place_gang(needs, [x for x in prov.nodes if x.state == NodeState.READY], "binpack")
        while assign is None:  # warm nodes with the image cached, as if they had run all along
            prov.warm_node()
            assign = place_gang(needs, [x for x in prov.nodes if x.state == NodeState.READY], "binpack")
        for pod, node in zip(rep.pods, assign, strict=True):
            self.scheduler.bind(pod, node)
        self.scheduler.discard(rep)
        self.replicas.make_ready(rep)

    # ------------------------------------------------------------------ layer 3: metrics and controller

    def _scrape(self) -> None:
        t = self.env.now
        for role in self.replicas.roles:
            duty = kv = queue = running = 0.0
            rates = [0.0] * 9
            for rep in role.ready:
                e = rep.engine
                assert e is not None
                e.sync(t)
                busy = e.busy_time(t)
                span = t - rep.duty_mark_t
                duty += min((busy - rep.duty_mark) / span, 1.0) if span > 0 else 0.0
                rep.duty_mark, rep.duty_mark_t = busy, t
                queue += e.num_waiting(t)
                kv += e.kv_usage(t)
                running += e.num_running
                for i, r in enumerate(_counter_rates(rep, t, e)):
                    rates[i] += r
            gw = self.router.purge_gateway(role, t)
            role.obs = RoleObservation(
                role.name, role.desired, len(role.ready), duty, queue, float(gw), kv, running, *rates,
            )
        s = self.ctx.setup
        if t >= self._next_series - 1e-9 and t <= s.duration_s + 1e-9:
            self._record_series(t)
            self._next_series = t + s.series_s
        self.env.at(t + s.scrape_s, self._scrape, priority=PRIORITY_CONTROL)

    def _scrape_door(self) -> None:
        """The front door's queue, scraped at its own (shorter) interval: what wakes a role at zero."""
        t = self.env.now
        door = self.ctx.variant.front_door
        assert door is not None
        for role in self.replicas.roles:
            held = self.router.purge_gateway(role, t)
            role.obs = replace(role.obs, gateway=float(held))
        self.env.at(t + door.poll_s, self._scrape_door, priority=PRIORITY_CONTROL)

    def _record_series(self, t: float) -> None:
        self.series_t.append(round(t, 3))
        for role in self.replicas.roles:
            o, ser = role.obs, role.series
            ser["desired"].append(role.desired)
            ser["ready"].append(o.ready)
            ser["queue"].append(o.queue + o.gateway)
            ser["duty"].append(round(o.duty_sum / o.ready, 4) if o.ready else None)
            ser["kv"].append(round(o.kv_sum / o.ready, 4) if o.ready else None)
        self.series_gpus.append(self.gpus.gpus_now())
        self.series_nodes.append(len(self.provisioner.nodes))

    def _sync(self) -> None:
        t = self.env.now
        reps = self.replicas
        obs: dict[str, RoleObservation] = {r.name: replace(r.obs, current=r.desired) for r in reps.roles}
        for name, n in self.controller.decide(t, obs).items():
            role = reps.by_name[name]
            if n != role.desired:
                self.events.log("scale", f"{name} {role.desired} -> {n}")
                self.scale_events += 1
                reps.set_desired(role, n)
        self.env.at(t + self.controller.sync_period_s, self._sync, priority=PRIORITY_CONTROL)


def _counter_rates(rep: Replica, t: float, e: Engine) -> tuple[float, ...]:
    """Record this scrape of the engine's counters; return their per-second increase over the windows' scrapes
    (Prometheus ``rate()`` needs two samples: a pod scraped once reports no rate yet): over 1 minute the prompt and
    output tokens, finished requests with their queue time, and inter-token gaps; over 5 minutes the finished requests
    and their prompt tokens (the recent mean prompt); over 30 s the prompt tokens (their sub-minute variance,
    ``slo_target.dispersion``)."""
    samples = rep.counter_samples
    now = CounterSample(
        t, e.prompt_tokens, e.generation_tokens, e.done_requests, e.done_prompt_tokens, e.queue_time_sum, e.itl_sum,
        e.itl_count,
    )
    samples.append(now)
    while samples[0].t <= t - MEAN_PROMPT_WINDOW_S + 1e-9:
        samples.popleft()
    s1 = next(x for x in samples if x.t > t - RATE_WINDOW_S + 1e-9)
    s_short = next(x for x in samples if x.t > t - DISPERSION_WINDOW_S + 1e-9)
    s5 = samples[0]
    span1, span5, span_short = t - s1.t, t - s5.t, t - s_short.t
    zero = (0.0,) * 9
    if span1 <= 0:
        return zero
    return (
        (now.prompt - s1.prompt) / span1, (now.generation - s1.generation) / span1,
        (now.done - s1.done) / span1, (now.queue_sum - s1.queue_sum) / span1,
        (now.itl_sum - s1.itl_sum) / span1, (now.itl_count - s1.itl_count) / span1,
        (now.done - s5.done) / span5, (now.done_prompt - s5.done_prompt) / span5,
        (now.prompt - s_short.prompt) / span_short if span_short > 0 else 0.0,
    )
