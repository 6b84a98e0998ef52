"""Controller mechanics: the HPA formula, tolerance, missing pods, stabilisation, rate limits, KEDA activation."""

from __future__ import annotations

import math

import pytest
from pydantic import TypeAdapter, ValidationError

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
)
from gpuscale.sim.replica import replica_model_from_sizing
from gpuscale.sizing import size_platform
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
    assert {(p.type, p.value, p.period_s) for p in b.scale_up.policies} == {("Percent", 100, 60), ("Pods", 2, 60)}
    assert [(p.type, p.value) for p in b.scale_down.policies] == [("Pods", 1)]
    queue = rs.signal("vllm:num_requests_waiting")
    assert queue is not None
    hpa = HpaRole([MetricRule("queue", queue.target, False)], 1, 9, b)
    assert hpa.decide(0.0, obs(1, 1, queue=1000)) == 3  # max(+100%, +2 pods) per minute
    assert hpa.decide(30.0, obs(3, 1, queue=1000)) == 3


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
    # ceilings that do not bind in this test: 4 + 6 four-GPU replicas fill chat's 40-GPU quota
    raw = raw_stack("prod")
    raw["models"][0]["autoscaling"]["prefill"]["max_replicas"] = 4
    raw["models"][0]["autoscaling"]["decode"]["max_replicas"] = 6
    prod_spec = validate_config(raw, "t")
    ms = size_platform(prod_spec).model(prod_spec.models[0].name)
    c = build_controller(GpuscalePolicy(), prod_context(prod_spec))
    assert isinstance(c, HpaController)
    prefill, decode = c.roles["prefill"], c.roles["decode"]
    sources = {"vllm:prompt_tokens_total": "prompt_rate", "vllm:num_requests_waiting": "queue",
               "vllm:kv_cache_usage_perc": "kv", "vllm:generation_tokens_total": "generation_rate"}
    for hpa, role in ((prefill, "prefill"), (decode, "decode")):
        emitted = [(sources[sig.metric], sig.target, False) for sig in ms.role(role).signals]
        assert [(r.source, r.target, r.pods_metric) for r in hpa.rules] == emitted
    prompt_target = prefill.rules[0].target
    kv_target, rate_target = decode.rules[0].target, decode.rules[1].target
    # a prompt rate of 6 replicas' targets on 2 replicas: the HPA asks for 6, capped at +100%/+2 pods per minute
    assert prefill.decide(0.0, obs(2, 2, prompt_rate=6 * prompt_target, role="prefill")) == 4
    # an output rate of 3.5 replicas' targets on 2 decode replicas with little KV: the rate asks for 4
    assert decode.decide(0.0, obs(2, 2, kv=0.2 * kv_target, generation_rate=3.5 * rate_target, role="decode")) == 4
    # KV at 1.4x its target on 4 replicas asks for 6 even when the rate does not
    assert decode.decide(60.0, obs(4, 4, kv=4 * 1.4 * kv_target, generation_rate=3.5 * rate_target, role="decode")) == 6


def test_the_proportional_signal_holds_capacity_the_queue_signal_drops(prod_spec: PlatformSpec) -> None:
    # finding 1: once the backlog clears, queue depth reads 0 and a queue-only HPA falls to its minimum
    ctx = prod_context(prod_spec)
    ours = build_controller(GpuscalePolicy(), ctx).roles["prefill"]  # type: ignore[attr-defined]
    queue_only = build_controller(QueueDepthPolicy(), ctx).roles["prefill"]  # type: ignore[attr-defined]
    for t in range(0, 1800, 15):
        steady = obs(5, 5, queue=0, prompt_rate=60_000, role="prefill")  # served at capacity, nothing waits
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
