"""Layer 3: the replica autoscalers compared, each run with its controller's real mechanics.

One discriminated union of policy specs (``kind:``):

* ``dcgm-duty-cycle`` - the naive HPA on ``DCGM_FI_DEV_GPU_UTIL`` through prometheus-adapter (a Pods metric):
  ``desired = ceil(ready x utilisation / target)`` with the HPA's missing-pod rules, 10% tolerance, 15 s sync,
  default behaviour (up: max(+4 pods, +100%) per 15 s; down: 300 s stabilisation). Optionally an operator adds
  one replica by hand at a given time (``kubectl scale``).
* ``queue-depth`` - HPA/KEDA on ``sum(vllm:num_requests_waiting)`` (prefill, aggregated) and
  ``sum(vllm:kv_cache_usage_perc)`` (decode, aggregated) as AverageValue targets, generic thresholds (queue 5 as
  in llm-d/Dynamo, KV 0.8), Kubernetes default behaviour.
* ``gpuscale`` - what gpuscale emits for the spec: one rule per ``RoleSizing.signals`` entry, each read by the
  signal object itself (``Signal.observe``) on the scrape, through the same expression tree its trigger's PromQL is
  rendered from (load in replicas' worth of work, queued prefill seconds, KV use, the latency guards as ``Value``
  targets; with backend ``hpa`` per-pod metrics and the HPA's missing-pod rules), with the warm minimum, maximum, stabilisation and polling, the scale-up/-down policies of
  ``gpuscale.manifests.autoscaling.hpa_behavior``, KEDA activation and cooldown when the minimum is 0, and the wake
  and warm-up schedules as KEDA ``cron`` triggers (on the run's clock).
* ``fixed`` - a constant replica count per role (a hand-made scale-up; the ceiling reference).

Controllers are plain objects; ``CONTROLLERS`` maps each policy kind to its factory (adding a policy is one spec class,
one factory and its test). They observe the last metric scrape and return a desired replica count per role. The old
"oracle" is gone: ``bounds`` computes the lower bound on GPU-hours and the ceiling is a ``fixed`` run at the maximum.
"""

from __future__ import annotations

import bisect
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import Field

from gpuscale.manifests import front_door
from gpuscale.manifests.autoscaling import front_door_signal, hpa_behavior
from gpuscale.signals import promql, selection, slo_target
from gpuscale.signals import vllm_metrics as vm
from gpuscale.signals.base import MEAN_PROMPT_WINDOW, RATE_WINDOW, Signal
from gpuscale.signals.keda_model import average_value_desired, value_desired
from gpuscale.signals.promql import Matcher
from gpuscale.sim.replica import ReplicaModel
from gpuscale.sizing import RoleSizing
from gpuscale.spec.base import Spec
from gpuscale.spec.model import Role, WakeSchedule

MetricSource = Literal["duty", "queue", "kv", "running", "prompt_rate", "generation_rate"]
"""What the naive baselines read from a scrape."""


class ScalingPolicy(Spec):
    """One HPA ``behavior`` policy: at most ``value`` pods or percent per ``period_s``."""

    type: Literal["Pods", "Percent"]
    value: float = Field(gt=0)
    period_s: float = Field(gt=0)


class ScalingRules(Spec):
    """HPA ``behavior.scaleUp`` or ``scaleDown``."""

    stabilization_s: float = Field(default=0.0, ge=0)
    select: Literal["Max", "Min"] = "Max"
    policies: list[ScalingPolicy] = Field(min_length=1)


class HpaBehavior(Spec):
    """The HPA's rate limits and stabilisation; defaults are Kubernetes' when ``behavior`` is unset."""

    scale_up: ScalingRules = ScalingRules(
        policies=[ScalingPolicy(type="Percent", value=100, period_s=15), ScalingPolicy(type="Pods", value=4, period_s=15)]
    )
    scale_down: ScalingRules = ScalingRules(stabilization_s=300, policies=[ScalingPolicy(type="Percent", value=100, period_s=15)])
    tolerance: float = Field(default=0.1, ge=0)
    """``--horizontal-pod-autoscaler-tolerance``: no change while |metric/target - 1| <= tolerance."""

    @classmethod
    def from_k8s(cls, behavior: dict[str, object]) -> HpaBehavior:
        """Read an autoscaling/v2 ``behavior`` dict (what gpuscale emits)."""

        def rules(raw: object) -> ScalingRules:
            assert isinstance(raw, dict)
            return ScalingRules(
                stabilization_s=float(raw.get("stabilizationWindowSeconds", 0)),
                select=raw.get("selectPolicy", "Max"),
                policies=[ScalingPolicy(type=p["type"], value=p["value"], period_s=p["periodSeconds"]) for p in raw["policies"]],
            )

        return cls(scale_up=rules(behavior["scaleUp"]), scale_down=rules(behavior["scaleDown"]))


class DutyCyclePolicy(Spec):
    """Naive HPA on the GPU duty cycle (``DCGM_FI_DEV_GPU_UTIL``)."""

    kind: Literal["dcgm-duty-cycle"] = "dcgm-duty-cycle"
    target: float = Field(default=0.8, gt=0, le=1)
    """Target average utilisation (80%)."""
    sync_period_s: float = Field(default=15.0, gt=0)
    behavior: HpaBehavior = HpaBehavior()
    min_replicas: int = Field(default=1, ge=1)
    """An HPA cannot scale to zero."""
    max_replicas: int | None = Field(default=None, gt=0)
    """Default: the sizing's maximum of each role."""
    manual_add_at_s: float | None = Field(default=None, ge=0)
    """An operator adds one replica by hand at this time."""
    manual_add_role: Role | None = None
    """Role of the hand-added replica; default the first role (aggregated or prefill)."""


class QueueDepthPolicy(Spec):
    """HPA/KEDA on queue depth (prefill, aggregated) and KV-cache use (decode, aggregated), generic thresholds."""

    kind: Literal["queue-depth"] = "queue-depth"
    queue_target: float = Field(default=5.0, gt=0)
    """Waiting requests per replica (llm-d / Dynamo default 5)."""
    kv_target: float = Field(default=0.8, gt=0, le=1)
    """KV-cache use per replica."""
    sync_period_s: float = Field(default=15.0, gt=0)
    behavior: HpaBehavior = HpaBehavior()
    min_replicas: int = Field(default=1, ge=1)
    max_replicas: int | None = Field(default=None, gt=0)
    count_gateway_queue: bool = False
    """Add requests the gateway holds (no ready replica) to the queue metric."""


class WakeWindow(Spec):
    """A KEDA cron trigger's window in run time: ``replicas`` held from ``start_s`` to ``end_s``."""

    start_s: float = Field(ge=0)
    end_s: float = Field(gt=0)
    replicas: int = Field(default=1, gt=0)


class GpuscalePolicy(Spec):
    """The autoscaler gpuscale generates for the spec, from ``RoleSizing``."""

    kind: Literal["gpuscale"] = "gpuscale"
    min_replicas: int | None = Field(default=None, ge=0)
    """Override the sized warm minimum (scenarios that start from an empty cluster)."""
    count_gateway_queue: bool = False
    """Add the gateway's held requests to the queue metric (a KEDA HTTP add-on or router metric); the emitted
    queries read vLLM pods only, so with zero pods nothing wakes the model."""
    activation_threshold: float | None = Field(default=None, ge=0)
    """Override the sized KEDA activation threshold (0 -> 1 when the first metric exceeds it)."""
    front_door_per_replica: int | None = Field(default=None, gt=0)
    """The front door's KEDA trigger (held requests per replica, activation above 0); ``None``: no front door."""
    wake_windows: list[WakeWindow] = Field(default_factory=list)
    """KEDA cron triggers (``wake_schedule``) in run time."""
    cooldown_s: float | None = Field(default=None, ge=0)
    """Override the sized KEDA cooldown (the idle window before zero)."""
    sync_period_s: float | None = Field(default=None, gt=0)
    """Override the sized KEDA polling interval."""


class FixedPolicy(Spec):
    """A constant replica count per role."""

    kind: Literal["fixed"] = "fixed"
    replicas: int = Field(default=1, ge=0)
    """Replicas of every role not listed in ``per_role``."""
    per_role: dict[str, int] = Field(default_factory=dict)
    """Replicas of named roles."""
    sync_period_s: float = Field(default=15.0, gt=0)


PolicySpec = Annotated[DutyCyclePolicy | QueueDepthPolicy | GpuscalePolicy | FixedPolicy, Field(discriminator="kind")]


@dataclass(frozen=True)
class RoleObservation:
    """One role as the last scrape saw it."""

    role: str
    current: int
    """Replicas the workload asks for (``spec.replicas``)."""
    ready: int
    """Ready replicas (pods reporting metrics)."""
    duty_sum: float
    """Sum over ready replicas of the GPU duty cycle over the scrape interval (each 0..1)."""
    queue: float
    """Sum of ``vllm:num_requests_waiting``."""
    gateway: float
    """Requests the gateway holds because no replica is ready."""
    kv_sum: float
    """Sum of ``vllm:kv_cache_usage_perc`` (fractions)."""
    running: float
    """Sum of ``vllm:num_requests_running``."""
    prompt_rate: float = 0.0
    """``sum(rate(vllm:prompt_tokens_total[1m]))``: prompt tokens/s over the last minute's scrapes."""
    generation_rate: float = 0.0
    """``sum(rate(vllm:generation_tokens_total[1m]))``."""
    done_rate: float = 0.0
    """Requests finished per second over the last minute (``rate(<histogram>_count[1m])`` of the finished-request
    histograms)."""
    queue_time_rate: float = 0.0
    """``sum(rate(vllm:request_queue_time_seconds_sum[1m]))``."""
    itl_rate: float = 0.0
    """``sum(rate(vllm:inter_token_latency_seconds_sum[1m]))``."""
    itl_count_rate: float = 0.0
    """``sum(rate(vllm:inter_token_latency_seconds_count[1m]))``."""
    done_rate_5m: float = 0.0
    """``sum(rate(vllm:request_prompt_tokens_count[5m]))``."""
    done_prompt_rate_5m: float = 0.0
    """``sum(rate(vllm:request_prompt_tokens_sum[5m]))``."""
    prompt_rate_short: float | None = None
    """``sum(rate(vllm:prompt_tokens_total[30s]))`` (``slo_target.DISPERSION_WINDOW``): the prompt tokens of the last
    scrape interval; None: a scrape that does not record it reads the 1 m rate (no sub-minute variation)."""


@dataclass(frozen=True)
class ControllerContext:
    """What a controller may know at construction: the roles' sizing and the replica (never the future)."""

    roles: dict[str, RoleSizing]
    replica: ReplicaModel
    backend: str = "keda"
    clock_start: datetime | None = None
    """Wall clock at t = 0 (cron triggers); None: schedules are not simulated."""
    clock_rate: float = 1.0
    """Wall-clock seconds per simulated second."""
    horizon_s: float = 0.0
    """How far ahead schedules are resolved into intervals."""


@dataclass(frozen=True)
class MetricRule:
    source: MetricSource | Signal
    """A single scraped quantity, or a gpuscale signal (``Signal.observe``)."""
    target: float
    pods_metric: bool
    """True: a Pods metric averaged over ready pods (prometheus-adapter); False: an AverageValue sum (KEDA)."""
    value: bool = False
    """``metricType: Value``: replicas = ``ceil(ready x value / target)`` (the latency guards)."""


class ObservedSeries:
    """One role's scrape as the Prometheus series the signals' queries read (``promql.RangeSamples``); the selector is
    the role's own. ``waiting`` overrides the waiting count (a gateway's held requests added to it). ``past`` holds the
    earlier scrapes the controller saw, as ``(t, series)`` oldest first, for subqueries (``at``)."""

    def __init__(
        self, obs: RoleObservation, waiting: float | None = None, t: float = 0.0,
        past: Sequence[tuple[float, ObservedSeries]] = (), past_t: Sequence[float] | None = None,
    ) -> None:
        self.t = t
        self.past = past
        # the scrape times beside the scrapes: a bisect on a list of floats, not on a key function per probe (the
        # subquery look-ups were half of the gpuscale controller's time)
        self.past_t: Sequence[float] = [p[0] for p in past] if past_t is None else past_t
        self.subquery_memo: dict[str, promql.Result] = {}
        """Subquery operands evaluated on this scrape (``promql.StddevOverTime``): a scrape never changes."""
        self.subquery_rows: dict[str, list[float | None]] = {}
        """Each subquery's points as of this scrape (``promql.RollingSamples``), for the next scrapes to take on."""
        self.first_past_t = self.past_t[0] if len(self.past_t) else t
        """The oldest scrape kept when this one was taken (itself if none): while it is still the oldest, nothing this
        scrape's subqueries read has been dropped (``step_back``)."""
        self.gauges = {
            front_door.QUEUE_METRIC: obs.gateway,
            vm.QUEUE: obs.queue if waiting is None else waiting,
            vm.KV_CACHE: obs.kv_sum,
            vm.RUNNING: obs.running,
        }
        self.rates = {
            (vm.PROMPT_TOKENS, RATE_WINDOW): obs.prompt_rate,
            (vm.PROMPT_TOKENS, slo_target.DISPERSION_WINDOW): (
                obs.prompt_rate if obs.prompt_rate_short is None else obs.prompt_rate_short
            ),
            (vm.GENERATION_TOKENS, RATE_WINDOW): obs.generation_rate,
            (f"{vm.QUEUE_TIME}_sum", RATE_WINDOW): obs.queue_time_rate,
            (f"{vm.QUEUE_TIME}_count", RATE_WINDOW): obs.done_rate,
            (f"{vm.INTER_TOKEN_LATENCY}_sum", RATE_WINDOW): obs.itl_rate,
            (f"{vm.INTER_TOKEN_LATENCY}_count", RATE_WINDOW): obs.itl_count_rate,
            (f"{vm.REQUEST_PROMPT_TOKENS}_sum", MEAN_PROMPT_WINDOW): obs.done_prompt_rate_5m,
            (f"{vm.REQUEST_PROMPT_TOKENS}_count", MEAN_PROMPT_WINDOW): obs.done_rate_5m,
        }

    def gauge_sum(self, metric: str, matchers: tuple[Matcher, ...]) -> float | None:
        return self.gauges[metric]

    def rate_sum(self, metric: str, matchers: tuple[Matcher, ...], window: str) -> float | None:
        return self.rates[(metric, window)]

    def at(self, ago_s: float) -> ObservedSeries | PointBetweenScrapes | None:
        """The samples ``ago_s`` seconds ago: the latest scrape at or before then (a subquery point reads the last
        sample before it), itself when it was taken at that instant, else seen from that instant
        (``PointBetweenScrapes``)."""
        return latest_at(self.past, self.past_t, self.t - ago_s)

    def _scrape_at(self, ago_s: float) -> ObservedSeries | None:
        found = self.at(ago_s)
        return found if isinstance(found, ObservedSeries) else None

    def step_back(self, step_s: float, n: int, reach_s: float = 0.0) -> ObservedSeries | None:
        """The scrape ``step_s`` ago, when its subquery rows are this scrape's from the second point on
        (``promql.RollingSamples``): both instants and the step on a fine grid (``_exact_steps``), so every point's
        instant ``t - k x step`` is computed exactly either way, and the past those rows read has lost nothing they found
        since (the oldest scrape then is still kept, or what was dropped is older than what this row's oldest point reads:
        the point itself less ``reach_s``, the offsets inside the operand, less the look-back)."""
        prev = self._scrape_at(step_s)
        if prev is None or prev.t != self.t - step_s or not _exact_steps(self.t, step_s, n):
            return None
        oldest = self.past_t[0]
        if oldest == prev.first_past_t or oldest <= self.t - (n - 1) * step_s - reach_s - LOOKBACK_DELTA_S + 1e-9:
            return prev
        return None


class PointBetweenScrapes:
    """An instant between two scrapes (a subquery point or an offset after a gap in the syncs): the latest scrape
    before it answers its selectors, as Prometheus' latest sample at or before the instant does, but an offset inside
    it counts back from this instant, not from that scrape's (Prometheus evaluates ``x offset C`` at the point's own
    time less ``C``). It keeps no memo: on the simulator's regular syncs every point is a scrape's own instant."""

    def __init__(
        self, scrape: ObservedSeries, t: float, past: Sequence[tuple[float, ObservedSeries]], past_t: Sequence[float],
    ) -> None:
        self.scrape, self.t, self.past, self.past_t = scrape, t, past, past_t

    def gauge_sum(self, metric: str, matchers: tuple[Matcher, ...]) -> float | None:
        return self.scrape.gauge_sum(metric, matchers)

    def rate_sum(self, metric: str, matchers: tuple[Matcher, ...], window: str) -> float | None:
        return self.scrape.rate_sum(metric, matchers, window)

    def at(self, ago_s: float) -> ObservedSeries | PointBetweenScrapes | None:
        return latest_at(self.past, self.past_t, self.t - ago_s)


def latest_at(
    past: Sequence[tuple[float, ObservedSeries]], past_t: Sequence[float], when: float,
) -> ObservedSeries | PointBetweenScrapes | None:
    """The samples at instant ``when``: the scrape taken then (within a nanosecond: the clock's half seconds are exact),
    else the latest before it seen from ``when``; None before the first scrape kept or when the latest is older than
    Prometheus' look-back (``LOOKBACK_DELTA_S``)."""
    i = bisect.bisect_right(past_t, when + 1e-9)
    if i == 0:
        return None
    scrape = past[i - 1][1]
    if scrape.t >= when - 1e-9:
        return scrape
    if scrape.t < when - LOOKBACK_DELTA_S:  # stale: Prometheus finds no sample that recent
        return None
    return PointBetweenScrapes(scrape, when, past, past_t)


GRID = 1024.0
"""Steps per second of the grid ``_exact_steps`` asks for (a power of two: scaling by it is exact)."""


def _exact_steps(t: float, step_s: float, n: int) -> bool:
    """``t - k x step_s`` is exact in floating point for every ``k < n``: both on a grid of 1/1024 s (the simulator's
    clock: whole and half seconds) and small enough that every such difference is a whole number of grid steps below
    2^53."""
    return (t * GRID).is_integer() and (step_s * GRID).is_integer() and abs(t) + n * abs(step_s) < 2.0**42


def signal_value(
    sig: Signal, obs: RoleObservation, waiting: float | None = None, t: float = 0.0,
    past: Sequence[tuple[float, ObservedSeries]] = (), past_t: Sequence[float] | None = None,
) -> float:
    """What the signal's trigger query reads on this observation (``waiting``, ``past``, ``past_t``: see
    ``ObservedSeries``)."""
    return sig.observe(ObservedSeries(obs, waiting, t, past, past_t))


LOOKBACK_DELTA_S = 300.0
"""How far before an instant Prometheus looks for a series' latest sample: a selector whose latest sample is older is
empty there (``defaultLookbackDelta = 5 * time.Minute``, ``promql/engine.go``; the ``--query.lookback-delta`` flag's
default). It matters only where the syncs leave a gap: on regular syncs every subquery point is a scrape's own instant."""


def schedule_intervals(
    w: WakeSchedule, clock_start: datetime, clock_rate: float, horizon_s: float,
) -> list[tuple[float, float]]:
    """Simulated-time intervals in which a KEDA cron trigger is active (after a ``start`` tick, before the next
    ``end`` tick), for ``horizon_s`` of simulated time."""
    from zoneinfo import ZoneInfo

    from croniter import croniter

    tz = ZoneInfo(w.timezone)
    start = clock_start.astimezone(tz)
    stop = start + timedelta(seconds=horizon_s * clock_rate)
    day = timedelta(days=1)
    starts = croniter(w.start, start - 8 * day)
    ends = croniter(w.end, start - 8 * day)
    ticks: list[tuple[datetime, int]] = []
    for it, kind in ((starts, 1), (ends, 0)):
        while True:
            nxt = it.get_next(datetime)
            if nxt > stop:
                break
            ticks.append((nxt, kind))
    ticks.sort()
    out: list[tuple[float, float]] = []
    open_at: datetime | None = None
    for when, kind in ticks:
        if kind == 1 and open_at is None:
            open_at = when
        elif kind == 0 and open_at is not None:
            out.append((open_at, when))  # type: ignore[arg-type]
            open_at = None
    if open_at is not None:
        out.append((open_at, stop))  # type: ignore[arg-type]

    def sim_t(x: datetime) -> float:
        return (x - start).total_seconds() / clock_rate

    return [(max(sim_t(a), 0.0), sim_t(b)) for a, b in out if sim_t(b) > 0]  # type: ignore[arg-type]


def pods_average_desired(total: float, ready: int, current: int, target: float, tol: float) -> int:
    """The HPA's replica count for a Pods metric, with its rules for pods that report no metric yet.

    Missing pods count as 0 when scaling up and as the target when scaling down; if that flips the direction
    or lands within tolerance, nothing changes.
    """
    if ready == 0:
        return current
    ratio = total / (ready * target)
    missing = max(current - ready, 0)
    if missing == 0:
        return current if abs(ratio - 1.0) <= tol else math.ceil(ratio * ready - 1e-9)
    pods = ready + missing
    new = total / (target * pods) if ratio > 1.0 else (total + missing * target) / (target * pods)
    if abs(new - 1.0) <= tol or (new > 1.0) != (ratio > 1.0):
        return current
    return math.ceil(new * pods - 1e-9)


class HpaRole:
    """The HPA control loop of one role (KEDA is an HPA plus activation and cooldown)."""

    def __init__(
        self, rules: list[MetricRule], min_replicas: int, max_replicas: int, behavior: HpaBehavior, *,
        keda_activation: float | None = None, cooldown_s: float = 300.0, count_gateway: bool = False,
        activation_rule: int = 0, schedules: list[tuple[float, float, int]] | None = None,
    ) -> None:
        self.rules = rules
        self.schedules = schedules or []
        """Cron triggers as (from, until, replicas) in simulated time: while active, an AverageValue 1 metric of
        ``replicas`` (KEDA's cron scaler)."""
        self.activation_rule = activation_rule
        """Index of the rule ``keda_activation`` applies to; every other rule activates above 0."""
        self.min_replicas = min_replicas
        self.max_replicas = max(max_replicas, min_replicas)
        self.behavior = behavior
        self.keda_activation = keda_activation
        self.cooldown_s = cooldown_s
        self.count_gateway = count_gateway
        self.recommendations: list[tuple[float, int]] = []
        self.events: list[tuple[float, int]] = []
        self.last_active_t = 0.0
        self.past: list[tuple[float, ObservedSeries]] = []
        """Earlier scrapes as the signals' subqueries read them (only kept when a signal has a subquery)."""
        self.past_t: list[float] = []
        """The times of ``past``, in step with it."""
        self.queries: list[promql.Expr | None] = [
            r.source.expr(()) if isinstance(r.source, Signal) else None for r in rules
        ]
        """Each signal rule's trigger query, built once (``Signal.observe``); None: a scraped quantity."""
        reach = max((q.reach_s() for q in self.queries if q is not None), default=0.0)
        self.keeps_past = reach > 0.0
        # beyond the farthest reach, the look-back of the oldest point: what a point finds is what Prometheus, which
        # keeps far more, would find
        self.history_s = reach + LOOKBACK_DELTA_S
        """How much of its past scrapes the controller keeps: the farthest its queries reach (a subquery's range and
        the offsets inside it), and the look-back before it."""
        self.plan = promql.Plan([q for q in self.queries if q is not None])
        """The signals' queries answered together, their shared terms once per scrape."""
        signal_rules = [i for i, q in enumerate(self.queries) if q is not None]
        self._answer_of = {rule: k for k, rule in enumerate(signal_rules)}
        """A signal rule's index -> its query's place among the plan's answers."""
        self._series: ObservedSeries | None = None
        """This scrape's series (``_observe``)."""
        self._answers: list[promql.Result] | None = None
        """The plan's answers on it, once asked for."""

    def _observe(self, t: float, obs: RoleObservation) -> None:
        """The series the signals read on this scrape, built once for all of them; with a subquery, it joins the past
        first (a subquery's newest point is the present sample) and keeps its points there for the next scrapes."""
        self._answers = None
        if not self.plan.roots:
            return
        waiting = obs.queue + obs.gateway if self.count_gateway else None
        self._series = ObservedSeries(obs, waiting, t, self.past, self.past_t)
        if self.keeps_past:
            self.past.append((t, self._series))
            self.past_t.append(t)
            if self.past_t[0] < t - self.history_s:
                gone = bisect.bisect_left(self.past_t, t - self.history_s)
                del self.past[:gone]
                del self.past_t[:gone]

    def _value(self, values: list[float | None], i: int, obs: RoleObservation) -> float:
        """Rule ``i``'s value on this scrape, read once however often the decision asks (``values``: this scrape's)."""
        v = values[i]
        if v is None:
            v = values[i] = self._read(i, obs)
        return v

    def _read(self, i: int, obs: RoleObservation) -> float:
        source = self.rules[i].source
        if isinstance(source, Signal):
            assert self._series is not None
            if self._answers is None:
                self._answers = self.plan.evaluate(self._series)
            return source.answer(self._answers[self._answer_of[i]])
        if source == "duty":
            return obs.duty_sum
        if source == "queue":
            return obs.queue + (obs.gateway if self.count_gateway else 0.0)
        if source == "kv":
            return obs.kv_sum
        if source == "prompt_rate":
            return obs.prompt_rate
        if source == "generation_rate":
            return obs.generation_rate
        return obs.running

    def _scheduled(self, t: float) -> int:
        return max((n for a, b, n in self.schedules if a <= t < b), default=0)

    def decide(self, t: float, obs: RoleObservation) -> int:
        self._observe(t, obs)
        values: list[float | None] = [None] * len(self.rules)
        current = obs.current
        held = self._scheduled(t)
        if self.keda_activation is not None and self.min_replicas == 0:
            active = (
                any(
                    self._value(values, i, obs) > (self.keda_activation if i == self.activation_rule else 0.0)
                    for i in range(len(self.rules))
                )
                or (self.count_gateway and obs.gateway > 0)  # a held request wakes any role
                or held > 0  # a cron trigger inside its window is active
            )
            if active:
                self.last_active_t = t
            if current == 0:
                return self._record(t, current, max(1, held) if active else 0)
            if not active and t - self.last_active_t >= self.cooldown_s:
                return self._record(t, current, 0)
        hpa_min = max(self.min_replicas, 1)
        raw = 0
        tol = self.behavior.tolerance
        for i, rule in enumerate(self.rules):
            total = self._value(values, i, obs)
            if rule.value:
                raw = max(raw, value_desired(total, obs.ready, current, rule.target, tol))
            elif rule.pods_metric:
                raw = max(raw, pods_average_desired(total, obs.ready, current, rule.target, tol))
            else:
                raw = max(raw, average_value_desired(total, current, rule.target, tol))
        if held:
            raw = max(raw, average_value_desired(float(held), current, 1.0, tol))
        desired = self._stabilise(t, current, raw)
        desired = self._rate_limit(t, current, desired)
        return self._record(t, current, min(max(desired, hpa_min), self.max_replicas))

    def _stabilise(self, t: float, current: int, raw: int) -> int:
        up_w, down_w = self.behavior.scale_up.stabilization_s, self.behavior.scale_down.stabilization_s
        keep = max(up_w, down_w)
        if not self.recommendations:  # the autoscaler has been running: its recent history is the current count
            self.recommendations.append((t, current))
        self.recommendations = [(ts, r) for ts, r in self.recommendations if ts > t - keep]
        self.recommendations.append((t, raw))
        up = min([r for ts, r in self.recommendations if ts > t - up_w] + [raw])
        down = max([r for ts, r in self.recommendations if ts > t - down_w] + [raw])
        rec = current
        if rec < up:
            rec = up
        if rec > down:
            rec = down
        return rec

    def _rate_limit(self, t: float, current: int, desired: int) -> int:
        if desired > current:
            rules = self.behavior.scale_up
            pick: Callable[[int, int], int] = max if rules.select == "Max" else min
            limit: int | None = None
            for p in rules.policies:
                added = sum(d for ts, d in self.events if d > 0 and ts > t - p.period_s)
                start = current - added
                prop = int(start + p.value) if p.type == "Pods" else math.ceil(start * (1.0 + p.value / 100.0))
                limit = prop if limit is None else pick(limit, prop)
            return min(desired, limit if limit is not None else desired)
        if desired < current:
            rules = self.behavior.scale_down
            pick = min if rules.select == "Max" else max
            limit = None
            for p in rules.policies:
                removed = sum(-d for ts, d in self.events if d < 0 and ts > t - p.period_s)
                start = current + removed
                prop = int(start - p.value) if p.type == "Pods" else int(start * (1.0 - p.value / 100.0))
                limit = prop if limit is None else pick(limit, prop)
            return max(desired, limit if limit is not None else desired)
        return desired

    def _record(self, t: float, current: int, desired: int) -> int:
        if desired != current:
            self.events = [(ts, d) for ts, d in self.events if ts > t - 600.0]
            self.events.append((t, desired - current))
        return desired


class Controller(ABC):
    """Base: ``decide`` maps the last observation of every role to desired replicas."""

    sync_period_s: float = 15.0

    @abstractmethod
    def decide(self, t: float, obs: dict[str, RoleObservation]) -> dict[str, int]:
        """Desired replicas per role."""


class HpaController(Controller):
    """One ``HpaRole`` per role, plus an optional hand-made scale-up."""

    def __init__(self, roles: dict[str, HpaRole], sync_period_s: float, manual: tuple[float, str] | None = None) -> None:
        self.roles = roles
        self.sync_period_s = sync_period_s
        self.manual = manual
        self._manual_done = False

    def decide(self, t: float, obs: dict[str, RoleObservation]) -> dict[str, int]:
        if self.manual is not None and not self._manual_done and t >= self.manual[0]:
            # the operator raises the HPA's floor (and ceiling) by one so the HPA cannot undo the extra replica
            hpa = self.roles[self.manual[1]]
            extra = obs[self.manual[1]].current + 1
            hpa.min_replicas = max(hpa.min_replicas, extra)
            hpa.max_replicas = max(hpa.max_replicas, extra)
            self._manual_done = True
        return {name: hpa.decide(t, obs[name]) for name, hpa in self.roles.items()}


class FixedController(Controller):
    def __init__(self, targets: dict[str, int], sync_period_s: float) -> None:
        self.targets = dict(targets)
        self.sync_period_s = sync_period_s

    def decide(self, t: float, obs: dict[str, RoleObservation]) -> dict[str, int]:
        return dict(self.targets)


def _max_for(policy_max: int | None, rs: RoleSizing) -> int:
    return policy_max if policy_max is not None else rs.max_replicas


def gpuscale_behavior(rs: RoleSizing) -> HpaBehavior:
    """The ``behavior`` gpuscale's RoleAutoscaler emits for this role."""
    return HpaBehavior.from_k8s(hpa_behavior(rs))  # the emitted numbers, not a copy


def _fixed(policy: FixedPolicy, ctx: ControllerContext) -> Controller:
    return FixedController({r: policy.per_role.get(r, policy.replicas) for r in ctx.roles}, policy.sync_period_s)


def _duty_cycle(policy: DutyCyclePolicy, ctx: ControllerContext) -> Controller:
    roles = {
        role: HpaRole([MetricRule("duty", policy.target, True)], policy.min_replicas, _max_for(policy.max_replicas, rs), policy.behavior)
        for role, rs in ctx.roles.items()
    }
    manual: tuple[float, str] | None = None
    if policy.manual_add_at_s is not None:
        role_name: str = policy.manual_add_role if policy.manual_add_role is not None else next(iter(ctx.roles))
        manual = (policy.manual_add_at_s, role_name)
    return HpaController(roles, policy.sync_period_s, manual)


def _queue_depth(policy: QueueDepthPolicy, ctx: ControllerContext) -> Controller:
    roles: dict[str, HpaRole] = {}
    for role, rs in ctx.roles.items():
        rules = []
        if role in ("aggregated", "prefill"):
            rules.append(MetricRule("queue", policy.queue_target, False))
        if role in ("aggregated", "decode"):
            rules.append(MetricRule("kv", policy.kv_target, False))
        roles[role] = HpaRole(
            rules, policy.min_replicas, _max_for(policy.max_replicas, rs), policy.behavior,
            count_gateway=policy.count_gateway_queue,
        )
    return HpaController(roles, policy.sync_period_s)


def _schedules(rs: RoleSizing, ctx: ControllerContext) -> list[tuple[float, float, int]]:
    if ctx.clock_start is None or ctx.backend != "keda":
        return []
    windows = ([rs.wake_schedule] if rs.wake_schedule is not None else []) + list(rs.warm_schedule)
    return [
        (a, b, w.replicas) for w in windows
        for a, b in schedule_intervals(w, ctx.clock_start, ctx.clock_rate, ctx.horizon_s)
    ]


def _gpuscale(policy: GpuscalePolicy, ctx: ControllerContext) -> Controller:
    roles: dict[str, HpaRole] = {}
    pods = ctx.backend == "hpa"  # prometheus-adapter Pods metrics: per-pod averages with the missing-pod rules
    for role, rs in ctx.roles.items():
        rules = [MetricRule(sig, sig.target, pods and sig.metric_type != "Value", sig.metric_type == "Value") for sig in rs.signals]
        if policy.front_door_per_replica is not None:  # the door's queue trigger (emitted after the vLLM ones)
            door = front_door_signal(policy.front_door_per_replica)
            rules.append(MetricRule(door, door.target, False, False))
        min_r = policy.min_replicas if policy.min_replicas is not None else rs.min_replicas
        roles[role] = HpaRole(
            rules, min_r, rs.max_replicas, gpuscale_behavior(rs),
            keda_activation=(
                (policy.activation_threshold if policy.activation_threshold is not None else rs.activation_threshold)
                if ctx.backend == "keda" else None
            ),
            cooldown_s=policy.cooldown_s if policy.cooldown_s is not None else rs.cooldown_s,
            count_gateway=policy.count_gateway_queue,
            activation_rule=selection.waker(list(rs.signals)),  # where the emitted activation threshold sits
            schedules=_schedules(rs, ctx) + [(w.start_s, w.end_s, w.replicas) for w in policy.wake_windows],
        )
    sync = policy.sync_period_s or min(rs.polling_interval_s for rs in ctx.roles.values())
    return HpaController(roles, float(sync))


CONTROLLERS: dict[str, Callable[[Any, ControllerContext], Controller]] = {
    "dcgm-duty-cycle": _duty_cycle,
    "queue-depth": _queue_depth,
    "gpuscale": _gpuscale,
    "fixed": _fixed,
}
"""Policy kind -> controller factory: the one registry of autoscaling policies."""


def build_controller(policy: PolicySpec, ctx: ControllerContext) -> Controller:
    """The controller of one policy for the roles in ``ctx``."""
    return CONTROLLERS[policy.kind](policy, ctx)
