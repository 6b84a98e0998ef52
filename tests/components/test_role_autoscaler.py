"""RoleAutoscaler under Pulumi mocks, and the spec guardrails that keep autoscalers on the right signal."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest

from gpuscale.components import (
    AutoscalerSettings,
    NameClash,
    PrometheusStack,
    PrometheusStackArgs,
    RoleAutoscaler,
    RoleAutoscalerArgs,
    VllmService,
    VllmServiceArgs,
)
from gpuscale.manifests.autoscaling import autoscaler_body
from gpuscale.sizing import size_platform
from gpuscale.spec.platform import PlatformSpec
from gpuscale.stackfile import StackConfigError, validate_config
from tests.components.support import Records, capture, consumer, ints, named, of_type, one, run
from tests.specs import model, pd_raw, pd_spec, small_raw, small_spec

SCALED_OBJECT = "kubernetes:keda.sh/v1alpha1:ScaledObject"
HPA = "kubernetes:autoscaling/v2:HorizontalPodAutoscaler"
WAKE = {"start": "0 8 * * 1-5", "end": "0 19 * * 1-5"}


def build(spec: PlatformSpec) -> tuple[Records, dict[str, Any]]:
    sizing = size_platform(spec)
    outputs: dict[str, Any] = {}

    def program() -> None:
        for m in spec.models:
            svc = VllmService(m.name, VllmServiceArgs.from_platform(spec, sizing, m.name))
            for role in m.serving.roles:
                a = RoleAutoscaler(f"{m.name}-{role}", RoleAutoscalerArgs.from_platform(
                                       spec, sizing, m.name, role, prometheus_url=spec.observability.prometheus_url),
                                   opts=pulumi.ResourceOptions(depends_on=[svc.workloads[role]]))
                capture(outputs, f"{m.name}/{role}", a.autoscaler_name)
                capture(outputs, f"{m.name}/{role}.kind", a.autoscaler_kind)
                consumer(f"reads-{m.name}-{role}", a.autoscaler_name)

    return run(program), outputs


def test_prefill_and_decode_each_get_their_own_scaled_object() -> None:
    records, outputs = build(pd_spec())
    objs = {r.name: r for r in of_type(records, SCALED_OBJECT)}
    assert set(objs) == {"m70b-prefill-scaledobject", "m70b-decode-scaledobject"}
    assert not of_type(records, HPA)
    workloads = {r.name: r for r in of_type(records, "kubernetes:apps/v1:Deployment")}
    for name, so in objs.items():
        role = name.removesuffix("-scaledobject").rsplit("-", 1)[1]
        target = so.inputs["spec"]["scaleTargetRef"]["name"]
        assert target == f"m70b-{role}"
        assert workloads[target].urn in so.dependencies  # the workload exists before its autoscaler
        for trigger in so.inputs["spec"]["triggers"]:
            assert f'gpuscale_io_role="{role}"' in trigger["metadata"]["query"]
            assert "DCGM" not in trigger["metadata"]["query"]
        assert one(records, "gpuscale:index:RoleAutoscaler", f"m70b-{role}").urn == so.parent_urn
    prefill, decode = objs["m70b-prefill-scaledobject"].inputs["spec"], objs["m70b-decode-scaledobject"].inputs["spec"]
    assert [t["name"] for t in prefill["triggers"]] == ["prefill-slo", "prompt-backlog", "queue-time"]
    assert "rate(vllm:prompt_tokens_total{" in prefill["triggers"][0]["metadata"]["query"]
    assert "vllm:num_requests_waiting" in prefill["triggers"][1]["metadata"]["query"]
    assert "vllm:kv_cache_usage_perc" in decode["triggers"][1]["metadata"]["query"]
    kv_target = size_platform(pd_spec()).model("m70b").role("decode").signals[1].target
    assert decode["triggers"][1]["metadata"]["threshold"] == f"{kv_target:g}"  # the KV of the batch that meets ITL
    assert prefill["minReplicaCount"] >= 1 and decode["minReplicaCount"] >= 1
    assert outputs["m70b/decode"] == "m70b-decode" and outputs["m70b/decode.kind"] == "ScaledObject"
    # the name comes from the ScaledObject: a consumer waits for it
    assert objs["m70b-decode-scaledobject"].urn in named(records, "reads-m70b-decode").dependencies


def test_the_hpa_backend() -> None:
    records, outputs = build(small_spec(models=[model(autoscaling={"backend": "hpa"})]))
    hpa = one(records, HPA)
    assert not of_type(records, SCALED_OBJECT)
    assert hpa.name == "m8b-aggregated-hpa" and hpa.inputs["spec"]["scaleTargetRef"]["name"] == "m8b-aggregated"
    assert [m["pods"]["metric"]["name"] for m in hpa.inputs["spec"]["metrics"]] == [
        "vllm_prompt_tokens_per_second", "vllm_num_requests_waiting", "vllm_kv_cache_usage_perc",
    ]
    assert outputs["m8b/aggregated.kind"] == "HorizontalPodAutoscaler"
    assert hpa.urn in named(records, "reads-m8b-aggregated").dependencies


def test_scale_to_zero_with_activation_and_a_wake_schedule() -> None:
    spec = small_spec(models=[model(autoscaling={"aggregated": {"min_replicas": 0, "wake_schedule": WAKE}})])
    records, _ = build(spec)
    so = one(records, SCALED_OBJECT).inputs["spec"]
    assert so["minReplicaCount"] == 0
    assert so["triggers"][1]["metadata"]["activationThreshold"] == "0"  # the queue-depth trigger wakes the role
    assert so["triggers"][-1]["type"] == "cron"


def test_emitted_autoscalers_are_the_builders_bodies() -> None:
    for spec in (pd_spec(), small_spec(models=[model(autoscaling={"backend": "hpa"})])):
        sizing = size_platform(spec)
        records, _ = build(spec)
        emitted = {r.inputs["metadata"]["name"]: ints(r.inputs) for r in records if r.type in (SCALED_OBJECT, HPA)}
        expected = {}
        for m in spec.models:
            for role in m.serving.roles:
                body = autoscaler_body(AutoscalerSettings.from_platform(spec, sizing, m.name, role))
                expected[body["metadata"]["name"]] = body
        assert emitted == expected


def test_namespace_and_prometheus_url_may_be_outputs() -> None:
    spec = small_spec()
    sizing = size_platform(spec)

    def program() -> None:
        ns = k8s.core.v1.Namespace("team-ns", metadata={"name": "team-llm"})
        prom = PrometheusStack("prom", PrometheusStackArgs())
        RoleAutoscaler("m8b", RoleAutoscalerArgs.from_platform(
            spec, sizing, "m8b", "aggregated", namespace=ns.metadata.name, prometheus_url=prom.prometheus_url))

    records = run(program)
    so = one(records, SCALED_OBJECT)
    assert so.inputs["metadata"]["namespace"] == "team-llm"
    trigger = so.inputs["spec"]["triggers"][0]["metadata"]
    assert 'namespace="team-llm"' in trigger["query"]
    assert trigger["serverAddress"] == "http://kube-prometheus-stack-prometheus.monitoring.svc:9090"
    assert {named(records, "team-ns").urn, named(records, "prom-chart").urn} <= set(so.dependencies)


def test_a_second_autoscaler_on_one_workload_is_refused() -> None:
    spec = small_spec()
    args = RoleAutoscalerArgs.from_platform(spec, size_platform(spec), "m8b", "aggregated",
                                            prometheus_url=spec.observability.prometheus_url)

    def twice() -> None:
        RoleAutoscaler("a", args)
        RoleAutoscaler("b", args)

    with pytest.raises(NameClash, match="one autoscaler per role workload"):
        run(twice)


# ---------------------------------------------------------------- guardrails


def refuse(raw: dict[str, Any]) -> str:
    with pytest.raises(StackConfigError) as info:
        validate_config(raw, "test")
    (problem,) = info.value.lines()
    return problem


def with_autoscaling(raw: dict[str, Any], **autoscaling: Any) -> dict[str, Any]:
    raw["models"][0]["autoscaling"] = {**raw["models"][0].get("autoscaling", {}), **autoscaling}
    return raw


def test_gpu_duty_cycle_metric_is_refused() -> None:
    msg = refuse(with_autoscaling(pd_raw(), prefill={"metric": "DCGM_FI_DEV_GPU_UTIL"}))
    assert msg.startswith("gpuscale:models[0].autoscaling.prefill.metric: DCGM_FI_DEV_GPU_UTIL")
    assert "duty cycle" in msg and "vllm:num_requests_waiting" in msg


def test_gpu_memory_metric_is_refused() -> None:
    msg = refuse(with_autoscaling(pd_raw(), decode={"metric": "DCGM_FI_DEV_FB_USED"}))
    assert msg.startswith("gpuscale:models[0].autoscaling.decode.metric:")
    assert "pre-allocates the KV cache" in msg and "vllm:kv_cache_usage_perc" in msg


def test_one_autoscaler_over_prefill_and_decode_is_refused() -> None:
    msg = refuse(with_autoscaling(pd_raw(), scope="whole_model"))
    assert msg.startswith("gpuscale:models[0].autoscaling.scope: autoscaling.scope: whole_model puts prefill and decode")


def test_deprecated_vllm_metric_is_refused() -> None:
    msg = refuse(with_autoscaling(pd_raw(), decode={"metric": "vllm:gpu_cache_usage_perc"}))
    assert "no longer exposes vllm:gpu_cache_usage_perc" in msg and "use vllm:kv_cache_usage_perc" in msg


def test_zero_warm_replicas_on_a_critical_slo_is_refused() -> None:
    msg = refuse(with_autoscaling(pd_raw(), decode={"min_replicas": 0}))
    assert msg.startswith("gpuscale:models[0].autoscaling.decode.min_replicas: autoscaling.decode.min_replicas: 0 on a "
                          "critical SLO")
    assert "cold start" in msg and "min_replicas >= 2" in msg
    # one warm replica: a drift or node loss is an outage
    assert "autoscaling.decode.min_replicas: 1 on a critical SLO" in refuse(with_autoscaling(pd_raw(), decode={"min_replicas": 1}))


def test_hpa_scale_to_zero_and_pausing_are_refused() -> None:
    msg = refuse(with_autoscaling(small_raw(), backend="hpa", aggregated={"min_replicas": 0, "wake_schedule": WAKE}))
    assert msg.startswith("gpuscale:models[0].autoscaling.aggregated.min_replicas: autoscaling.aggregated.min_replicas is "
                          "0 but an HPA cannot scale to zero")
    raw = small_raw(models=[model(criticality="best_effort", autoscaling={"backend": "hpa"})])
    assert "defaults to 0 for a best_effort SLO" in refuse(raw)
    assert "autoscaling.paused: true needs backend: keda" in refuse(with_autoscaling(small_raw(), backend="hpa", paused=True))
