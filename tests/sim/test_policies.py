"""Controller mechanics: the HPA formula, tolerance, missing pods, stabilisation, rate limits, KEDA activation."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest
from pydantic import TypeAdapter, ValidationError

from gpuscale.signals import slo_target
from gpuscale.signals.decode_slo import DecodeSlo
from gpuscale.signals.prefill_slo import PrefillSlo
from gpuscale.sim.policies import (
    CONTROLLERS,
    ControllerContext,
    DutyCyclePolicy,
    FixedPolicy,
    GpuscalePolicy,
    HpaBehavior,
    HpaController,
    HpaRole,
    MetricRule,
    PolicySpec,
    QueueDepthPolicy,
    RoleObservation,
    average_value_desired,
    build_controller,
    gpuscale_behavior,
    pods_average_desired,
    schedule_intervals,
    signal_value,
    value_desired,
)
from gpuscale.sim.replica import replica_model_from_sizing
from gpuscale.sizing import size_platform
from gpuscale.spec.model import WakeSchedule
from gpuscale.spec.platform import PlatformSpec
from gpuscale.stackfile import validate_config


def obs(
    current: int, ready: int, *, duty: float = 0.0, queue: float = 0.0, kv: float = 0.0, gateway: float = 0.0,
    prompt_rate: float = 0.0, generation_rate: float = 0.0, role: str = "aggregated",
) -> RoleObservation:
    return RoleObservation(role, current, ready, duty, queue, gateway, kv, 0.0, prompt_rate, generation_rate)


def prod_context(spec: PlatformSpec) -> ControllerContext:
    m = spec.models[0]
    ms = size_platform(spec).model(m.name)
    return ControllerContext(roles={r.role: r for r in ms.roles}, replica=replica_model_from_sizing(m, ms))


def test_hpa_formula_ceil_current_times_metric_over_target() -> None:
    assert pods_average_desired(total=2.0, ready=2, current=2, target=0.8, tol=0.1) == 3  # ceil(2 x 1.0/0.8)
    assert pods_average_desired(total=1.7, ready=2, current=2, target=0.8, tol=0.1) == 2  # 0.85/0.8: inside 10%
    assert pods_average_desired(total=0.8, ready=2, current=2, target=0.8, tol=0.1) == 1
    assert average_value_desired(total=50, current=2, target=5, tol=0.1) == 10
    assert average_value_desired(total=10.4, current=2, target=5, tol=0.1) == 2


def test_hpa_counts_pods_without_metrics_as_zero_when_scaling_up() -> None:
    # 1 ready pod at 100%, 1 still loading: ceil(1.0 / 0.8) = 2 = current, so nothing more is asked
    assert pods_average_desired(total=1.0, ready=1, current=2, target=0.8, tol=0.1) == 2
    # 3 ready at 100% + 1 loading: (3.0 / (0.8 x 4)) = 0.94 is inside tolerance -> stay at 4
    assert pods_average_desired(total=3.0, ready=3, current=4, target=0.8, tol=0.1) == 4
    assert pods_average_desired(total=4.0, ready=4, current=5, target=0.8, tol=0.1) == 5
    assert pods_average_desired(total=0.0, ready=0, current=3, target=0.8, tol=0.1) == 3


def test_duty_cycle_hpa_grows_a_quarter_per_cold_start() -> None:
    hpa = HpaRole([MetricRule("duty", 0.8, True)], 1, 50, HpaBehavior())
    current, ready = 2, 2
    path = []
    for step in range(6):
        current = hpa.decide(15.0 * step, obs(current, ready, duty=float(ready)))
        path.append(current)
    assert path == [3, 3, 3, 3, 3, 3]  # waits for the new replica to report
    assert hpa.decide(100.0, obs(3, 3, duty=3.0)) == 4


def test_scale_down_waits_for_the_stabilisation_window() -> None:
    hpa = HpaRole([MetricRule("queue", 5, False)], 1, 20, HpaBehavior())
    assert hpa.decide(0.0, obs(4, 4, queue=20)) == 4
    assert hpa.decide(15.0, obs(4, 4, queue=0)) == 4
    assert hpa.decide(299.0, obs(4, 4, queue=0)) == 4
    assert hpa.decide(301.0, obs(4, 4, queue=0)) == 1


def test_default_scale_up_limit_is_max_of_4_pods_and_100_percent() -> None:
    hpa = HpaRole([MetricRule("queue", 5, False)], 1, 100, HpaBehavior())
    assert hpa.decide(0.0, obs(1, 1, queue=500)) == 5  # max(1 + 4, 2 x 1)
    assert hpa.decide(5.0, obs(5, 1, queue=500)) == 5  # the period's budget is spent
    assert hpa.decide(16.0, obs(5, 1, queue=500)) == 10


def test_gpuscale_policy_reads_the_emitted_behaviour(prod_spec: PlatformSpec) -> None:
    ms = size_platform(prod_spec).model("llama-70b-fp8")
    rs = ms.role("prefill")
    b = gpuscale_behavior(rs)
    # the window covers the cold start in whole minutes, plus one
    assert b.scale_down.stabilization_s == rs.scale_down_stabilization_s == math.ceil(ms.cold_start.total_s / 60) * 60 + 60
    # burst mode (the default): +100% or +4 pods every 15 s
    assert rs.burst_mode and {(p.type, p.value, p.period_s) for p in b.scale_up.policies} == {("Percent", 100, 15), ("Pods", 4, 15)}
    assert [(p.type, p.value) for p in b.scale_down.policies] == [("Pods", 1)]
    hpa = HpaRole([MetricRule("queue", 5, False)], 1, 9, b)
    assert hpa.decide(0.0, obs(1, 1, queue=1000)) == 5  # max(+100%, +4 pods)
    assert hpa.decide(10.0, obs(5, 1, queue=1000)) == 5  # within the 15 s period
    assert hpa.decide(16.0, obs(5, 1, queue=1000)) == 9
    calm = gpuscale_behavior(rs.model_copy(update={"burst_mode": False}))
    assert {(p.type, p.value, p.period_s) for p in calm.scale_up.policies} == {("Percent", 100, 60), ("Pods", 2, 60)}


def test_value_targets_scale_with_the_latency_ratio() -> None:
    # KEDA metricType Value: ceil(measured / target x ready pods) outside tolerance; ceil(ratio) from zero
    assert value_desired(3.0, ready=2, current=3, target=1.0, tol=0.1) == 6
    assert value_desired(1.05, ready=2, current=3, target=1.0, tol=0.1) == 3
    assert value_desired(0.0, ready=4, current=4, target=1.0, tol=0.1) == 0
    assert value_desired(2.5, ready=0, current=0, target=1.0, tol=0.1) == 3


def _prefill_needed(sig: PrefillSlo, prompt_rate: float, mean: float) -> float:
    """The derivation of ``gpuscale.signals.slo_target`` written out: work + (1 + cs^2) / 2 x E[S] / slack x
    ln(min(work, 1) / 1 %), with the slack the TTFT left after the p99 prompt's prefill, at least half of it."""
    c = sig.coefficients
    work = prompt_rate * c.prefill_s(mean)
    tail = sig.tail_ratio * mean
    slack = max(sig.ttft_s - tail * c.prefill_s(tail), 0.5 * sig.ttft_s)
    return work + sig.queue_factor * mean * c.prefill_s(mean) / slack * max(math.log(min(work, 1.0) / 0.01), 0.0)


def test_signal_values_follow_the_emitted_promql(prod_spec: PlatformSpec) -> None:
    ms = size_platform(prod_spec).model("llama-70b-fp8")
    load, backlog, guard = ms.role("prefill").signals
    c = load.coefficients
    assert c is not None
    o = RoleObservation("prefill", 2, 2, 0.0, 4.0, 0.0, 0.0, 0.0, prompt_rate=20_000.0, done_rate_5m=2.0,
                        done_prompt_rate_5m=6_000.0, done_rate=1.0, queue_time_rate=0.5)
    # the recent mean prompt is 3,000 tokens (finished prompt tokens over finished requests): replicas needed = the
    # prefill work plus the Erlang-C headroom for it (no past scrape: no burst headroom)
    assert isinstance(load, PrefillSlo) and load.target == slo_target.TARGET_REPLICAS == 0.9091
    assert signal_value(load, o) == pytest.approx(_prefill_needed(load, 20_000.0, 3000.0))
    assert signal_value(load, o) > 20_000 * c.prefill_s(3000) > 0.7
    assert signal_value(backlog, o) == pytest.approx(4 * 3000 * c.prefill_s(3000))
    assert signal_value(guard, o) == pytest.approx(0.5)
    # nothing finished yet: the workload's mean prompt; no finished request: the guard reads 0 (KEDA reads NaN as 0)
    fresh = RoleObservation("prefill", 2, 2, 0.0, 4.0, 0.0, 0.0, 0.0, prompt_rate=20_000.0)
    assert signal_value(load, fresh) == pytest.approx(_prefill_needed(load, 20_000.0, 1500.0))
    assert signal_value(guard, fresh) == 0.0
    # no prompt arriving: no work and no headroom (the role may sleep)
    assert signal_value(load, RoleObservation("prefill", 2, 2, 0.0, 0.0, 0.0, 0.0, 0.0)) == 0.0
    d_load, kv, itl = ms.role("decode").signals
    dc = d_load.coefficients
    assert dc is not None
    o = RoleObservation("decode", 2, 2, 0.0, 0.0, 0.0, kv_sum=1.2, running=300.0, generation_rate=8_000.0,
                        itl_rate=0.6, itl_count_rate=20.0)
    assert isinstance(d_load, DecodeSlo) and d_load.target == slo_target.TARGET_REPLICAS
    # the ITL capacity at the KV share in use (1.2 / 300 per sequence): the upper envelope of the step model's lines
    assert signal_value(d_load, o) == pytest.approx(8_000 * max(a + b * 1.2 / 300 for a, b in dc.decode_itl_lines))
    assert signal_value(kv, o) == 1.2 and signal_value(itl, o) == pytest.approx(0.03)


def test_warm_schedule_holds_replicas_inside_its_window() -> None:
    w = WakeSchedule(start="0 8 * * *", end="0 10 * * *", replicas=3)
    clock = datetime(2024, 1, 1, tzinfo=UTC)  # Monday 00:00
    assert schedule_intervals(w, clock, 1.0, 86_400.0) == [(8 * 3600.0, 10 * 3600.0)]
    # a trace compressed 4x runs its day 4x faster
    assert schedule_intervals(w, clock, 4.0, 86_400.0 / 4) == [(2 * 3600.0, 2.5 * 3600.0)]
    # a window open at t = 0 starts at 0
    assert schedule_intervals(w, datetime(2024, 1, 1, 9, tzinfo=UTC), 1.0, 3600.0) == [(0.0, 3600.0)]
    hpa = HpaRole([MetricRule("queue", 5, False)], 1, 8, HpaBehavior(), schedules=[(100.0, 200.0, 3)])
    assert hpa.decide(50.0, obs(1, 1)) == 1
    assert hpa.decide(120.0, obs(1, 1)) == 3
    assert hpa.decide(700.0, obs(3, 3)) == 1  # after the window and the scale-down stabilisation


def test_scale_to_zero_wakes_for_a_schedule() -> None:
    hpa = HpaRole([MetricRule("queue", 5, False)], 0, 4, HpaBehavior(), keda_activation=0.0, schedules=[(100.0, 400.0, 1)])
    assert hpa.decide(15.0, obs(0, 0)) == 0
    assert hpa.decide(115.0, obs(0, 0)) == 1


def test_keda_activation_and_cooldown() -> None:
    hpa = HpaRole([MetricRule("queue", 5, False)], 0, 4, HpaBehavior(), keda_activation=0.0, cooldown_s=300, count_gateway=True)
    assert hpa.decide(0.0, obs(0, 0)) == 0
    assert hpa.decide(15.0, obs(0, 0, gateway=1)) == 1  # a held request wakes the model
    assert hpa.decide(30.0, obs(1, 1, queue=0)) == 1
    assert hpa.decide(200.0, obs(1, 1)) == 1
    assert hpa.decide(320.0, obs(1, 1)) == 0  # idle for the cooldown


def test_manual_replica_sticks(prod_spec: PlatformSpec) -> None:
    sizing = size_platform(prod_spec).model("search-8b")
    ctx = ControllerContext(
        roles={"aggregated": sizing.role("aggregated")}, replica=replica_model_from_sizing(prod_spec.models[1], sizing),
    )
    c = build_controller(DutyCyclePolicy(manual_add_at_s=60), ctx)
    assert c.decide(30.0, {"aggregated": obs(3, 3, duty=2.1)})["aggregated"] == 3
    assert c.decide(60.0, {"aggregated": obs(3, 3, duty=2.1)})["aggregated"] == 4
    assert c.decide(500.0, {"aggregated": obs(4, 4, duty=0.4)})["aggregated"] == 4


def test_policy_union_parses_by_kind() -> None:
    ta: TypeAdapter[PolicySpec] = TypeAdapter(PolicySpec)
    assert isinstance(ta.validate_python({"kind": "gpuscale"}), GpuscalePolicy)
    assert ta.validate_python({"kind": "dcgm-duty-cycle", "target": 0.7}).target == 0.7  # type: ignore[union-attr]
    with pytest.raises(ValidationError, match="kind"):
        ta.validate_python({"kind": "cpu"})


def test_every_policy_kind_has_one_controller_factory(prod_spec: PlatformSpec) -> None:
    kinds = {m.model_fields["kind"].default for m in (DutyCyclePolicy, QueueDepthPolicy, GpuscalePolicy, FixedPolicy)}
    assert set(CONTROLLERS) == kinds
    ctx = prod_context(prod_spec)
    fixed = build_controller(FixedPolicy(replicas=2, per_role={"decode": 5}), ctx)
    assert fixed.decide(0.0, {}) == {"prefill": 2, "decode": 5}


def test_gpuscale_controller_reads_the_emitted_signals(raw_stack) -> None:  # type: ignore[no-untyped-def]
    # ceilings that do not bind in this test: 5 + 5 four-GPU replicas fill chat's 40-GPU quota, and carry 28 rps
    raw = raw_stack("prod")
    raw["models"][0]["workload"]["peak_rps"] = 28
    raw["models"][0]["autoscaling"]["prefill"]["max_replicas"] = 5
    raw["models"][0]["autoscaling"]["decode"]["max_replicas"] = 5
    prod_spec = validate_config(raw, "t")
    ms = size_platform(prod_spec).model(prod_spec.models[0].name)
    c = build_controller(GpuscalePolicy(), prod_context(prod_spec))
    assert isinstance(c, HpaController)
    prefill, decode = c.roles["prefill"], c.roles["decode"]
    for hpa, role in ((prefill, "prefill"), (decode, "decode")):
        emitted = [(sig, sig.target, False, sig.metric_type == "Value") for sig in ms.role(role).signals]
        assert [(r.source, r.target, r.pods_metric, r.value) for r in hpa.rules] == emitted
    load = ms.role("prefill").signals[0]
    assert isinstance(load, PrefillSlo)
    # prompt tokens worth 4 replicas of work on 2 replicas: with the queueing headroom, over the target that keeps the
    # role within the HPA's tolerance of what it needs, the HPA asks for 5
    rate = 4.0 / load.coefficients.prefill_s(1500)
    assert 4.0 < _prefill_needed(load, rate, 1500.0) / load.target < 5.0
    assert prefill.decide(0.0, RoleObservation("prefill", 2, 2, 0.0, 0.0, 0.0, 0.0, 0.0, prompt_rate=rate)) == 5
    # KV at 1.2x its target on 4 decode replicas asks for 5 even when the load does not
    kv_target = ms.role("decode").signals[1].target
    assert decode.decide(60.0, obs(4, 4, kv=4 * 1.2 * kv_target, role="decode")) == 5


def test_the_proportional_signal_holds_capacity_the_queue_signal_drops(prod_spec: PlatformSpec) -> None:
    # finding 1: once the backlog clears, queue depth reads 0 and a queue-only HPA falls to its minimum
    ctx = prod_context(prod_spec)
    ours = build_controller(GpuscalePolicy(), ctx).roles["prefill"]  # type: ignore[attr-defined]
    queue_only = build_controller(QueueDepthPolicy(), ctx).roles["prefill"]  # type: ignore[attr-defined]
    ms = size_platform(prod_spec).model(prod_spec.models[0].name)
    coef = ms.role("prefill").signals[0].coefficients
    assert coef is not None
    rate = 4.2 / coef.prefill_s(1500)  # with its headroom and over its target, about five replicas' worth
    for t in range(0, 1800, 15):
        steady = RoleObservation("prefill", 5, 5, 0.0, 0.0, 0.0, 0.0, 0.0, prompt_rate=rate)  # nothing waits
        a, b = ours.decide(float(t), steady), queue_only.decide(float(t), steady)
    assert (a, b) == (5, 1)


def test_keda_activation_sits_on_the_queue_trigger() -> None:
    hpa = HpaRole(
        [MetricRule("prompt_rate", 2000, False), MetricRule("queue", 5, False)], 0, 4, HpaBehavior(),
        keda_activation=1.0, cooldown_s=300, activation_rule=1,
    )
    assert hpa.decide(0.0, obs(1, 1, queue=1)) == 1  # one waiting request is not above the threshold of 1...
    assert hpa.decide(290.0, obs(1, 1, prompt_rate=50)) == 1  # ...but prompts still flowing keep it awake
    assert hpa.decide(600.0, obs(1, 1, queue=1)) == 0  # idle (queue 1 <= 1, no prompts) for the cooldown
    assert hpa.decide(615.0, obs(0, 0, queue=2)) == 1
