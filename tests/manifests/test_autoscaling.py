"""Autoscaling builders: one autoscaler per role, the right signal per role, thresholds from sizing, schemas."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from gpuscale import labels, versions
from gpuscale.manifests import autoscaling as au
from gpuscale.manifests.autoscaling import AutoscalerSettings
from gpuscale.signals import slo_target
from gpuscale.signals.base import quantity
from gpuscale.signals.decode_slo import DecodeSlo
from gpuscale.signals.prefill_slo import PrefillSlo
from gpuscale.sizing import size_platform
from gpuscale.spec.platform import PlatformSpec
from gpuscale.stackfile import StackConfigError, validate_config
from tests.conftest import STACKS, requires_shared
from tests.specs import multi_node_aggregated


def role_args(spec: PlatformSpec, model: str, role: str) -> AutoscalerSettings:
    return AutoscalerSettings.from_platform(spec, size_platform(spec), model, role)  # type: ignore[arg-type]


def all_role_args(stack_specs: dict[str, PlatformSpec]) -> list[tuple[str, AutoscalerSettings]]:
    out = []
    for name in STACKS:
        spec = stack_specs[name]
        sizing = size_platform(spec)
        for m in spec.models:
            out += [(name, AutoscalerSettings.from_platform(spec, sizing, m.name, r)) for r in m.serving.roles]
    return out


def role_matchers(query: str) -> list[tuple[str, str]]:
    return re.findall(r'gpuscale_io_role\s*(=~|!~|!=|=)\s*"([^"]*)"', query)


# ---------------------------------------------------------------- the prod P/D contract (issue 5, Tests)


def test_prod_prefill_and_decode_have_separate_scaled_objects(prod_spec: PlatformSpec) -> None:
    prefill = au.scaled_object_body(role_args(prod_spec, "llama-70b-fp8", "prefill"))
    decode = au.scaled_object_body(role_args(prod_spec, "llama-70b-fp8", "decode"))
    assert prefill["metadata"]["name"] != decode["metadata"]["name"]
    assert prefill["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llama-70b-fp8-prefill"}
    assert decode["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llama-70b-fp8-decode"}
    p_load, p_backlog, p_guard = prefill["spec"]["triggers"]
    d_load, d_kv, d_guard = decode["spec"]["triggers"]
    assert [t["name"] for t in prefill["spec"]["triggers"]] == ["prefill-slo", "prompt-backlog", "queue-time"]
    assert [t["name"] for t in decode["spec"]["triggers"]] == ["decode-slo", "kv-cache-usage-perc", "itl"]
    assert "vllm:prompt_tokens_total" in p_load["metadata"]["query"]
    assert "vllm:num_requests_waiting" in p_backlog["metadata"]["query"]
    assert "vllm:request_queue_time_seconds_sum" in p_guard["metadata"]["query"]
    assert "vllm:generation_tokens_total" in d_load["metadata"]["query"]
    assert "vllm:kv_cache_usage_perc" in d_kv["metadata"]["query"]
    assert "vllm:inter_token_latency_seconds_sum" in d_guard["metadata"]["query"]
    pairs = [(t, "prefill", "decode") for t in (p_load, p_backlog, p_guard)]
    pairs += [(t, "decode", "prefill") for t in (d_load, d_kv, d_guard)]
    for trigger, own, other in pairs:
        query = trigger["metadata"]["query"]
        assert "DCGM" not in query.upper()
        assert set(role_matchers(query)) == {("=", own)}  # every selector: exactly its own role, by equality
        assert other not in query
        assert query.count('gpuscale_io_model="llama-70b-fp8"') == query.count("gpuscale_io_role=") >= 1
        assert au.check_single_role(query) == own
        assert trigger["metadata"]["serverAddress"] == prod_spec.observability.prometheus_url
        guard = trigger["name"] in ("queue-time", "itl")
        assert trigger["metricType"] == ("Value" if guard else "AverageValue") and query.startswith("sum(")
    for body in (prefill, decode):
        assert body["spec"]["minReplicaCount"] >= 1  # critical SLO: a warm replica per role
        assert prod_spec.models[0].slo.criticality == "critical"


def test_every_metric_a_query_reads_is_one_the_pinned_vllm_exposes(stack_specs: dict[str, PlatformSpec]) -> None:
    exposed = versions.VLLM_METRICS | versions.VLLM_RATE_METRICS | {
        f"{h}_{suffix}" for h in versions.VLLM_HISTOGRAMS for suffix in ("sum", "count")
    }
    for _, args in all_role_args(stack_specs):
        for sig in args.scaling.signals:
            if args.backend != "keda":
                continue
            query = au.signal_query(sig, args.namespace, args.model, args.role)
            assert set(re.findall(r"vllm:[a-z_]+", query)) <= exposed, query


def test_thresholds_come_from_sizing(prod_spec: PlatformSpec) -> None:
    sizing = size_platform(prod_spec).model("llama-70b-fp8")
    for role in ("prefill", "decode"):
        s = sizing.role(role)
        body = au.scaled_object_body(role_args(prod_spec, "llama-70b-fp8", role))
        triggers = body["spec"]["triggers"]
        assert len(triggers) == len(s.signals)
        for t, sig in zip(triggers, s.signals, strict=True):
            assert t["metadata"]["threshold"] == f"{sig.target:g}" and isinstance(t["metadata"]["threshold"], str)
            assert t["metricType"] == sig.metric_type
            assert "activationThreshold" not in t["metadata"]  # min >= 1: activation plays no part
        spec = body["spec"]
        assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (s.min_replicas, s.max_replicas)
        assert (spec["pollingInterval"], spec["cooldownPeriod"]) == (s.polling_interval_s, s.cooldown_s)
        down = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]
        assert down["stabilizationWindowSeconds"] == s.scale_down_stabilization_s
        assert down["stabilizationWindowSeconds"] > sizing.cold_start.total_s  # longer than a cold start
        assert "initialCooldownPeriod" not in spec


def burst_term(work: str, noise: str, offset: str) -> str:
    """The burst headroom as PromQL, typed out: the upper 1 % of the work's change over one cold start (``offset``) in
    the last hour, mean + z x the standard deviation left once the counting noise of both ends (``noise``, the variance
    of the one-minute work at a constant rate) is taken out of its variance, at least 0 and 0 without such a past, times
    the idle scaling."""
    def shift(e: str) -> str:
        return re.sub(r"(\{[^}]*\}(?:\[[0-9]+[smhd]\])?)", rf"\1 offset {offset}", e)

    change = f"({work} - {shift(work)})[1h:1m]"  # both products: no parentheses needed
    counted = f"avg_over_time(({noise} + {shift(noise)})[1h:1m])"
    spread = f"sqrt(clamp_min(stddev_over_time({change}) * stddev_over_time({change}) - {counted}, 0))"
    return (
        f"(clamp_min(avg_over_time({change}) + {slo_target.BURST_Z:g} * {spread}, 0) or on() vector(0))"
        f" * clamp_max({work} / {slo_target.IDLE_WORK:g}, 1)"
    )


def counted_noise(rate: str, size: str, spread: float, cost: str) -> str:
    """One token counter's counting variance, typed out: ``rate x mean size x (1 + cs^2) x cost^2 / 45 s``."""
    return f"{rate} * {size} * {spread:.6g} * {cost} * {cost} / {slo_target.RATE_SPAN_S:g}"


def test_prefill_load_and_backlog_queries_carry_sizing_costs(prod_spec: PlatformSpec) -> None:
    s = size_platform(prod_spec).model("llama-70b-fp8").role("prefill")
    coef = s.signals[0].coefficients
    assert coef is not None
    body = au.scaled_object_body(role_args(prod_spec, "llama-70b-fp8", "prefill"))
    load, backlog, _guard = body["spec"]["triggers"]
    sel = '{namespace="inference",gpuscale_io_model="llama-70b-fp8",gpuscale_io_role="prefill"}'
    mean_prompt = (
        f"(sum(rate(vllm:request_prompt_tokens_sum{sel}[5m])) / (sum(rate(vllm:request_prompt_tokens_count{sel}[5m])) > 0)"
        " or on() vector(1500))"
    )
    cost = f"({coef.prefill_s_per_token:.6g} + {coef.prefill_s_per_pair / 2:.6g} * {mean_prompt})"
    # replicas needed (slo_target): work + Erlang-C queueing headroom + burst headroom, over one replica's worth
    sig = s.signals[0]
    assert isinstance(sig, PrefillSlo)
    work = f"sum(rate(vllm:prompt_tokens_total{sel}[1m])) * {cost}"
    tail = f"{mean_prompt} * {sig.tail_ratio:g}"
    tail_service = f"{tail} * {coef.prefill_s_per_token:.6g} + {tail} * ({tail}) * {coef.prefill_s_per_pair / 2:.6g}"
    slack = f"clamp_min({sig.ttft_s:g} - ({tail_service}), {slo_target.SLACK_FLOOR_SHARE * sig.ttft_s:g})"
    # (ca^2 + cs^2) / 2 observed: the 15 s prompt tokens' index of dispersion about the 1 m rate, at least the Poisson mix
    short = f"sum(rate(vllm:prompt_tokens_total{sel}[30s]))"
    minute = f"sum(rate(vllm:prompt_tokens_total{sel}[1m]))"
    spread = f"stddev_over_time(({short} - {minute})[10m:15s])"
    scale = slo_target.DISPERSION_INTERVAL_S / (1.0 - 1.0 / slo_target.RATE_INTERVALS)
    observed = f"{scale:.6g} * {spread} * {spread} / ((avg_over_time(({minute})[10m:15s]) > 0) * {mean_prompt})"
    dispersion = f"clamp_max(clamp_min({observed} or on() vector(0), {2 * sig.queue_factor:.6g}), {slo_target.DISPERSION_MAX:g})"
    queueing = (
        f"{dispersion} / 2 * ({mean_prompt} * {cost}) / {slack}"
        f" * clamp_min(ln(clamp_max({work}, 1) / {slo_target.TTFT_TAIL:g}), 0)"
    )
    noise = counted_noise(minute, mean_prompt, 2 * sig.queue_factor, cost)  # queue_factor: (1 + cs^2) / 2
    assert load["metadata"]["query"] == f"{work} + {queueing} + {burst_term(work, noise, sig.burst_offset)} or on() vector(0)"
    assert load["metadata"]["threshold"] == f"{slo_target.TARGET_REPLICAS:g}" == f"{sig.target:g}"
    assert backlog["metadata"]["query"] == f"sum(vllm:num_requests_waiting{sel}) * {mean_prompt} * {cost} or on() vector(0)"
    assert float(backlog["metadata"]["threshold"]) == 0.5 * prod_spec.models[0].slo.ttft_p99_s


def test_decode_load_weighs_each_token_by_its_kv_share(prod_spec: PlatformSpec) -> None:
    body = au.scaled_object_body(role_args(prod_spec, "llama-70b-fp8", "decode"))
    load, kv, itl = body["spec"]["triggers"]
    c = size_platform(prod_spec).model("llama-70b-fp8").role("decode").signals[0].coefficients
    assert c is not None
    sel = '{namespace="inference",gpuscale_io_model="llama-70b-fp8",gpuscale_io_role="decode"}'
    # the ITL capacity at the KV share in use: the larger of the step model's two lines (sizing.itl_capacity_lines)
    share = f"(sum(vllm:kv_cache_usage_perc{sel}) / clamp_min(sum(vllm:num_requests_running{sel}), 1))"
    assert len(c.decode_itl_lines) == 2
    (a0, b0), (a1, b1) = c.decode_itl_lines
    first = f"{a0:.6g} + {b0:.6g} * {share}"
    rate = f"sum(rate(vllm:generation_tokens_total{sel}[1m]))"
    cost = f"({first} + clamp_min({a1:.6g} + {b1:.6g} * {share} - ({first}), 0))"
    work = f"{rate} * {cost}"
    # replicas needed (slo_target): the work plus the burst headroom over the work's change within a cold start, less
    # the output tokens' counting noise (the workload's output mix: mean and the cs^2 its p99 gives)
    sig = size_platform(prod_spec).model("llama-70b-fp8").role("decode").signals[0]
    assert isinstance(sig, DecodeSlo)
    out = prod_spec.models[0].workload.output_tokens
    assert sig.output_mean == out.mean and sig.output_cs2 == pytest.approx(slo_target.lognormal_cs2(out.mean, out.p99), abs=1e-4)
    noise = counted_noise(rate, f"{out.mean:g}", 1.0 + sig.output_cs2, cost)
    assert load["metadata"]["query"] == f"{work} + {burst_term(work, noise, sig.burst_offset)} or on() vector(0)"
    assert load["metadata"]["threshold"] == f"{slo_target.TARGET_REPLICAS:g}"
    m = size_platform(prod_spec).model("llama-70b-fp8")
    expected = min(0.8, round(m.decode_batch_at_slo * (1500 + 250 / 2) / m.kv_capacity_tokens, 2))
    assert kv["metadata"]["query"].startswith("sum(vllm:kv_cache_usage_perc{") and kv["metadata"]["threshold"] == f"{expected:g}"
    assert itl["metadata"]["query"] == (
        f"sum(rate(vllm:inter_token_latency_seconds_sum{sel}[1m])) / (sum(rate(vllm:inter_token_latency_seconds_count{sel}[1m])) > 0)"
        " or on() vector(0)"  # no gap observed in the minute reads 0, not NaN (an error to KEDA)
    )
    assert itl["metricType"] == "Value" and itl["metadata"]["threshold"] == f"{0.8 * 0.05:g}"


def test_burst_mode_is_a_short_scale_up_window(raw_stack: Callable[[str], dict[str, Any]]) -> None:
    on = au.hpa_behavior(size_platform(validate_config(raw_stack("prod"), "t")).model("llama-70b-fp8").role("prefill"))
    raw = raw_stack("prod")
    raw["models"][0]["autoscaling"]["prefill"]["burst_mode"] = False
    off_sizing = size_platform(validate_config(raw, "t")).model("llama-70b-fp8").role("prefill")
    off = au.hpa_behavior(off_sizing)
    assert [p["periodSeconds"] for p in on["scaleUp"]["policies"]] == [15, 15]
    assert [(p["type"], p["value"]) for p in on["scaleUp"]["policies"]] == [("Percent", 100), ("Pods", 4)]
    assert [p["periodSeconds"] for p in off["scaleUp"]["policies"]] == [60, 60]
    assert on["scaleDown"] == off["scaleDown"]  # scale-down keeps the long window either way
    assert [s.kind for s in off_sizing.signals] == ["prefill_slo", "queue_time"]  # no backlog trigger


def test_warm_schedule_windows_are_cron_triggers(raw_stack: Callable[[str], dict[str, Any]]) -> None:
    raw = raw_stack("prod")
    raw["models"][0]["autoscaling"]["prefill"]["warm_schedule"] = [
        {"start": "30 7 * * *", "end": "0 18 * * *", "replicas": 3}, {"start": "0 18 * * *", "end": "0 21 * * *", "replicas": 2},
    ]
    body = au.scaled_object_body(role_args(validate_config(raw, "t"), "llama-70b-fp8", "prefill"))
    crons = [t for t in body["spec"]["triggers"] if t["type"] == "cron"]
    assert crons == [
        {"type": "cron", "name": "warm-schedule-0",
         "metadata": {"timezone": "UTC", "start": "30 7 * * *", "end": "0 18 * * *", "desiredReplicas": "3"}},
        {"type": "cron", "name": "warm-schedule-1",
         "metadata": {"timezone": "UTC", "start": "0 18 * * *", "end": "0 21 * * *", "desiredReplicas": "2"}},
    ]


def test_hpa_backend_refuses_guards_and_schedules(raw_stack: Callable[[str], dict[str, Any]]) -> None:
    raw = raw_stack("staging")
    raw["models"][0]["autoscaling"]["aggregated"] = {"slo_guard": True}
    with pytest.raises(StackConfigError, match="slo_guard: true needs backend: keda"):
        validate_config(raw, "t")
    raw["models"][0]["autoscaling"]["aggregated"] = {"warm_schedule": [{"start": "0 8 * * *", "end": "0 9 * * *"}]}
    with pytest.raises(StackConfigError, match="warm_schedule needs backend: keda"):
        validate_config(raw, "t")


def test_aggregated_keda_sums_prefill_and_decode_work(prod_spec: PlatformSpec) -> None:
    s = size_platform(prod_spec).model("search-8b").role("aggregated")
    body = au.scaled_object_body(role_args(prod_spec, "search-8b", "aggregated"))
    load, backlog, kv, qt, itl = body["spec"]["triggers"]
    query = load["metadata"]["query"]
    stall = s.signals[0].coefficients.prefill_stall  # type: ignore[attr-defined]
    # the prefill work weighed by the decode steps it holds (sizing.prefill_stall), plus the decode work
    assert "vllm:prompt_tokens_total" in query and "vllm:generation_tokens_total" in query and f") * {stall:g} + sum(" in query
    assert "vllm:num_requests_waiting" in backlog["metadata"]["query"]
    assert "vllm:kv_cache_usage_perc" in kv["metadata"]["query"]
    assert [t["metadata"]["threshold"] for t in (load, backlog, kv, qt, itl)] == [f"{x.target:g}" for x in s.signals]
    assert float(kv["metadata"]["threshold"]) < 0.8  # derived from the ITL batch, not the generic 0.8
    assert len({t["name"] for t in (load, backlog, kv, qt, itl)}) == 5
    for t in (load, backlog, kv, qt, itl):
        assert set(role_matchers(t["metadata"]["query"])) == {("=", "aggregated")}


def test_dev_scales_to_zero_and_its_front_door_wakes_it(dev_spec: PlatformSpec) -> None:
    sized = size_platform(dev_spec).models[0]
    assert sized.front_door is not None
    body = au.scaled_object_body(role_args(dev_spec, "llama-8b", "aggregated"))
    spec = body["spec"]
    assert spec["minReplicaCount"] == 0 and spec["maxReplicaCount"] == 4
    load, backlog, kv, qt, itl, door = spec["triggers"]
    assert backlog["metadata"]["activationThreshold"] == "0"  # KEDA activates on metric > threshold: one waiting request
    assert load["metadata"]["activationThreshold"] == "0"  # stay up while prompts flow
    assert kv["metadata"]["activationThreshold"] == "0"  # stay up while any request still holds KV
    assert qt["metadata"]["activationThreshold"] == itl["metadata"]["activationThreshold"] == "0"
    # at zero the vLLM gauges are gone: the front door's queue is the wake-up signal that survives zero
    assert door["name"] == "front-door-queue" and door["metricType"] == "AverageValue"
    assert door["metadata"]["query"] == (
        'sum(llm_d_epp_flow_control_queue_size{namespace="inference",service="llama-8b-door-epp"}) or on() vector(0)'
    )
    assert door["metadata"]["activationThreshold"] == "0"
    assert door["metadata"]["threshold"] == str(sized.front_door.per_replica)
    # the model sleeps after the front door's idle window; KEDA checks the door at its poll interval
    assert spec["cooldownPeriod"] == dev_spec.models[0].front_door.idle_window_s
    assert spec["pollingInterval"] == dev_spec.models[0].front_door.poll_s
    assert spec["initialCooldownPeriod"] >= sized.cold_start.total_s
    assert au.scale_to_zero_warnings(role_args(dev_spec, "llama-8b", "aggregated")) == []


def test_the_cron_schedule_stays_an_option(raw_stack: Callable[[str], dict[str, Any]]) -> None:
    raw = raw_stack("dev")
    raw["models"][0]["front_door"] = {"enabled": False}
    raw["models"][0]["autoscaling"]["aggregated"]["wake_schedule"] = {
        "timezone": "Europe/London", "start": "0 8 * * 1-5", "end": "0 19 * * 1-5"}
    spec = validate_config(raw, "t")
    body = au.scaled_object_body(role_args(spec, "llama-8b", "aggregated"))
    *_, cron = body["spec"]["triggers"]
    assert cron == {
        "type": "cron", "name": "wake-schedule",
        "metadata": {"timezone": "Europe/London", "start": "0 8 * * 1-5", "end": "0 19 * * 1-5", "desiredReplicas": "1"},
    }
    assert "front-door-queue" not in [t["name"] for t in body["spec"]["triggers"]]
    assert body["spec"]["cooldownPeriod"] == 300 and body["spec"]["pollingInterval"] == 15
    (warning,) = au.scale_to_zero_warnings(role_args(spec, "llama-8b", "aggregated"))
    assert "outside its wake schedule" in warning


def test_scale_to_zero_without_a_wake_signal_is_refused(raw_stack: Callable[[str], dict[str, Any]]) -> None:
    raw = raw_stack("dev")
    raw["models"][0]["front_door"] = {"enabled": False}
    with pytest.raises(StackConfigError) as info:
        validate_config(raw, "t")
    (msg,) = info.value.lines()
    assert msg.startswith("gpuscale:models[0].autoscaling.aggregated.min_replicas: autoscaling.aggregated.min_replicas is 0, but at zero replicas vLLM's gauges vanish")
    assert "front_door.enabled: false" in msg and "wake_schedule" in msg


def test_no_scale_to_zero_warning_with_a_warm_minimum(prod_spec: PlatformSpec) -> None:
    assert au.scale_to_zero_warnings(role_args(prod_spec, "llama-70b-fp8", "prefill")) == []


def test_paused_annotation(raw_stack: Callable[[str], dict[str, Any]]) -> None:
    raw = raw_stack("dev")
    raw["models"][0]["autoscaling"]["paused"] = True
    body = au.scaled_object_body(role_args(validate_config(raw, "t"), "llama-8b", "aggregated"))
    assert body["metadata"]["annotations"] == {labels.KEDA_PAUSED_ANNOTATION: "true"}
    dev = au.scaled_object_body(role_args(validate_config(raw_stack("dev"), "t"), "llama-8b", "aggregated"))
    assert "annotations" not in dev["metadata"]


def test_lws_target_uses_its_scale_subresource(raw_stack: Callable[[str], dict[str, Any]]) -> None:
    raw = multi_node_aggregated(raw_stack("prod"))
    body = au.scaled_object_body(role_args(validate_config(raw, "t"), "llama-70b-fp8", "aggregated"))
    assert body["spec"]["scaleTargetRef"] == {
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "name": "llama-70b-fp8-aggregated",
    }


# ---------------------------------------------------------------- names and refusals


def test_scaled_object_names_fit_keda_limit() -> None:
    assert au.scaled_object_name("llama-70b-fp8", "prefill") == "llama-70b-fp8-prefill"
    long = au.scaled_object_name("a" * 40, "aggregated")
    assert len(long) <= au.KEDA_NAME_LIMIT == 54
    assert long == au.scaled_object_name("a" * 40, "aggregated")  # deterministic
    assert long != au.scaled_object_name("a" * 39 + "b", "aggregated")
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", long)


def test_every_stack_name_fits(stack_specs: dict[str, PlatformSpec]) -> None:
    for _stack, a in all_role_args(stack_specs):
        assert len(au.autoscaler_body(a)["metadata"]["name"]) <= au.KEDA_NAME_LIMIT


@pytest.mark.parametrize("role", ["prefill|decode", "", "all", "*"])
def test_a_query_over_both_roles_is_refused(role: str) -> None:
    with pytest.raises(ValueError, match="scales the wrong role"):
        au.role_query("vllm:num_requests_waiting", "inference", "m", role)


@pytest.mark.parametrize(
    "query",
    [
        'sum(vllm:num_requests_waiting{gpuscale_io_model="m"})',
        'sum(vllm:num_requests_waiting{gpuscale_io_role=~"prefill|decode"})',
        'sum(vllm:num_requests_waiting{gpuscale_io_role!="router"})',
        'sum(vllm:num_requests_waiting{gpuscale_io_role="prefill",gpuscale_io_role="decode"})',
    ],
)
def test_check_single_role_refuses(query: str) -> None:
    with pytest.raises(ValueError, match="exactly one role"):
        au.check_single_role(query)


def test_removed_or_unknown_metrics_are_refused() -> None:
    with pytest.raises(ValueError, match=re.escape("vLLM v0.33.0 no longer exposes vllm:gpu_cache_usage_perc")):
        au.role_query("vllm:gpu_cache_usage_perc", "ns", "m", "decode")
    with pytest.raises(ValueError, match="GPU utilisation is a duty cycle"):  # the guardrail's list, as the spec's
        au.role_query("DCGM_FI_DEV_GPU_UTIL", "ns", "m", "decode")
    with pytest.raises(ValueError, match="not a vLLM gauge"):
        au.role_query("vllm:num_preemptions_total", "ns", "m", "decode")
    with pytest.raises(ValueError, match="not a vLLM counter"):
        au.role_query("vllm:num_requests_waiting", "ns", "m", "prefill", "rate")
    with pytest.raises(ValueError, match="scale on its rate"):  # a summed counter only ever grows
        au.role_query("vllm:prompt_tokens_total", "ns", "m", "prefill", "gauge")


def test_a_rate_query_over_both_roles_is_refused() -> None:
    with pytest.raises(ValueError, match="scales the wrong role"):
        au.role_query("vllm:prompt_tokens_total", "ns", "m", "prefill|decode", "rate")
    with pytest.raises(ValueError, match="exactly one role"):
        au.check_single_role('sum(rate(vllm:prompt_tokens_total{gpuscale_io_role=~"prefill|decode"}[1m]))')


def test_args_refuse_a_foreign_role_or_target(prod_spec: PlatformSpec) -> None:
    a = role_args(prod_spec, "llama-70b-fp8", "prefill")
    with pytest.raises(ValueError, match="sized for role"):
        AutoscalerSettings(**{**a.__dict__, "role": "decode"})
    other = a.target.model_copy(update={"name": "llama-70b-fp8-decode"})
    with pytest.raises(ValueError, match="one autoscaler per role"):
        au.scaled_object_body(AutoscalerSettings(**{**a.__dict__, "target": other}))


# ---------------------------------------------------------------- HPA backend (staging)


def test_every_autoscaler_carries_its_models_criticality(stack_specs: dict[str, PlatformSpec]) -> None:
    """The label the policy pack's warm-minimum rule reads, on ScaledObjects and HPAs alike (prod's critical
    llama-70b, standard search-8b; staging's HPA)."""
    seen: dict[str, set[str]] = {}
    for stack, a in all_role_args(stack_specs):
        spec = stack_specs[stack]
        body = au.autoscaler_body(a)
        criticality = next(m for m in spec.models if m.name == a.model).slo.criticality
        assert body["metadata"]["labels"][labels.CRITICALITY_LABEL] == criticality
        seen.setdefault(body["kind"], set()).add(criticality)
    assert "critical" in seen["ScaledObject"] and "HorizontalPodAutoscaler" in seen


def test_staging_uses_an_hpa_on_adapter_metrics(stack_specs: dict[str, PlatformSpec]) -> None:
    spec = stack_specs["staging"]
    a = role_args(spec, "llama-70b", "aggregated")
    assert a.backend == "hpa"
    body = au.autoscaler_body(a)
    assert body["apiVersion"] == "autoscaling/v2" and body["kind"] == "HorizontalPodAutoscaler"
    hpa = body["spec"]
    s = size_platform(spec).model("llama-70b").role("aggregated")
    assert (hpa["minReplicas"], hpa["maxReplicas"]) == (s.min_replicas, s.max_replicas) and hpa["minReplicas"] >= 1
    assert hpa["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llama-70b-aggregated"}
    rate, queue, kv = hpa["metrics"]
    assert rate["type"] == queue["type"] == kv["type"] == "Pods"
    rate_s, queue_s, kv_s = s.signals
    # the prompt-token rate per pod, served by the adapter's rate rule
    assert rate["pods"]["metric"]["name"] == "vllm_prompt_tokens_per_second"
    assert rate["pods"]["target"] == {"type": "AverageValue", "averageValue": quantity(rate_s.target)}
    assert queue["pods"]["metric"]["name"] == "vllm_num_requests_waiting"
    assert queue["pods"]["target"] == {"type": "AverageValue", "averageValue": quantity(queue_s.target)}
    assert kv["pods"]["metric"]["name"] == "vllm_kv_cache_usage_perc"
    assert kv["pods"]["target"] == {"type": "AverageValue", "averageValue": quantity(kv_s.target)}
    assert kv_s.target < 0.8
    names = {r["name"]["as"] for r in au.prometheus_adapter_values(spec.observability.prometheus_url)["rules"]["custom"]}
    for m in (rate, queue, kv):
        assert m["pods"]["metric"]["selector"]["matchLabels"]["gpuscale_io_role"] == "aggregated"
        assert m["pods"]["metric"]["name"] in names  # every metric the HPA reads is one the adapter serves
    assert hpa["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == s.scale_down_stabilization_s


def test_quantity() -> None:
    assert [quantity(x) for x in (3, 3.0, 0.8, 0.85, 1.5)] == ["3", "3", "800m", "850m", "1500m"]
    assert [au.fmt(x) for x in (13.0, 0.8, 1)] == ["13", "0.8", "1"]


def test_adapter_values_serve_only_custom_metrics(stack_specs: dict[str, PlatformSpec]) -> None:
    values = au.prometheus_adapter_values(stack_specs["staging"].observability.prometheus_url)
    assert values["prometheus"] == {"url": "http://kube-prometheus-stack-prometheus.monitoring.svc", "port": 9090, "path": ""}
    rules = values["rules"]
    assert rules["external"] == [] and rules["resource"] == {} and rules["default"] is False
    names = {r["name"]["as"] for r in rules["custom"]}
    assert {"vllm_num_requests_waiting", "vllm_kv_cache_usage_perc", "vllm_prompt_tokens_per_second"} <= names
    (rate,) = [r for r in rules["custom"] if r["name"]["as"] == "vllm_prompt_tokens_per_second"]
    assert rate["seriesQuery"] == 'vllm:prompt_tokens_total{namespace!="",pod!=""}'
    assert rate["name"]["matches"] == "^vllm:prompt_tokens_total$"
    assert rate["metricsQuery"] == "sum(rate(<<.Series>>{<<.LabelMatchers>>}[1m])) by (<<.GroupBy>>)"
    for r in rules["custom"]:
        assert r["resources"]["overrides"] == {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}
        assert r["seriesQuery"].endswith('{namespace!="",pod!=""}')
        assert "<<.LabelMatchers>>" in r["metricsQuery"]
    with pytest.raises(ValueError, match="not an http"):
        au.prometheus_adapter_values("prometheus:9090")


def test_backend_selection(stack_specs: dict[str, PlatformSpec]) -> None:
    assert au.needs_keda(stack_specs["prod"]) and au.needs_keda(stack_specs["dev"])
    assert not au.needs_keda(stack_specs["staging"]) and au.needs_prometheus_adapter(stack_specs["staging"])
    assert not au.needs_prometheus_adapter(stack_specs["prod"])


def test_chart_values() -> None:
    keda = au.keda_chart_values(servicemonitors=True)
    assert keda["crds"]["install"] is True and keda["operator"]["replicaCount"] == 2
    assert keda["prometheus"]["operator"]["serviceMonitor"]["enabled"] is True
    assert au.keda_chart_values(servicemonitors=False)["prometheus"]["metricServer"]["serviceMonitor"]["enabled"] is False
    prom = au.prometheus_stack_values(15)["prometheus"]["prometheusSpec"]
    assert prom["podMonitorSelectorNilUsesHelmValues"] is False  # select PodMonitors of every release
    assert prom["podMonitorNamespaceSelector"] == {} and prom["podMonitorSelector"] == {}  # in every namespace
    assert prom["scrapeInterval"] == "15s"
    assert au.prometheus_stack_url("monitoring") == "http://kube-prometheus-stack-prometheus.monitoring.svc:9090"
    assert versions.KUBE_PROMETHEUS_STACK.version == "88.0.0"


# ---------------------------------------------------------------- schemas


@requires_shared
def test_every_autoscaler_of_every_stack_is_schema_valid(stack_specs: dict[str, PlatformSpec]) -> None:
    from tests.k8s_schema import assert_valid

    bodies = [au.autoscaler_body(a) for _s, a in all_role_args(stack_specs)]
    assert {b["kind"] for b in bodies} == {"ScaledObject", "HorizontalPodAutoscaler"}
    assert_valid(*bodies)


@requires_shared
def test_keda_crd_refuses_min_above_max(prod_spec: PlatformSpec) -> None:
    from tests.k8s_schema import validate_object

    body = au.scaled_object_body(role_args(prod_spec, "llama-70b-fp8", "decode"))
    body["spec"]["minReplicaCount"] = body["spec"]["maxReplicaCount"] + 1
    assert any("minReplicaCount" in p for p in validate_object(body))


# ---------------------------------------------------------------- when Prometheus cannot answer


def test_scaled_objects_hold_current_replicas_while_prometheus_is_away(prod_spec: PlatformSpec, dev_spec: PlatformSpec) -> None:
    # a role that may scale to zero falls back to one replica: with 0, KEDA's RequestScale skips its hold branch
    # (pkg/scaling/executor/scale_scaledobjects.go L86) and an outage can take the model to zero
    dev = au.scaled_object_body(role_args(dev_spec, "llama-8b", "aggregated"))["spec"]
    assert dev["minReplicaCount"] == 0 and dev["fallback"]["replicas"] == 1
    for role in ("prefill", "decode"):
        body = au.scaled_object_body(role_args(prod_spec, "llama-70b-fp8", role))
        # KEDA v2.20: after more than 3 failed polls the HPA sees a metric that keeps max(current, min) replicas
        assert body["spec"]["fallback"] == {"failureThreshold": 3, "replicas": 2, "behavior": "currentReplicasIfHigher"}
        for trigger in body["spec"]["triggers"]:
            # every query is total, so an empty or NaN answer can only come from a broken query: an error the
            # fallback holds, never a 0 that scales the role down (tests/signals/test_signals.py: total queries)
            assert trigger["metadata"]["ignoreNullValues"] == "false"
            # KEDA v2.20 falls back on AverageValue (target x replicas) and Value (target x replicas / ready) triggers
            assert trigger["type"] == "prometheus" and trigger["metricType"] in ("AverageValue", "Value")


def test_prometheus_runs_on_demand_with_a_volume() -> None:
    spec = au.prometheus_stack_values(15)["prometheus"]["prometheusSpec"]
    assert spec["nodeSelector"] == {labels.KARPENTER_CAPACITY_TYPE_LABEL: "on-demand"}
    claim = spec["storageSpec"]["volumeClaimTemplate"]["spec"]
    assert claim["storageClassName"] == au.prometheus_storage_class_body()["metadata"]["name"] == "gp3"
    assert claim["resources"]["requests"]["storage"] == f"{au.PROMETHEUS_VOLUME_GIB}Gi"
    sc = au.prometheus_storage_class_body()
    assert sc["provisioner"] == "ebs.csi.aws.com" and sc["parameters"]["encrypted"] == "true"
    assert sc["volumeBindingMode"] == "WaitForFirstConsumer"  # EBS volumes are zonal
