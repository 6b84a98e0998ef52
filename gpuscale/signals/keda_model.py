"""A model of KEDA v2.20.2's decision path for one emitted ScaledObject, written from its source branch by branch.

``run(scaled_object, world, horizon_s)`` replays the ScaledObject against a ``World`` (what Prometheus answers for the
role at each instant, given how many replicas it has) and returns every decision. Each step cites the file and line
at the tag (github.com/kedacore/keda, tag v2.20.2, commit 68a5b5028):

1. the scaler's result per trigger: ``pkg/scalers/prometheus_scaler.go`` ``ExecutePromQuery`` L204-308 (an
   unreachable Prometheus is an error, L240-251; an empty result is 0 with ``ignoreNullValues`` true, else an error,
   L266-272; NaN/Inf likewise, L298-305; ``ignoreNullValues`` defaults to true, L56), activity ``value >
   activationThreshold`` (L319, the threshold defaults to 0, L53); ``pkg/scalers/cron_scaler.go`` L123-152;
2. the fallback: ``pkg/fallback/fallback.go`` ``GetMetricsWithFallback`` L115-175 (a success resets the failure count,
   L124-131; no fallback: the error stands, L135-136; after more than ``failureThreshold`` failures the metric is
   ``doFallback``'s, L142-170) and ``doFallback`` L243-318 (behaviours L249-272; a ``Value`` metric divides by the
   Running and Ready replicas, L211-241, and with none there is no fallback: the trigger stays an error, L274-287
   and L166-169; the metric is ``target x replicas``, L289-307). The scale loop and
   the HPA's metric requests both call it, so both count failures (``pkg/scaling/scale_handler.go`` L992, L719);
3. activity and error per trigger: ``scale_handler.go`` ``getScalerState`` L1002-1023 (a fallback metric counts as
   active, an error as neither) and ``getScaledObjectState`` L846-873 (active if any, error if any);
4. ``RequestScale``: ``pkg/scaling/executor/scale_scaledobjects.go`` L63-113 (active: from zero L71-73, partial error
   L74-77 without refreshing ``lastActiveTime``, else refresh L78-80; inactive: hold on error with a non-zero
   ``fallback.replicas`` L86-92, error without fallback L93-97, ``scaleToZeroOrIdle`` L98-101 and L189-238 after
   ``cooldownPeriod`` from ``lastActiveTime`` or ``initialCooldownPeriod`` from creation, raise to the minimum
   L102-109); ``scaleFromZeroOrIdle`` L240-260 (to ``minReplicaCount``, at least 1); default cooldown 300 s
   (``scale_executor.go`` L36);
5. the HPA KEDA creates (``minReplicas`` = ``minReplicaCount``, at least 1: ``apis/keda/v1alpha1/
   scaledobject_types.go`` L303-309), each trigger one External metric served by ``GetScaledObjectMetrics``
   (``scale_handler.go`` L585-779: an error without an active fallback fails the metric, L766-768); Kubernetes'
   ``pkg/controller/podautoscaler`` (read by function, not at a tag: the kubernetes repository is too large to fetch
   here): ``reconcileAutoscaler`` moves a count outside ``[minReplicas, maxReplicas]`` to the bound first;
   ``computeReplicasForMetrics`` takes the largest proposal over the valid metrics
   and changes nothing when every metric is invalid or when some are and the valid ones would scale down;
   ``replica_calculator.go`` ``GetExternalPerPodMetricReplicas`` (AverageValue: ``ceil(value / target)`` outside the
   10% tolerance) and ``GetExternalMetricReplicas`` (Value: ``ceil(value / target x ready)``); the HPA is disabled at
   0 replicas (``ScalingDisabled``); ``behavior``: the scale-down stabilisation window (the largest recommendation in
   it) and the Pods/Percent policies per period.

What is left out: the HPA's missing-pod rules (External metrics have none), its scale-up stabilisation (gpuscale emits
0), ``scalingModifiers``, ``idleReplicaCount`` and pause annotations (gpuscale emits none), jitter between the loops.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuscale.signals import promql
from gpuscale.signals.promql import Samples

HPA_SYNC_S = 15
"""``--horizontal-pod-autoscaler-sync-period`` default."""
HPA_TOLERANCE = 0.1
"""``--horizontal-pod-autoscaler-tolerance`` default."""
DEFAULT_COOLDOWN_S = 300
"""``pkg/scaling/executor/scale_executor.go`` L36."""


def value_desired(value: float, ready: int, current: int, target: float, tol: float = HPA_TOLERANCE) -> int:
    """The HPA's replica count for a ``Value`` target (External metric): ``ceil(ratio x ready pods)`` outside
    tolerance, ``ceil(ratio)`` from zero (``replica_calculator.go``, ``getUsageRatioReplicaCount``)."""
    ratio = value / target
    if current == 0:
        return math.ceil(ratio - 1e-9)
    if abs(ratio - 1.0) <= tol:
        return current
    return math.ceil(ratio * ready - 1e-9)


def average_value_desired(total: float, current: int, target: float, tol: float = HPA_TOLERANCE) -> int:
    """The HPA's replica count for an AverageValue target: ``ceil(total / target)`` outside tolerance
    (``replica_calculator.go``, ``GetExternalPerPodMetricReplicas``)."""
    if current == 0:
        return math.ceil(total / target - 1e-9)
    if abs(total / (target * current) - 1.0) <= tol:
        return current
    return math.ceil(total / target - 1e-9)


@dataclass(frozen=True)
class World:
    """What the role's environment answers at time ``t`` when the role has ``ready`` ready replicas."""

    samples: Callable[[float, int], Samples | None]
    """Prometheus' series for the role (None: Prometheus unreachable)."""
    cron_active: Callable[[float, str], bool] = lambda t, name: False
    """Whether the named cron trigger is inside its window."""
    ready_delay_s: float = 0.0
    """How long a new replica takes to become Ready (Running with condition Ready: what KEDA's fallback and the
    HPA's ``Value`` metrics count); ``math.inf``: never (pods Pending for want of a node)."""
    start_replicas: int = 0
    """``spec.replicas`` of the target when the run starts (the ScaledObject already existed for a while)."""


@dataclass(frozen=True)
class TriggerResult:
    name: str
    value: float | None
    """The metric the HPA and activation see (the fallback's when it is active); None on error."""
    active: bool
    error: str | None
    fallback: bool


@dataclass(frozen=True)
class Step:
    """One KEDA poll: what each trigger said and what ``RequestScale`` did."""

    t: float
    replicas: int
    ready: int
    active: bool
    error: bool
    branch: str
    """The ``RequestScale`` branch taken (e.g. ``scale-from-zero``, ``partial-error``, ``refresh``,
    ``hold-on-error``, ``scale-to-zero``, ``cooling-down``, ``no-change``)."""
    triggers: tuple[TriggerResult, ...]
    hpa: str = ""
    """The HPA's decision at this instant, when it synced (``scaled to N``, ``no change: ...``)."""


@dataclass
class _State:
    replicas: int
    created: float
    pods: list[float] = field(default_factory=list)
    """Creation time of each replica (the newest last)."""
    last_active: float | None = None
    failures: dict[str, int] = field(default_factory=dict)
    recommendations: list[tuple[float, int]] = field(default_factory=list)
    events: list[tuple[float, int]] = field(default_factory=list)

    def ready(self, t: float, delay: float) -> int:
        return sum(1 for c in self.pods if t - c >= delay)

    def scale(self, t: float, n: int) -> None:
        if n > self.replicas:
            self.pods += [t] * (n - self.replicas)
        elif n < self.replicas:
            self.pods = self.pods[: n]
        if n != self.replicas:
            self.events.append((t, n - self.replicas))
        self.replicas = n


def _target(trig: Mapping[str, Any]) -> float:
    """The External metric's target: the trigger's ``threshold``; 1 for a cron trigger (``cron_scaler.go`` L111-117)."""
    return 1.0 if trig["type"] == "cron" else float(trig["metadata"]["threshold"])


class ScaledObjectModel:
    """KEDA's scale loop and its HPA for one ScaledObject body (the dict gpuscale emits)."""

    def __init__(self, body: Mapping[str, Any]) -> None:
        spec = body["spec"]
        self.name = str(body["metadata"]["name"])
        self.min = int(spec.get("minReplicaCount", 0))
        self.max = int(spec.get("maxReplicaCount", 100))
        self.polling_s = int(spec.get("pollingInterval", 30))
        self.cooldown_s = int(spec.get("cooldownPeriod", DEFAULT_COOLDOWN_S))
        self.initial_cooldown_s = int(spec.get("initialCooldownPeriod", 0))
        self.fallback: Mapping[str, Any] | None = spec.get("fallback")
        behavior = spec.get("advanced", {}).get("horizontalPodAutoscalerConfig", {}).get("behavior", {})
        down = behavior.get("scaleDown", {})
        self.down_window_s = float(down.get("stabilizationWindowSeconds", 300))
        self.down_policies = [(p["type"], float(p["value"]), float(p["periodSeconds"])) for p in down.get("policies", [])]
        self.down_select = str(down.get("selectPolicy", "Max"))
        self.triggers = list(spec["triggers"])
        self.queries = {
            t["name"]: promql.parse(t["metadata"]["query"]) for t in self.triggers if t["type"] == "prometheus"
        }

    # -------------------------------------------------------------- 1. scaler result
    def _scaler(self, trig: Mapping[str, Any], t: float, samples: Samples | None, world: World) -> tuple[float | None, bool, str | None]:
        md = trig["metadata"]
        if trig["type"] == "cron":  # cron_scaler.go L135-151
            inside = world.cron_active(t, trig["name"])
            return (float(md["desiredReplicas"]) if inside else 0.0), inside, None
        if samples is None:  # prometheus_scaler.go L240-251
            return None, False, "prometheus unreachable"
        ignore_null = str(md.get("ignoreNullValues", "true")).lower() in ("true", "t", "1")  # L56 default=true
        value = promql.evaluate(self.queries[trig["name"]], samples)
        if value is None:  # L266-272
            if not ignore_null:
                return None, False, "prometheus metrics 'prometheus' target may be lost, the result is empty"
            value = 0.0
        if math.isnan(value) or math.isinf(value):  # L298-305
            if not ignore_null:
                return None, False, f"prometheus query returns {value}"
            value = 0.0
        activation = float(md.get("activationThreshold", 0))  # L53 optional -> 0
        return value, value > activation, None  # L319

    # -------------------------------------------------------------- 2. fallback
    def _with_fallback(self, trig: Mapping[str, Any], raw: tuple[float | None, bool, str | None], st: _State, t: float, world: World) -> TriggerResult:
        value, active, err = raw
        name = trig["name"]
        fb = self.fallback
        if err is None:  # fallback.go L124-131: success resets the failure count
            st.failures[name] = 0
            return TriggerResult(name, value, active, None, False)
        if fb is None:  # L135-136
            return TriggerResult(name, None, False, err, False)
        st.failures[name] = st.failures.get(name, 0) + 1  # L142
        if st.failures[name] <= int(fb.get("failureThreshold", 3)):  # L145 vs L172-173
            return TriggerResult(name, None, False, err, False)
        behaviour = str(fb.get("behavior", "static"))
        fallback_replicas = int(fb.get("replicas", 0))
        current = st.replicas  # L159-164 (resolver.GetCurrentReplicas: spec.replicas)
        replicas = float({  # doFallback L249-272
            "static": fallback_replicas,
            "currentReplicas": current,
            "currentReplicasIfHigher": max(current, fallback_replicas),
            "currentReplicasIfLower": min(current, fallback_replicas),
        }.get(behaviour, fallback_replicas))
        if trig.get("metricType", "AverageValue") == "Value":  # L274-276: a Value metric (no scalingModifiers)
            # L277: getReadyReplicasCount (L211-241) counts the scale selector's pods that are Running and Ready
            ready = st.ready(t, world.ready_delay_s)
            if ready == 0:
                # L282-285: "readyReplicas is zero, cannot do fallback", doFallback returns nil; L166-169: the
                # metric is the error "error performing fallback", fallbackActive false; the trigger stays an error
                # (scale_handler.go L1013-1014: neither active nor a fallback) and the HPA's metric fails (L766-768)
                return TriggerResult(name, None, False, "error performing fallback (no ready replica)", False)
            replicas /= ready  # L286
        target = _target(trig)
        return TriggerResult(name, target * replicas, True, None, True)  # L289-307, L170; active: scale_handler L1003

    def _evaluate(self, t: float, st: _State, world: World) -> tuple[TriggerResult, ...]:
        samples = world.samples(t, st.ready(t, world.ready_delay_s))
        return tuple(self._with_fallback(tr, self._scaler(tr, t, samples, world), st, t, world) for tr in self.triggers)

    # -------------------------------------------------------------- 4. RequestScale
    def _request_scale(self, t: float, st: _State, active: bool, error: bool) -> str:
        current = st.replicas
        if active:  # scale_scaledobjects.go L63
            if current == 0:  # L71-73, scaleFromZeroOrIdle L247-254
                st.scale(t, self.min if self.min > 0 else 1)
                return "scale-from-zero"
            if error:  # L74-77: lastActiveTime is not refreshed
                return "partial-error"
            st.last_active = t  # L78-80
            return "refresh"
        fb = self.fallback
        if error and fb is not None and int(fb.get("replicas", 0)) != 0:  # L86-92
            return "hold-on-error"
        if error and fb is None:  # L93-97
            return "error-no-fallback"
        if current > 0 and self.min == 0:  # L98-101 -> scaleToZeroOrIdle L189-238
            expired = (
                (st.last_active is None and st.created + self.initial_cooldown_s < t)
                or (st.last_active is not None and st.last_active + self.cooldown_s < t)
            )
            if expired:
                st.scale(t, 0)
                return "scale-to-zero"
            return "cooling-down"
        if current < self.min:  # L102-109
            st.scale(t, self.min)
            return "raise-to-min"
        return "no-change"

    # -------------------------------------------------------------- 5. the HPA
    def _hpa(self, t: float, st: _State, world: World) -> str:
        current = st.replicas
        if current == 0:
            return "disabled at 0 replicas"
        hpa_min = self.min if self.min > 0 else 1  # scaledobject_types.go L303-309
        if current < hpa_min or current > self.max:  # reconcileAutoscaler: outside the bounds, no metric is read
            st.scale(t, min(max(current, hpa_min), self.max))
            return f"scaled to {st.replicas} (bounds)"
        results = self._evaluate(t, st, world)  # GetScaledObjectMetrics: the same fallback path
        ready = st.ready(t, world.ready_delay_s)
        proposals: list[int] = []
        invalid = 0
        for trig, r in zip(self.triggers, results, strict=True):
            if r.value is None:
                invalid += 1
                continue
            target = _target(trig)
            if trig.get("metricType", "AverageValue") == "Value":
                proposals.append(value_desired(r.value, ready, current, target))
            else:
                proposals.append(average_value_desired(r.value, current, target))
        best = max(proposals) if proposals else 0
        if invalid == len(results) or (invalid > 0 and best < current):
            return f"no change: {invalid} of {len(results)} metrics invalid"
        desired = min(max(best, hpa_min), self.max)
        # scale-down stabilisation: the largest recommendation within the window
        st.recommendations = [(ts, r) for ts, r in st.recommendations if ts > t - self.down_window_s]
        st.recommendations.append((t, desired))
        if desired < current:
            desired = min(current, max(r for _, r in st.recommendations))
            desired = max(desired, self._down_limit(t, st))
        if desired != current:
            st.scale(t, desired)
            return f"scaled to {desired}"
        return "no change"

    def _down_limit(self, t: float, st: _State) -> int:
        if not self.down_policies:
            return 0
        limits = []
        for kind, value, period in self.down_policies:
            removed = sum(-d for ts, d in st.events if d < 0 and ts > t - period)
            start = st.replicas + removed
            limits.append(int(start - value) if kind == "Pods" else int(start * (1.0 - value / 100.0)))
        # selectPolicy Min picks the smallest change (the highest floor), Max the largest
        return max(limits) if self.down_select == "Min" else min(limits)

    # -------------------------------------------------------------- the loops
    def run(self, world: World, horizon_s: float) -> list[Step]:
        """Both loops from t = 0 (the ScaledObject was created long before) to ``horizon_s``."""
        st = _State(replicas=world.start_replicas, created=-1e9, pods=[-1e9] * world.start_replicas, last_active=0.0)
        steps: list[Step] = []
        t = 0
        while t <= horizon_s:
            if t % self.polling_s == 0:
                results = self._evaluate(t, st, world)
                active = any(r.active for r in results)  # scale_handler.go L847-848
                error = any(r.error is not None for r in results)  # L854-856
                branch = self._request_scale(t, st, active, error)
                steps.append(Step(t, st.replicas, st.ready(t, world.ready_delay_s), active, error, branch, results))
            if t % HPA_SYNC_S == 0:
                decision = self._hpa(t, st, world)
                if steps and steps[-1].t == t:
                    steps[-1] = Step(**{**steps[-1].__dict__, "hpa": decision, "replicas": st.replicas})
                else:  # an HPA sync between two polls
                    steps.append(Step(t, st.replicas, st.ready(t, world.ready_delay_s), False, False, "hpa-sync", (), decision))
            t += 1
        return steps
