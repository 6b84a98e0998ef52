"""The front door and the cold-start choices as the stack file states them: when the door is there, what is refused."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from gpuscale.spec.cold_start import ModelColdStartSpec
from gpuscale.spec.platform import PlatformSpec
from gpuscale.stackfile import format_errors
from tests.specs import model, small_raw, small_spec

WAKE = {"start": "0 8 * * 1-5", "end": "0 19 * * 1-5"}


def best_effort(**extra: Any) -> dict[str, Any]:
    return model(criticality="best_effort", **extra)


def paths(exc: ValidationError) -> list[str]:
    """The YAML paths the user is shown."""
    return [p.path for p in format_errors(exc)]


def test_the_door_stands_before_a_model_that_may_scale_to_zero_only() -> None:
    standard, zero = small_spec().models[0], small_spec(models=[best_effort()]).models[0]
    assert not standard.has_front_door and zero.has_front_door and zero.may_scale_to_zero
    explicit_zero = small_spec(models=[model(autoscaling={"aggregated": {"min_replicas": 0}})]).models[0]
    assert explicit_zero.has_front_door
    # set: before a warm model too, or away, then a schedule must wake the model
    assert small_spec(models=[model(front_door={"enabled": True})]).models[0].has_front_door
    cron = small_spec(models=[best_effort(front_door={"enabled": False}, autoscaling={"aggregated": {"wake_schedule": WAKE}})])
    assert not cron.models[0].has_front_door


def test_zero_without_door_or_schedule_is_refused_naming_both_ways_out() -> None:
    with pytest.raises(ValidationError) as info:
        small_spec(models=[best_effort(front_door={"enabled": False})])
    assert paths(info.value) == ["models[0].autoscaling.aggregated.min_replicas"]
    text = str(info.value)
    assert "front_door.enabled: false" in text and "wake_schedule" in text and "min_replicas: 1" in text


def test_a_critical_slo_still_refuses_zero_behind_a_door() -> None:
    with pytest.raises(ValidationError) as info:
        small_spec(models=[model(criticality="critical", front_door={"enabled": True},
                                 autoscaling={"aggregated": {"min_replicas": 0}})])
    assert "models[0].autoscaling.aggregated.min_replicas" in paths(info.value)


def test_the_door_needs_keda_and_owns_the_idle_window() -> None:
    with pytest.raises(ValidationError) as hpa:
        small_spec(models=[model(front_door={"enabled": True}, autoscaling={"backend": "hpa"})])
    assert paths(hpa.value) == ["models[0].front_door.enabled"]
    with pytest.raises(ValidationError) as cool:
        small_spec(models=[best_effort(autoscaling={"aggregated": {"cooldown_s": 60}})])
    assert paths(cool.value) == ["models[0].autoscaling.aggregated.cooldown_s"]
    assert "front_door.idle_window_s" in str(cool.value)
    # the same number is no conflict, and no door leaves cooldown_s to the role
    small_spec(models=[best_effort(autoscaling={"aggregated": {"cooldown_s": 900}})])
    small_spec(models=[model(autoscaling={"aggregated": {"cooldown_s": 60}})])
    with pytest.raises(ValidationError):
        small_spec(models=[best_effort(front_door={"idle_window_s": 30})])  # below a minute


def test_compile_cache_needs_its_claim_and_the_claim_needs_the_cache() -> None:
    ModelColdStartSpec(engine_start="compile-cache", compile_cache_claim="vllm-cache")
    for bad, field in (({"engine_start": "compile-cache"}, "compile_cache_claim"),
                       ({"compile_cache_claim": "vllm-cache"}, "compile_cache_claim"),
                       ({"engine_start": "compile-cache", "compile_cache_claim": "Not_A_Claim"}, "compile_cache_claim")):
        with pytest.raises(ValidationError) as info:
            ModelColdStartSpec.model_validate(bad)
        assert paths(info.value) == [field], bad


def test_a_node_cache_needs_downloaded_weights_on_an_al2023_nvme_pool() -> None:
    hub = {"uri": "hf://meta-llama/Llama-3.1-8B-Instruct"}
    small_spec(models=[model(weights=hub, cold_start={"weights_cache": "node-nvme"})])  # g6e: NVMe, AL2023
    with pytest.raises(ValidationError) as s3:
        small_spec(models=[model(cold_start={"weights_cache": "node-nvme"})])  # s3:// streams to the GPU
    assert paths(s3.value) == ["models[0].cold_start.weights_cache"]
    raw = small_raw(models=[model(weights=hub, cold_start={"weights_cache": "node-nvme"})])
    raw["topology"]["gpu_pools"][0]["ami_alias"] = "bottlerocket@v1.44.0"
    with pytest.raises(ValidationError) as br:
        PlatformSpec.model_validate(raw)
    assert paths(br.value) == ["models[0].cold_start.weights_cache"] and "AL2023" in str(br.value)


@pytest.mark.parametrize(("pool", "field", "says"), [
    ({"image_pull": "snapshot"}, "image_pull", "Bottlerocket"),
    ({"image_pull": "snapshot", "ami_alias": "bottlerocket@v1.44.0"}, "image_snapshot_id", "snap-"),
    ({"image_pull": "snapshot", "ami_alias": "bottlerocket@v1.44.0", "image_snapshot_id": "snap-12"}, "image_snapshot_id", "hex"),
    ({"image_snapshot_id": "snap-0123456789abcdef0"}, "image_snapshot_id", "only used with image_pull: snapshot"),
    ({"image_pull": "soci-parallel", "ami_alias": "bottlerocket@v1.44.0"}, "image_pull", "FastImagePull"),
    ({"image_pull": "soci-parallel", "ami_alias": "al2023@v20250701"}, "image_pull", "v20250813"),
])
def test_image_pull_choices_fit_the_ami_family(pool: dict[str, Any], field: str, says: str) -> None:
    raw = small_raw()
    raw["topology"]["gpu_pools"][0].update(pool)
    with pytest.raises(ValidationError) as info:
        PlatformSpec.model_validate(raw)
    assert paths(info.value) == [f"topology.gpu_pools[0].{field}"] and says in str(info.value)


def test_image_pull_choices_that_fit() -> None:
    for pool in ({"image_pull": "soci-parallel", "ami_alias": "al2023@v20250813"},
                 {"image_pull": "soci-parallel", "ami_alias": "al2023@latest"},
                 {"image_pull": "snapshot", "ami_alias": "bottlerocket@v1.44.0", "image_snapshot_id": "snap-0123456789abcdef0"}):
        raw = small_raw()
        raw["topology"]["gpu_pools"][0].update(pool)
        assert PlatformSpec.model_validate(raw).topology.gpu_pools[0].image_pull == pool["image_pull"]

