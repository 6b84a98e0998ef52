"""The class check of issue 22 items 3-4: every emitted ScaledObject of every shipped stack, run through the model of
KEDA v2.20.2's decision path, keeps the promises of the docs (steady load, traffic stopping and idle at zero,
Prometheus down while busy, as the idle window ends and at zero, only the door's queue, a sparse stream of long
generations); the same check on the objects of before fails; and the model's branches, each against the KEDA source
line it cites."""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator
from typing import Any

import pytest

from gpuscale.signals.keda_model import ScaledObjectModel, World
from gpuscale.signals.promql import Matcher
from gpuscale.spec.platform import PlatformSpec
from tests.conftest import stack_path
from tests.signals import scenarios as sc

STACKS = ("dev", "staging", "prod")


def _roles() -> Iterator[sc.Role]:
    from gpuscale.stackfile import load_stack_file

    yield from sc.shipped_roles({s: load_stack_file(stack_path(s)) for s in STACKS})


ROLES = list(_roles())


@pytest.mark.parametrize("case", sorted(sc.CASES))
@pytest.mark.parametrize("role", ROLES, ids=[r.key for r in ROLES])
def test_every_emitted_scaled_object_keeps_its_promises(role: sc.Role, case: str) -> None:
    assert sc.check(role, case) == []


def test_the_shipped_stacks_emit_scaled_objects_of_every_kind() -> None:
    """dev's model may scale to zero behind a door; prod has a P/D model and an aggregated one with warm minimums."""
    kinds = {(r.scaling.role, r.scaling.min_replicas == 0, r.sizing.front_door is not None) for r in ROLES}
    assert ("aggregated", True, True) in kinds and ("prefill", False, False) in kinds and ("decode", False, False) in kinds


def _as_before(body: dict[str, Any]) -> dict[str, Any]:
    """The ScaledObject as main emitted it before issue 22.3-4 (checked against a synth of main): no query total, the
    guards a bare ratio (NaN when no request finished), the door's trigger on KEDA's default ignoreNullValues, and
    ``fallback.replicas`` the warm minimum (0 for a role that may scale to zero)."""
    out = copy.deepcopy(body)
    spec = out["spec"]
    for t in spec["triggers"]:
        if t["type"] != "prometheus":
            continue
        md = t["metadata"]
        md["query"] = md["query"].removesuffix(" or on() vector(0)")
        if t["name"] in ("queue-time", "itl"):
            num, den = md["query"].split(" / ", 1)
            md["query"] = f"{num} / {den.removeprefix('(').removesuffix(' > 0)')}"
        if t["name"] == "front-door-queue":
            del md["ignoreNullValues"]
    spec["fallback"]["replicas"] = spec["minReplicaCount"]
    return out


BEFORE = {
    "prod/search-8b/aggregated": ["idle role holds 8 replicas, its warm minimum is 1"],
    "prod/llama-70b-fp8/prefill": ["idle role holds 4 replicas, its warm minimum is 2"],
    # the SLO-derived decode target sizes the peak at the warm minimum (2), so an idle hold cannot show there
    "prod/llama-70b-fp8/decode": [],
    "dev/llama-8b/aggregated": ["idle role holds 1 replicas, its warm minimum is 0", "woke from zero at 15 s with no request"],
}
"""What the check reports on the objects before issue 22.3-4 (the roles start at their sized peak, which the SLO-derived
targets of issue 27 moved: prefill 5 -> 3, search 5 -> 4, decode 3 -> 2; search 4 -> 8 once an aggregated
replica's prefill counts the decode steps it holds, ``sizing.prefill_stall``): what it reported on main's emitted objects (``gpuscale synth`` of main, every stack), besides the trigger
errors of the NaN guards in traffic-stops and sparse-long-generations."""


def test_the_check_fails_on_the_objects_of_before() -> None:
    for r in ROLES:
        old = sc.Role(r.stack, r.model, r.sizing, r.scaling, _as_before(dict(r.body)))
        found = [m for case in sc.CASES for m in sc.check(old, case)]
        errors = [m for m in found if "prometheus query returns nan" in m]
        assert errors, r.key  # the guards error whenever no request finished
        for expected in BEFORE[r.key]:
            assert any(m.startswith(expected) for m in found), (r.key, expected, found)


def test_the_check_fails_with_a_zero_fallback() -> None:
    """fallback.replicas 0 (before issue 22.4) once the queries are total: an outage at the end of the idle window
    takes the model to zero."""
    r = next(x for x in ROLES if x.key == "dev/llama-8b/aggregated")
    body = copy.deepcopy(dict(r.body))
    body["spec"]["fallback"]["replicas"] = 0
    msgs = sc.check(sc.Role(r.stack, r.model, r.sizing, r.scaling, body), "prometheus-down-idle")
    assert msgs and "to 0 (scale-to-zero)" in msgs[0]


# ---------------------------------------------------------------- the model's branches


class Const:
    """Samples where ``present`` metrics read ``value`` and the others have no series."""

    def __init__(self, present: dict[str, float]) -> None:
        self.present = present

    def gauge_sum(self, metric: str, matchers: tuple[Matcher, ...]) -> float | None:
        return self.present.get(metric)

    def rate_sum(self, metric: str, matchers: tuple[Matcher, ...], window: str) -> float | None:
        return self.present.get(metric)


def _body(triggers: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    base = {"minReplicaCount": 0, "maxReplicaCount": 10, "pollingInterval": 15, "cooldownPeriod": 300,
            "fallback": {"failureThreshold": 3, "replicas": 1, "behavior": "currentReplicasIfHigher"}, "triggers": triggers}
    return {"metadata": {"name": "m-aggregated"}, "spec": {**base, **spec}}


def _trigger(name: str, query: str, threshold: float = 1.0, **md: str) -> dict[str, Any]:
    return {"type": "prometheus", "name": name, "metricType": "AverageValue",
            "metadata": {"serverAddress": "http://p", "query": query, "threshold": f"{threshold:g}", **md}}


def test_ignore_null_values_decides_whether_empty_and_nan_are_errors() -> None:
    """prometheus_scaler.go L266-272 (empty) and L298-305 (NaN): 0 with ignoreNullValues true (the default), an
    error with false."""
    so = ScaledObjectModel(_body([
        _trigger("empty-default", 'sum(a{r="x"})'),
        _trigger("empty-strict", 'sum(a{r="x"})', ignoreNullValues="false"),
        _trigger("nan-strict", 'sum(b{r="x"}) / sum(c{r="x"})', ignoreNullValues="false"),
    ]))
    world = World(samples=lambda t, ready: Const({"b": 0.0, "c": 0.0}))
    first = so.run(world, 0)[0]
    by_name = {x.name: x for x in first.triggers}
    assert by_name["empty-default"].value == 0.0 and by_name["empty-default"].error is None
    assert "result is empty" in (by_name["empty-strict"].error or "")
    assert "returns nan" in (by_name["nan-strict"].error or "")


def test_a_fallback_counts_as_active_after_the_threshold_and_wakes_a_role_at_zero() -> None:
    """fallback.go L145 (more than failureThreshold failures) and scale_handler.go L1003 (a fallback is active):
    the fourth failed poll wakes a role at zero (scale_scaledobjects.go L71-73); the first three hold (L86)."""
    so = ScaledObjectModel(_body([_trigger("load", 'sum(a{r="x"})', ignoreNullValues="false")], pollingInterval=30))
    steps = [s for s in so.run(World(samples=lambda t, ready: None), 120) if s.triggers]
    assert [s.branch for s in steps[:4]] == ["hold-on-error"] * 3 + ["scale-from-zero"]
    assert steps[3].triggers[0].fallback and steps[3].replicas == 1


def test_a_zero_fallback_skips_the_hold_branch() -> None:
    """scale_scaledobjects.go L86 holds an inactive, erroring role only when fallback.replicas is not 0; with 0 it
    reaches scaleToZeroOrIdle (L98-101) and, past the cooldown, zero."""
    trig = [_trigger("load", 'sum(a{r="x"})', ignoreNullValues="false")]
    for replicas, branch in ((1, "hold-on-error"), (0, "scale-to-zero")):
        fb = {"failureThreshold": 3, "replicas": replicas, "behavior": "currentReplicasIfHigher"}
        so = ScaledObjectModel(_body(trig, fallback=fb, cooldownPeriod=0))
        second = [x for x in so.run(World(samples=lambda t, ready: None, start_replicas=2), 15) if x.triggers][1]
        assert second.branch == branch


def test_a_partial_error_freezes_last_active_time() -> None:
    """scale_scaledobjects.go L74-77: while one trigger is active and another errors, lastActiveTime is not refreshed,
    so when the active trigger stops the role drops to zero at once, not one cooldown later."""
    triggers = [_trigger("busy", 'sum(a{r="x"})'), _trigger("broken", 'sum(b{r="x"})', ignoreNullValues="false")]
    so = ScaledObjectModel(_body(triggers, fallback={"failureThreshold": 1000, "replicas": 1}, cooldownPeriod=300))

    def samples(t: float, ready: int) -> Const:
        if t < 600:
            return Const({"a": 5.0})  # busy, while "broken" has no series
        return Const({"a": 0.0, "b": 0.0})  # idle, both answer

    steps = [s for s in so.run(World(samples=samples, start_replicas=3), 700) if s.triggers]
    assert {s.branch for s in steps if s.t < 600} == {"partial-error"}
    zero = next(s for s in steps if s.replicas == 0)
    assert zero.t == 600 and zero.branch == "scale-to-zero"  # last refresh at t = 0: the 300 s cooldown is long past


def test_the_hpa_never_scales_down_while_a_metric_is_invalid(prod_spec: PlatformSpec) -> None:
    """computeReplicasForMetrics: with an invalid metric the HPA only ever scales up."""
    so = ScaledObjectModel(_body([
        _trigger("load", 'sum(a{r="x"})', threshold=1.0),
        _trigger("broken", 'sum(b{r="x"})', ignoreNullValues="false"),
    ], minReplicaCount=1, fallback=None))
    low = [s for s in so.run(World(samples=lambda t, ready: Const({"a": 1.0}), start_replicas=4), 600) if s.hpa]
    assert {s.replicas for s in low} == {4}
    high = [s for s in so.run(World(samples=lambda t, ready: Const({"a": 7.0}), start_replicas=4), 30) if s.hpa]
    assert high[-1].replicas == 7


def test_a_value_fallback_needs_a_ready_pod() -> None:
    """fallback.go L274-286 (v2.20.2): a ``Value`` metric's fallback divides the fallback replicas by the Running
    and Ready pods (``getReadyReplicasCount`` L211-241) and returns nil with none (L282-285), which
    ``GetMetricsWithFallback`` turns into ``error performing fallback`` without a fallback (L166-169), so the trigger
    stays an error (scale_handler.go L1013-1014). An ``AverageValue`` metric's fallback reads no pods (L289-307)."""
    triggers = [_trigger("load", 'sum(a{r="x"})', threshold=2.0, ignoreNullValues="false"),
                {**_trigger("guard", 'sum(b{r="x"})', threshold=0.5, ignoreNullValues="false"), "metricType": "Value"}]
    fb = {"failureThreshold": 3, "replicas": 1, "behavior": "currentReplicasIfHigher"}
    so = ScaledObjectModel(_body(triggers, fallback=fb, minReplicaCount=1, pollingInterval=30))
    for delay, ready in ((math.inf, 0), (0.0, 2)):
        steps = so.run(World(samples=lambda t, r: None, ready_delay_s=delay, start_replicas=2), 150)
        fourth = [s for s in steps if s.triggers][3]  # the fourth failed poll: past failureThreshold 3
        assert fourth.ready == ready
        by_name = {x.name: x for x in fourth.triggers}
        assert by_name["load"].fallback and by_name["load"].value == 2.0 * 2  # target x max(current 2, fallback 1)
        if ready == 0:
            guard = by_name["guard"]
            assert not guard.fallback and guard.value is None and "no ready replica" in (guard.error or "")
        else:
            assert by_name["guard"].fallback and by_name["guard"].value == 0.5 * 2 / 2  # target x replicas / ready


def test_the_idle_defect_of_before_shows_only_with_ready_pods() -> None:
    """What the e2e tier saw on 19c324a's objects: dev's ``llama-8b/aggregated`` (minimum 0, ``fallback.replicas``
    0, bare-ratio guards) went to zero when idle while no pod was Ready, and only holds a replica (the defect) when
    its pods are Ready: the guards' NaN is an error, the fallback of a ``Value`` guard needs a Ready pod, and only a
    fallback that succeeds counts as active (scale_handler.go L1003) and refreshes ``lastActiveTime``. The fixed
    object reaches zero either way. The vLLM series exist in both worlds (the e2e exporter serves them)."""
    r = next(x for x in ROLES if x.key == "dev/llama-8b/aggregated")
    rps = r.model.workload.peak_rps

    def samples(t: float, ready: int) -> sc.Tsdb:
        return sc.Tsdb(r.load(rps, 2) if t < sc.STOP_S else sc.scrape(), 1)

    def final(body: dict[str, Any], delay: float) -> int:
        steps = ScaledObjectModel(body).run(World(samples=samples, ready_delay_s=delay, start_replicas=2),
                                            sc.STOP_S + 3600)
        return steps[-1].replicas

    old = _as_before(dict(r.body))
    assert final(old, 0.0) == 2  # Ready pods: the guards' fallback (currentReplicasIfHigher) is active, holds 2
    assert final(old, math.inf) == 0  # no Ready pod: no fallback, fallback.replicas 0 skips the hold: zero
    assert final(copy.deepcopy(dict(r.body)), 0.0) == 0
    assert final(copy.deepcopy(dict(r.body)), math.inf) == 0
