"""Spec validation: each guardrail refuses with a message naming the trap, the path and the fix."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpuscale.spec.platform import PlatformSpec
from gpuscale.stackfile import StackConfigError, validate_config


def refuse(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(StackConfigError) as info:
        validate_config(raw, "test")
    return info.value.lines()


@pytest.mark.parametrize("name", ["dev", "staging", "prod"])
def test_stacks_are_valid(stack_specs: dict[str, PlatformSpec], name: str) -> None:
    spec = stack_specs[name]
    assert spec.environment.name == name
    assert spec.models and spec.topology.gpu_pools


def test_stacks_are_different_platforms(stack_specs: dict[str, PlatformSpec]) -> None:
    dev, prod = stack_specs["dev"], stack_specs["prod"]
    assert dev.topology.gpu_pools[0].capacity_types[0] == "spot"
    assert prod.models[0].serving.mode == "disaggregated"
    assert prod.models[0].architecture.weight_precision == "fp8"
    assert prod.models[0].slo.criticality == "critical"
    assert len(prod.leaf_queue_names()) >= 2
    assert prod.topology.gpu_pools[0].instance_types == ["p5.48xlarge"]


def test_spec_is_frozen(prod_spec: PlatformSpec) -> None:
    with pytest.raises(Exception, match="frozen"):
        prod_spec.environment.name = "x"  # type: ignore[misc]


def test_underutilized_consolidation_on_gpu_pool_is_refused(raw_stack) -> None:  # type: ignore[no-untyped-def]
    raw = raw_stack("prod")
    raw["topology"]["gpu_pools"][0]["consolidation_policy"] = "WhenEmptyOrUnderutilized"
    (msg,) = refuse(raw)
    assert msg.startswith("gpuscale:topology.gpu_pools[0].consolidation_policy: GPU pool h100: consolidation_policy "
                          "WhenEmptyOrUnderutilized lets Karpenter evict in-flight inference")
    # prod's consolidate_after (1h) already keeps the floor: the fix is the policy alone
    assert "minutes). Use WhenEmpty, or set acknowledge_underutilized_consolidation_evicts_inference" in msg
    assert "acknowledge_underutilized_consolidation_evicts_inference" in msg


def test_acknowledged_underutilized_consolidation_is_accepted(raw_stack) -> None:  # type: ignore[no-untyped-def]
    raw = raw_stack("prod")
    pool = raw["topology"]["gpu_pools"][0]
    pool["consolidation_policy"] = "WhenEmptyOrUnderutilized"
    pool["acknowledge_underutilized_consolidation_evicts_inference"] = True
    spec = validate_config(raw, "test")
    assert spec.topology.gpu_pools[0].consolidation_policy == "WhenEmptyOrUnderutilized"


def test_consolidate_after_shorter_than_cold_start_is_refused(raw_stack) -> None:  # type: ignore[no-untyped-def]
    raw = raw_stack("prod")
    raw["topology"]["gpu_pools"][0]["consolidate_after"] = "2m"
    (msg,) = refuse(raw)  # the spec's floor: the hour (prod's cold starts are shorter)
    assert msg.startswith("gpuscale:topology.gpu_pools[0].consolidate_after: GPU pool h100: consolidate_after 2m is "
                          "shorter than 1h")
    # a cold start above the hour raises the floor to it: refused by the feasibility checks with the model's name
    raw["topology"]["gpu_pools"][0]["consolidate_after"] = "1h"
    raw["topology"]["provisioning"] = {**raw["topology"].get("provisioning", {}), "image_pull_s": 4000}
    problems = refuse(raw)
    assert any(p.startswith("gpuscale:topology.gpu_pools[0].consolidate_after: GPU pool h100: consolidate_after 1h is "
                            "shorter than the cold start of llama-70b-fp8 (") and "consolidate_after: 7" in p
               for p in problems), problems


def test_tensor_parallel_wider_than_nvlink_domain_is_refused(raw_stack) -> None:  # type: ignore[no-untyped-def]
    raw = raw_stack("prod")
    raw["topology"]["gpu_pools"][1]["instance_types"] = ["g6e.12xlarge"]
    raw["models"][1]["parallelism"] = {"tensor_parallel_size": 4}
    (msg,) = refuse(raw)
    assert msg.startswith("gpuscale:models[1].parallelism.tensor_parallel_size: TP group of 4 GPUs is wider than one NVLink domain")
    assert "allow_tensor_parallel_over_pcie" in msg
    raw["models"][1]["parallelism"]["allow_tensor_parallel_over_pcie"] = True
    assert validate_config(raw, "test").models[1].parallelism.tensor_parallel_size == 4


def test_model_in_non_leaf_queue_is_refused(raw_stack) -> None:  # type: ignore[no-untyped-def]
    raw = raw_stack("prod")
    raw["models"][0]["queue"] = "inference"
    (msg,) = refuse(raw)
    assert msg.startswith("gpuscale:models[0].queue: queue 'inference' has children (chat, search)")
    assert "leaf" in msg


def test_children_quota_above_parent_limit_is_refused(raw_stack) -> None:  # type: ignore[no-untyped-def]
    raw = raw_stack("prod")
    raw["teams"][0]["gpu_quota"] = raw["teams"][0]["gpu_limit"] = 40
    problems = refuse(raw)
    assert any("queue inference: children's GPU quotas (chat 40 + search 12 = 52) exceed its gpu_limit (40)" in p for p in problems)


def test_quota_beyond_node_pools_is_refused(raw_stack) -> None:  # type: ignore[no-untyped-def]
    raw = raw_stack("prod")
    raw["teams"][1]["gpu_quota"] = 40
    raw["teams"][1]["children"][0]["gpu_quota"] = 40
    problems = refuse(raw)
    assert any("inference 52 + research 40 = 92) exceed the GPU node pools' limits (h100 64 + l40s 16 = 80)" in p for p in problems)


def test_warm_minimum_must_fit_inference_quota(raw_stack) -> None:  # type: ignore[no-untyped-def]
    raw = raw_stack("prod")
    raw["models"][0]["autoscaling"]["prefill"]["min_replicas"] = 10
    problems = refuse(raw)
    # 10 prefill + 2 decode warm replicas of 4 GPUs: 48 GPUs against chat's quota of 40
    assert any("warm minimum replicas need llama-70b-fp8/prefill 40 + llama-70b-fp8/decode 8 = 48 GPUs, above queue chat "
               "gpu_quota 40" in p for p in problems)


@pytest.mark.parametrize(
    ("metric", "trap"),
    [
        ("DCGM_FI_DEV_GPU_UTIL", "duty cycle"),
        ("DCGM_FI_DEV_FB_USED", "pre-allocates the KV cache"),
        ("vllm:gpu_cache_usage_perc", "no longer exposes vllm:gpu_cache_usage_perc"),
        ("vllm:whatever", "not a known vLLM gauge"),
    ],
)
def test_autoscaler_metric_guardrails(raw_stack, metric: str, trap: str) -> None:  # type: ignore[no-untyped-def]
    raw = raw_stack("prod")
    raw["models"][0]["autoscaling"]["decode"]["metric"] = metric
    (msg,) = refuse(raw)
    assert msg.startswith("gpuscale:models[0].autoscaling.decode.metric: ")
    assert trap in msg


def test_one_autoscaler_over_prefill_and_decode_is_refused(raw_stack) -> None:  # type: ignore[no-untyped-def]
    raw = raw_stack("prod")
    raw["models"][0]["autoscaling"]["scope"] = "whole_model"
    (msg,) = refuse(raw)
    assert "gpuscale:models[0].autoscaling.scope: autoscaling.scope: whole_model puts prefill and decode behind one autoscaler" in msg


def test_zero_warm_replicas_on_critical_slo_is_refused(raw_stack) -> None:  # type: ignore[no-untyped-def]
    raw = raw_stack("prod")
    raw["models"][0]["autoscaling"]["prefill"]["min_replicas"] = 0
    (msg,) = refuse(raw)
    assert "autoscaling.prefill.min_replicas: 0 on a critical SLO" in msg


def test_inline_secret_is_refused(raw_stack) -> None:  # type: ignore[no-untyped-def]
    raw = raw_stack("dev")
    raw["models"][0]["weights"]["hf_token"] = "hf_abc"
    (msg,) = refuse(raw)
    assert msg.startswith("gpuscale:models[0].weights.hf_token: 'hf_token' looks like an inline secret")


def test_latest_ami_is_refused_in_prod_only(raw_stack) -> None:  # type: ignore[no-untyped-def]
    raw = raw_stack("prod")
    raw["topology"]["gpu_pools"][0]["ami_alias"] = "al2023@latest"
    (msg,) = refuse(raw)
    assert msg.startswith("gpuscale:topology.gpu_pools[0].ami_alias: al2023@latest in production drifts every node")
    dev = raw_stack("dev")
    dev["topology"]["gpu_pools"][0]["ami_alias"] = "al2023@latest"
    assert validate_config(dev, "test").topology.gpu_pools[0].ami_alias == "al2023@latest"


def test_unknown_key_names_the_valid_keys(raw_stack) -> None:  # type: ignore[no-untyped-def]
    raw = raw_stack("prod")
    raw["models"][0]["slo"]["ttft_p95_s"] = 1
    (msg,) = refuse(raw)
    assert msg.startswith("gpuscale:models[0].slo.ttft_p95_s: unknown key 'ttft_p95_s' (did you mean 'ttft_p99_s'?); valid keys here: ttft_p99_s, itl_p99_s")


def test_unknown_key_under_union_names_the_valid_keys(raw_stack) -> None:  # type: ignore[no-untyped-def]
    raw = raw_stack("prod")
    raw["environment"]["networking"]["vpc_cdir"] = "10.0.0.0/16"
    problems = refuse(raw)
    assert "gpuscale:environment.networking.vpc_cdir: unknown key 'vpc_cdir' (did you mean 'vpc_cidr'?); valid keys here: vpc_cidr" in problems


def test_negative_quantity_and_wrong_type(raw_stack) -> None:  # type: ignore[no-untyped-def]
    raw = raw_stack("prod")
    raw["models"][0]["slo"]["ttft_p99_s"] = -1
    raw["topology"]["gpu_pools"][0]["gpu_limit"] = "lots"
    problems = refuse(raw)
    assert "gpuscale:models[0].slo.ttft_p99_s: Input should be greater than 0, got -1" in problems
    assert "gpuscale:topology.gpu_pools[0].gpu_limit: Input should be a valid integer, got 'lots'" in problems


def test_all_problems_reported_at_once(raw_stack) -> None:  # type: ignore[no-untyped-def]
    raw = copy.deepcopy(raw_stack("prod"))
    raw["models"][0]["slo"]["itl_p99_s"] = 0
    raw["models"][1]["workload"]["peak_rps"] = -3
    assert len(refuse(raw)) == 2


def test_missing_section(raw_stack) -> None:  # type: ignore[no-untyped-def]
    raw = raw_stack("prod")
    del raw["teams"]
    assert refuse(raw) == ["gpuscale:teams: required key is missing"]


def test_the_stage_tag_is_gpuscales(raw_stack) -> None:  # type: ignore[no-untyped-def]
    """gpuscale writes environment.stage as the gpuscale.io/stage tag the policy pack reads; a stack may not set it."""
    raw = raw_stack("dev")
    raw["environment"]["tags"] = {"gpuscale.io/stage": "prod"}
    (msg,) = refuse(raw)
    assert msg.startswith("gpuscale:environment.tags:") and "'gpuscale.io/stage' is set by gpuscale" in msg
