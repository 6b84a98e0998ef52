"""RoleAutoscaler under Pulumi mocks, and the spec guardrails that keep autoscalers on the right signal."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gpuscale.components.role_autoscaler import RoleAutoscaler, RoleAutoscalerArgs
from gpuscale.components.vllm_service import VllmService, VllmServiceArgs
from gpuscale.manifests.autoscaling import autoscaler_body
from gpuscale.sizing import size_platform
from gpuscale.spec.platform import PlatformSpec
from gpuscale.stackfile import StackConfigError, validate_config
from gpuscale.synth.mocks import RecordedResource
from tests.conftest import STACKS

Run = Callable[..., list[RecordedResource]]
SCALED_OBJECT = "kubernetes:keda.sh/v1alpha1:ScaledObject"
HPA = "kubernetes:autoscaling/v2:HorizontalPodAutoscaler"


def build(run_pulumi: Run, spec: PlatformSpec) -> tuple[list[RecordedResource], dict[str, Any]]:
    sizing = size_platform(spec)
    outputs: dict[str, Any] = {}

    def program() -> None:
        for m in spec.models:
            svc = VllmService(m.name, VllmServiceArgs.from_platform(spec, sizing, m.name))
            for role in m.serving.roles:
                a = RoleAutoscaler(
                    f"{m.name}-{role}", RoleAutoscalerArgs.from_platform(spec, sizing, m.name, role),
                    depends_on=[svc.workloads[role]],
                )
                a.autoscaler_name.apply(lambda v, k=f"{m.name}/{role}": outputs.__setitem__(k, v))
                a.autoscaler_kind.apply(lambda v, k=f"{m.name}/{role}.kind": outputs.__setitem__(k, v))

    return run_pulumi(program), outputs


def test_prod_has_one_scaled_object_per_role(run_pulumi: Run, prod_spec: PlatformSpec) -> None:
    records, outputs = build(run_pulumi, prod_spec)
    objs = {r.name: r for r in records if r.type == SCALED_OBJECT}
    assert set(objs) == {
        "llama-70b-fp8-prefill-scaledobject", "llama-70b-fp8-decode-scaledobject", "search-8b-aggregated-scaledobject",
    }
    assert not [r for r in records if r.type == HPA]
    workloads = {r.name: r for r in records if r.type == "kubernetes:apps/v1:Deployment"}
    targets = set()
    for name, so in objs.items():
        role = name.removesuffix("-scaledobject").rsplit("-", 1)[1]
        target = so.inputs["spec"]["scaleTargetRef"]["name"]
        targets.add(target)
        assert target.endswith(f"-{role}")
        assert workloads[target].urn in so.dependencies  # the workload exists before its autoscaler
        for trigger in so.inputs["spec"]["triggers"]:
            assert f'gpuscale_io_role="{role}"' in trigger["metadata"]["query"]
            assert "DCGM" not in trigger["metadata"]["query"]
        parent = next(r for r in records if r.urn == so.parent_urn)
        assert parent.type == "gpuscale:index:RoleAutoscaler"
    assert len(targets) == 3  # no workload has two autoscalers, no autoscaler spans two workloads
    prefill = objs["llama-70b-fp8-prefill-scaledobject"].inputs["spec"]
    decode = objs["llama-70b-fp8-decode-scaledobject"].inputs["spec"]
    assert [t["name"] for t in prefill["triggers"]] == ["prompt-tokens-total", "num-requests-waiting"]
    assert "rate(vllm:prompt_tokens_total{" in prefill["triggers"][0]["metadata"]["query"]
    assert "vllm:num_requests_waiting" in prefill["triggers"][1]["metadata"]["query"]
    assert "vllm:kv_cache_usage_perc" in decode["triggers"][0]["metadata"]["query"]
    kv_target = size_platform(prod_spec).model("llama-70b-fp8").role("decode").signals[0].target
    assert decode["triggers"][0]["metadata"]["threshold"] == f"{kv_target:g}"  # the KV of the batch that meets ITL
    assert prefill["minReplicaCount"] >= 1 and decode["minReplicaCount"] >= 1
    assert outputs["llama-70b-fp8/decode"] == "llama-70b-fp8-decode"
    assert outputs["llama-70b-fp8/decode.kind"] == "ScaledObject"


def test_staging_uses_the_hpa_backend(run_pulumi: Run, stack_specs: dict[str, PlatformSpec]) -> None:
    records, outputs = build(run_pulumi, stack_specs["staging"])
    (hpa,) = [r for r in records if r.type == HPA]
    assert not [r for r in records if r.type == SCALED_OBJECT]
    assert hpa.name == "llama-70b-aggregated-hpa"
    assert hpa.inputs["spec"]["scaleTargetRef"]["name"] == "llama-70b-aggregated"
    assert [m["pods"]["metric"]["name"] for m in hpa.inputs["spec"]["metrics"]] == [
        "vllm_prompt_tokens_per_second", "vllm_num_requests_waiting", "vllm_kv_cache_usage_perc",
    ]
    assert outputs["llama-70b/aggregated.kind"] == "HorizontalPodAutoscaler"


def test_dev_scales_to_zero_with_activation(run_pulumi: Run, dev_spec: PlatformSpec) -> None:
    records, _ = build(run_pulumi, dev_spec)
    (so,) = [r for r in records if r.type == SCALED_OBJECT]
    assert so.inputs["spec"]["minReplicaCount"] == 0
    assert so.inputs["spec"]["triggers"][0]["metadata"]["activationThreshold"] == "0"


@pytest.mark.parametrize("stack", STACKS)
def test_emitted_autoscalers_are_the_schema_checked_bodies(
    run_pulumi: Run, stack_specs: dict[str, PlatformSpec], stack: str,
) -> None:
    """The component applies exactly the builder's body, which test_autoscaling holds to the KEDA CRD and the
    autoscaling/v2 schema for every stack (validating here again would only repeat the slow schema load)."""
    spec = stack_specs[stack]
    sizing = size_platform(spec)
    records, _ = build(run_pulumi, spec)
    emitted = {r.inputs["metadata"]["name"]: _ints(r.inputs) for r in records if r.type in (SCALED_OBJECT, HPA)}
    expected = {}
    for m in spec.models:
        for role in m.serving.roles:
            body = autoscaler_body(RoleAutoscalerArgs.from_platform(spec, sizing, m.name, role))
            expected[body["metadata"]["name"]] = body
    assert emitted == expected


def _ints(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_ints(v) for v in value]
    return int(value) if isinstance(value, float) and value.is_integer() else value


# ---------------------------------------------------------------- guardrails (issue 5, section 3)


def refuse(raw: dict[str, Any]) -> str:
    with pytest.raises(StackConfigError) as info:
        validate_config(raw, "test")
    (problem,) = info.value.lines()
    return problem


def test_gpu_duty_cycle_metric_is_refused(raw_stack: Callable[[str], dict[str, Any]]) -> None:
    raw = raw_stack("prod")
    raw["models"][0]["autoscaling"]["prefill"]["metric"] = "DCGM_FI_DEV_GPU_UTIL"
    msg = refuse(raw)
    assert msg.startswith("gpuscale:models[0].autoscaling.prefill.metric: DCGM_FI_DEV_GPU_UTIL")
    assert "duty cycle" in msg and "vllm:num_requests_waiting" in msg


def test_gpu_memory_metric_is_refused(raw_stack: Callable[[str], dict[str, Any]]) -> None:
    raw = raw_stack("prod")
    raw["models"][0]["autoscaling"]["decode"]["metric"] = "DCGM_FI_DEV_FB_USED"
    msg = refuse(raw)
    assert msg.startswith("gpuscale:models[0].autoscaling.decode.metric:")
    assert "pre-allocates the KV cache" in msg and "vllm:kv_cache_usage_perc" in msg


def test_one_autoscaler_over_prefill_and_decode_is_refused(raw_stack: Callable[[str], dict[str, Any]]) -> None:
    raw = raw_stack("prod")
    raw["models"][0]["autoscaling"]["scope"] = "whole_model"
    msg = refuse(raw)
    assert msg.startswith("gpuscale:models[0].autoscaling.scope: autoscaling.scope: whole_model puts prefill and decode behind one")
    assert "Use scope: per_role" in msg


def test_deprecated_vllm_metric_is_refused(raw_stack: Callable[[str], dict[str, Any]]) -> None:
    raw = raw_stack("prod")
    raw["models"][0]["autoscaling"]["decode"]["metric"] = "vllm:gpu_cache_usage_perc"
    msg = refuse(raw)
    assert "vllm:gpu_cache_usage_perc is not exposed by the pinned vLLM v0.33.0" in msg
    assert "use vllm:kv_cache_usage_perc" in msg


def test_zero_warm_replicas_on_a_critical_slo_is_refused(raw_stack: Callable[[str], dict[str, Any]]) -> None:
    raw = raw_stack("prod")
    raw["models"][0]["autoscaling"]["decode"]["min_replicas"] = 0
    msg = refuse(raw)
    assert msg.startswith("gpuscale:models[0].autoscaling.decode.min_replicas: autoscaling.decode.min_replicas: 0 on a critical SLO")
    assert "cold start" in msg and "min_replicas >= 2" in msg
    raw["models"][0]["autoscaling"]["decode"]["min_replicas"] = 1  # one warm replica: a drift or node loss is an outage
    assert "autoscaling.decode.min_replicas: 1 on a critical SLO" in refuse(raw)


def test_hpa_scale_to_zero_is_refused(raw_stack: Callable[[str], dict[str, Any]]) -> None:
    raw = raw_stack("dev")
    raw["models"][0]["autoscaling"]["backend"] = "hpa"  # dev keeps min_replicas: 0
    msg = refuse(raw)
    assert msg.startswith("gpuscale:models[0].autoscaling.aggregated.min_replicas: autoscaling.aggregated.min_replicas is 0 but backend: hpa cannot scale")
    assert "HPAScaleToZero" in msg and "backend: keda" in msg
    raw["models"][0]["autoscaling"] = {"backend": "hpa"}  # best_effort: min defaults to 0
    assert "defaults to 0 for a best_effort SLO" in refuse(raw)


def test_pausing_an_hpa_is_refused(raw_stack: Callable[[str], dict[str, Any]]) -> None:
    raw = raw_stack("staging")
    raw["models"][0]["autoscaling"]["paused"] = True
    msg = refuse(raw)
    assert "autoscaling.paused: true needs backend: keda" in msg


def test_guardrails_leave_the_stacks_alone(stack_specs: dict[str, PlatformSpec]) -> None:
    assert {m.autoscaling.backend for s in stack_specs.values() for m in s.models} == {"keda", "hpa"}
