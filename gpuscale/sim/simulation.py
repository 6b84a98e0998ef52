"""One policy variant, all three layers wired together: the composition root of a run.

The actors, one module each: ``router`` (arrivals, routing, gateway, KV transfers), ``replicas`` (the ReplicaSet of
each role), ``placement`` (layer-2 scheduler), ``provisioner`` (layer-1 nodes: launch, consolidation, spot), and
``accounting`` (request fates, misses, GPU time, the result). This module adds the metric scrape and the autoscaler
sync, places the initial replicas, and runs the clock: arrivals over [0, duration_s], then a drain until every request
is decided (bounded by the longest client timeout plus one more for streams in progress).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from gpuscale.sim import metrics as M
from gpuscale.sim.accounting import Accounting
from gpuscale.sim.events import PRIORITY_CONTROL, Environment
from gpuscale.sim.placement import Scheduler, place_gang
from gpuscale.sim.policies import Controller, ControllerContext, RoleObservation, build_controller
from gpuscale.sim.provisioner import NodeLayer
from gpuscale.sim.replicas import CounterSample, Replica, ReplicaSet
from gpuscale.sim.router import Router
from gpuscale.sim.setup import SimSetup, Variant
from gpuscale.sim.states import NodeState
from gpuscale.sim.traffic import Arrivals
from gpuscale.sim.vllm_engine import Engine, ItlHistogram
from gpuscale.sizing import RATE_WINDOW_S


class Simulation:
    """Runs one variant of a scenario; ``run()`` returns its ``PolicyResult`` (bound and score filled by the runner)."""

    def __init__(self, setup: SimSetup, variant: Variant, arrivals: Arrivals, seed: int, servable: np.ndarray) -> None:
        self.setup = setup
        self.variant = variant
        self.arrivals = arrivals
        self.seed = seed
        self.servable = servable

    def run(self, progress: Callable[[float], None] | None = None) -> M.PolicyResult:
        return Run(self.setup, self.variant, self.arrivals, self.seed).execute(self.servable, progress)


class Run:
    """The mutable world of one run; each actor holds it to reach the others."""

    def __init__(self, setup: SimSetup, variant: Variant, arrivals: Arrivals, seed: int) -> None:
        self.setup = setup
        self.variant = variant
        self.arrivals = arrivals
        self.env = Environment()
        self.seed = seed
        self.itl = ItlHistogram()
        self.engines_seen: list[Engine] = []
        self.scale_events = 0
        self.series_t: list[float] = []
        self.series_gpus: list[int] = []
        self.series_nodes: list[int] = []
        self._next_series = 0.0
        self.startup = variant.startup if variant.startup is not None else setup.startup
        """The cold start of this variant (its cold-start choices)."""
        self.accounting = Accounting(self)
        self.provisioner = NodeLayer(self, seed)
        self.scheduler = Scheduler(self)
        self.replicas = ReplicaSet(self)
        self.router = Router(self, seed)
        ctx = ControllerContext(roles={r.role: r.sizing for r in setup.roles}, replica=setup.replica, backend=setup.backend)
        self.controller: Controller = build_controller(variant.policy, ctx)

    def log(self, kind: str, detail: str) -> None:
        self.accounting.log(kind, detail)

    def draws(self, key: str) -> random.Random:
        """Common random numbers keyed by what is drawn (the n-th node's image pull, the n-th replica's k-th load):
        every variant that launches that node or starts that replica draws the same latency."""
        return random.Random(f"{self.seed}/{key}")

    # ------------------------------------------------------------------ main loop

    def execute(self, servable: np.ndarray, progress: Callable[[float], None] | None) -> M.PolicyResult:
        s, env, acct = self.setup, self.env, self.accounting
        self._initial_state()
        self.provisioner.start()
        self.router.start()
        env.at(s.scrape_s, self._scrape, priority=PRIORITY_CONTROL)
        if self.variant.front_door is not None:
            env.at(self.variant.front_door.poll_s, self._scrape_door, priority=PRIORITY_CONTROL)
        env.at(s.scrape_s * 1.5, self._sync, priority=PRIORITY_CONTROL)
        chunks = 50 if progress is not None else 1
        for i in range(1, chunks + 1):
            env.run(s.duration_s * i / chunks)
            if progress is not None:
                progress(i / chunks)
        # drain: keep every layer running until each request is decided, within the longest client timeout plus one
        # more for streams in progress
        longest = max([s.request_timeout_s, *self.arrivals.timeouts_s.values()])
        bound = s.duration_s + longest + s.request_timeout_s
        while acct.open and env.now < bound:
            env.run(min(env.now + s.scrape_s, bound))
        if acct.open:
            acct.close(env.now)
        end = max(s.duration_s, acct.last_decided_t)
        acct.freeze(end)
        return acct.result(end, servable)

    def _initial_state(self) -> None:
        reps = self.replicas
        init = self.variant.initial_replicas
        for role in reps.roles:
            n = init.get(role.name, role.setup.initial_replicas) if init is not None else role.setup.initial_replicas
            for _ in range(n):
                rep = reps.create(role)
                self._place_warm(rep)
            role.desired = n
        self.accounting.gpu_change()

    def _place_warm(self, rep: Replica) -> None:
        prov = self.provisioner
        needs = [p.gpus for p in rep.pods]
        assign = place_gang(needs, [x for x in prov.nodes if x.state == NodeState.READY], "binpack")
        while assign is None:  # warm nodes with the image cached, as if they had run all along
            prov.warm_node()
            assign = place_gang(needs, [x for x in prov.nodes if x.state == NodeState.READY], "binpack")
        for pod, node in zip(rep.pods, assign, strict=True):
            self.scheduler.bind(pod, node)
        self.scheduler.pending.remove(rep)
        self.replicas.make_ready(rep)

    # ------------------------------------------------------------------ layer 3: metrics and controller

    def _scrape(self) -> None:
        t = self.env.now
        for role in self.replicas.roles:
            duty = kv = queue = running = prompt_rate = gen_rate = 0.0
            for rep in role.ready:
                e = rep.engine
                assert e is not None
                busy = e.busy_time(t)
                span = t - rep.duty_mark_t
                duty += min((busy - rep.duty_mark) / span, 1.0) if span > 0 else 0.0
                rep.duty_mark, rep.duty_mark_t = busy, t
                queue += e.num_waiting(t)
                kv += e.kv_usage(t)
                running += e.num_running
                p_rate, g_rate = _counter_rates(rep, t, e)
                prompt_rate += p_rate
                gen_rate += g_rate
            gw = self.router.purge_gateway(role, t)
            role.obs = RoleObservation(
                role.name, role.desired, len(role.ready), duty, queue, float(gw), kv, running, prompt_rate, gen_rate,
            )
        if t >= self._next_series - 1e-9 and t <= self.setup.duration_s + 1e-9:
            self._record_series(t)
            self._next_series = t + self.setup.series_s
        self.env.at(t + self.setup.scrape_s, self._scrape, priority=PRIORITY_CONTROL)

    def _scrape_door(self) -> None:
        """The front door's queue, scraped at its own (shorter) interval: what wakes a role at zero."""
        t = self.env.now
        door = self.variant.front_door
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
        self.series_gpus.append(self.accounting.gpu_now())
        self.series_nodes.append(len(self.provisioner.nodes))

    def _sync(self) -> None:
        t = self.env.now
        reps = self.replicas
        obs: dict[str, RoleObservation] = {r.name: replace(r.obs, current=r.desired) for r in reps.roles}
        for name, n in self.controller.decide(t, obs).items():
            role = reps.by_name[name]
            if n != role.desired:
                self.log("scale", f"{name} {role.desired} -> {n}")
                self.scale_events += 1
                reps.set_desired(role, n)
        self.env.at(t + self.controller.sync_period_s, self._sync, priority=PRIORITY_CONTROL)


def _counter_rates(rep: Replica, t: float, e: Engine) -> tuple[float, float]:
    """Record this scrape of the engine's counters; return their per-second increase over the window's scrapes
    (Prometheus ``rate()`` needs two samples: a pod scraped once reports no rate yet)."""
    samples = rep.counter_samples
    samples.append(CounterSample(t, e.prompt_tokens, e.generation_tokens))
    while samples[0].t <= t - RATE_WINDOW_S + 1e-9:
        samples.popleft()
    s0 = samples[0]
    span = t - s0.t
    if span <= 0:
        return 0.0, 0.0
    return (e.prompt_tokens - s0.prompt) / span, (e.generation_tokens - s0.generation) / span
