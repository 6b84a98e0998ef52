"""The cold start stage by stage, the first answer from zero, the front door's numbers, and the refusal."""

from __future__ import annotations

import math
from typing import Any

import pytest

from gpuscale import sizing
from gpuscale.feasibility import checked_sizing
from gpuscale.first_answer import (
    HOLD_LIMIT_MAX_S,
    ColdStart,
    FirstAnswer,
    cold_start,
    fastest_cold_start,
    fastest_image_pull,
    first_answer,
    front_door_sizing,
    image_pull_s,
    registry_pull_s,
)
from gpuscale.problems import Problems
from gpuscale.spec.catalogue import CATALOGUE
from gpuscale.spec.cold_start import (
    ENGINE_START_ANCHORS,
    IMAGE_EXTRACT_GIB_S,
    VLLM_IMAGE_COMPRESSED_GB,
    VLLM_IMAGE_GIB,
    engine_start_s,
)
from gpuscale.spec.model import ModelDeployment
from gpuscale.spec.platform import PlatformSpec
from tests.specs import LLAMA_70B_FP8, model, small_raw, small_spec

G6E, P5 = CATALOGUE["g6e.xlarge"], CATALOGUE["p5.48xlarge"]


def zero(timeout: float = 600, **extra: Any) -> dict[str, Any]:
    slo = {"ttft_p99_s": 2.0, "itl_p99_s": 0.05, "request_timeout_s": timeout, "criticality": "best_effort"}
    return model(criticality="best_effort", slo=slo, **extra)


def sized_cold_start(spec: PlatformSpec, model: ModelDeployment) -> ColdStart:
    """The cold start sizing computed for ``model`` (one of the spec's, or a changed copy of one), as every reader gets it."""
    models = [model if m.name == model.name else m for m in spec.models]
    return sizing.size_platform(spec.model_copy(update={"models": models})).model(model.name).cold_start


def test_a_plain_pull_is_the_download_at_the_nodes_bandwidth_then_the_extraction() -> None:
    slow, fast = registry_pull_s(G6E), registry_pull_s(P5)
    assert slow - fast == pytest.approx(VLLM_IMAGE_COMPRESSED_GB * 8 * (1 / 2.5 - 1 / 5.0))  # 2.5 Gbit/s vs the registry cap
    assert fast == pytest.approx(VLLM_IMAGE_COMPRESSED_GB * 8 / 5.0 + VLLM_IMAGE_GIB / IMAGE_EXTRACT_GIB_S)
    assert 120 <= fast <= slow <= 240  # perf-model.md 4.2: 120-240 s on a fresh node


def test_each_image_pull_choice_is_faster_than_the_last() -> None:
    registry, soci, snapshot = (image_pull_s(m, G6E) for m in ("registry", "soci-parallel", "snapshot"))
    assert snapshot < soci < registry
    assert soci == pytest.approx(registry / 2, abs=0.1)
    assert image_pull_s("snapshot", G6E) == image_pull_s("snapshot", P5)  # the volume, not the network


def test_engine_start_grows_with_size_and_the_compile_cache_cuts_it() -> None:
    (small, cold_small, cached_small), (big, cold_big, cached_big) = ENGINE_START_ANCHORS
    assert engine_start_s(small, "cold") == cold_small and engine_start_s(small, "compile-cache") == cached_small
    assert engine_start_s(big, "compile-cache") == cached_big
    assert engine_start_s(1.0, "cold") == cold_small and engine_start_s(400.0, "cold") == cold_big  # clamped
    mid = engine_start_s((small + big) / 2, "cold")
    assert mid == pytest.approx((cold_small + cold_big) / 2, abs=0.1)
    for p in (8.03, 30.0, 70.55):
        assert engine_start_s(p, "compile-cache") < engine_start_s(p, "cold")


def test_cold_start_stages_follow_the_choices_and_measured_figures_win() -> None:
    spec = small_spec(models=[zero()])
    m, pool = spec.models[0], spec.topology.gpu_pools[0]
    c = cold_start(m, pool, spec.topology.provisioning, G6E, sizing.weights_gib(m))
    assert c.node_s == spec.topology.provisioning.node_ready_s[1] and c.gpu_ready_s == spec.topology.provisioning.gpu_ready_s
    assert c.image_pull_s == image_pull_s("registry", G6E) and c.image_pull == "registry"
    assert c.weights_s == round(sizing.weights_gib(m) / 3.5, 1) and c.weights_source == "s3-stream"
    assert c.engine_init_s == engine_start_s(m.architecture.params_b, "cold") and c.weights_cached_s is None
    assert c.total_s == pytest.approx(c.node_s + c.gpu_ready_s + c.image_pull_s + c.weights_s + c.engine_init_s)
    measured = spec.topology.provisioning.model_copy(update={"image_pull_s": 42.0, "engine_init_s": 7.0})
    c2 = cold_start(m, pool, measured, G6E, sizing.weights_gib(m))
    assert (c2.image_pull_s, c2.engine_init_s) == (42.0, 7.0)


def test_only_a_node_cache_of_downloaded_weights_reloads_locally() -> None:
    hub = zero(weights={"uri": "hf://meta-llama/Llama-3.1-8B-Instruct"})
    cached = small_spec(models=[{**hub, "cold_start": {"weights_cache": "node-nvme"}}])
    plain = small_spec(models=[hub])
    c_cached, c_plain = (sized_cold_start(s, s.models[0]) for s in (cached, plain))
    assert c_plain.weights_cached_s is None and c_cached.weights_source == "hub-download"
    assert c_cached.weights_cached_s is not None and c_cached.weights_cached_s < c_cached.weights_s
    assert c_cached.total_s == c_plain.total_s  # a fresh node downloads either way: the first answer is the same


def test_the_first_answer_adds_detection_and_the_ttft_target_and_names_the_stage_to_speed_up() -> None:
    spec = small_spec(models=[zero()])
    ms = sizing.size_platform(spec).model("m8b")
    assert ms.front_door is not None
    fa = ms.front_door.first_answer
    assert fa.detection_s == 2 * spec.models[0].front_door.poll_s
    assert fa.total_s == pytest.approx(fa.detection_s + ms.cold_start.total_s + 2.0, abs=0.1)
    assert fa.meets_timeout and fa.request_timeout_s == 600
    # the image pull is the longest stage and has a faster choice on AL2023
    assert fa.slowest_stage == "image_pull" and "soci-parallel" in fa.speed_up


def test_the_stage_to_speed_up_is_the_longest_one_with_a_faster_choice() -> None:
    raw = small_raw(models=[zero()])
    raw["topology"]["gpu_pools"][0].update({"image_pull": "snapshot", "ami_alias": "bottlerocket@v1.44.0",
                                            "image_snapshot_id": "snap-0123456789abcdef0"})
    spec = PlatformSpec.model_validate(raw)
    m, pool = spec.models[0], spec.topology.gpu_pools[0]
    c = sized_cold_start(spec, m)
    fa = first_answer(m, pool, spec.topology.provisioning, c)
    # node provisioning is longest but already Karpenter; the snapshot leaves no faster pull: the engine is next
    assert c.node_s > c.engine_init_s > c.image_pull_s
    assert fa.slowest_stage == "engine_start" and "compile-cache" in fa.speed_up
    cached = m.model_copy(update={"cold_start": m.cold_start.model_copy(update={"engine_start": "compile-cache"})})
    fa2 = first_answer(cached, pool, spec.topology.provisioning, sized_cold_start(spec, cached))
    assert fa2.slowest_stage == "detection" and "poll_s" in fa2.speed_up  # what is left: a faster poll of the door
    fastest = cached.model_copy(update={"front_door": cached.front_door.model_copy(update={"poll_s": 1})})
    fa3 = first_answer(fastest, pool, spec.topology.provisioning, sized_cold_start(spec, fastest))
    assert fa3.speed_up == "every stage already has its fastest choice" and fa3.slowest_stage == "node"


def test_front_door_numbers_come_from_the_timeout_the_wake_and_the_replica_rate() -> None:
    spec = small_spec(models=[zero()])
    ms = sizing.size_platform(spec).model("m8b")
    door = ms.front_door
    assert door is not None
    m = spec.models[0]
    rate = 1.0 / ms.role("aggregated").replicas_per_rps
    wake = door.first_answer.detection_s + door.first_answer.cold_start_s
    assert door.hold_limit_s == math.floor(600 - 2.0)
    assert door.per_replica == math.ceil(rate * wake)
    assert door.queue_bound == math.floor((door.hold_limit_s - wake) * rate)
    assert door.retry_after_s == math.ceil(wake)
    assert (door.poll_s, door.idle_window_s) == (m.front_door.poll_s, m.front_door.idle_window_s)
    # a longer timeout leaves the backlog more time: a larger bound, the same trigger target
    longer = sizing.size_platform(small_spec(models=[zero(timeout=1200)])).model("m8b").front_door
    assert longer is not None and longer.queue_bound > door.queue_bound and longer.per_replica == door.per_replica
    direct = front_door_sizing(m, door.first_answer, rate)
    assert direct == door


def test_roles_behind_a_door_poll_it_fast_and_sleep_after_its_idle_window() -> None:
    spec = small_spec(models=[zero(front_door={"poll_s": 3, "idle_window_s": 1200})])
    role = sizing.size_platform(spec).model("m8b").role("aggregated")
    assert (role.polling_interval_s, role.cooldown_s, role.min_replicas) == (3, 1200, 0)


def test_scale_to_zero_is_refused_when_the_first_answer_misses_the_timeout() -> None:
    with pytest.raises(Problems) as info:
        checked_sizing(small_spec(models=[zero(timeout=60)]))
    (problem,) = info.value.problems
    assert problem.path == "models[0].autoscaling.aggregated.min_replicas"
    assert "first answer from zero takes" in problem.message and "Speed up the image pull" in problem.message
    assert "soci-parallel" in problem.message and "min_replicas: 1" in problem.message
    # a warm replica needs no first answer from zero, the same timeout is fine
    checked_sizing(small_spec(models=[model(slo={"ttft_p99_s": 2.0, "itl_p99_s": 0.05, "request_timeout_s": 60})]))


def test_a_cold_start_longer_than_envoy_lets_the_door_hold_is_refused_whatever_the_timeout() -> None:
    """A day's request timeout does not help: the door ends every hold by HOLD_LIMIT_MAX_S (Envoy's ext_proc
    message_timeout is at most 3600 s), so a wake longer than that answers the first requests 503."""
    slow = small_raw(models=[zero(timeout=86_400)])
    slow["topology"]["provisioning"] = {"image_pull_s": 3600}
    slow["topology"]["gpu_pools"][0]["consolidate_after"] = "2h"  # longer than the cold start, as checks require
    with pytest.raises(Problems) as info:
        checked_sizing(PlatformSpec.model_validate(slow))
    (problem,) = info.value.problems
    assert f"holds a request at most {HOLD_LIMIT_MAX_S} s" in problem.message and "3600 s" in problem.message
    assert "raise slo.request_timeout_s" not in problem.message  # raising it cannot help
    day_long = small_spec(models=[zero(timeout=86_400)]).models[0]
    door = front_door_sizing(day_long, first_answer_of_dev(), 1.0)
    assert door.hold_limit_s == HOLD_LIMIT_MAX_S == 3570


def first_answer_of_dev() -> FirstAnswer:
    spec = small_spec(models=[zero()])
    fa = sizing.size_platform(spec).model("m8b").front_door
    assert fa is not None
    return fa.first_answer


def test_the_fastest_cold_start_takes_the_best_choice_the_ami_family_allows() -> None:
    spec = small_spec(models=[zero()])
    m, pool, prov = spec.models[0], spec.topology.gpu_pools[0], spec.topology.provisioning
    gib = sizing.weights_gib(m)
    assert fastest_image_pull(pool) == "soci-parallel"
    assert fastest_image_pull(pool.model_copy(update={"ami_alias": "bottlerocket@v1.44.0"})) == "snapshot"
    assert fastest_image_pull(pool.model_copy(update={"ami_alias": "al2023@v20250101"})) == "registry"
    today, fast = cold_start(m, pool, prov, G6E, gib), fastest_cold_start(m, pool, prov, G6E, gib)
    assert (fast.image_pull, fast.engine_start) == ("soci-parallel", "compile-cache")
    assert fast.total_s < today.total_s and fast.node_s == today.node_s and fast.weights_s == today.weights_s
    # a measured pull of the plain registry no longer applies once the choice changes
    measured = prov.model_copy(update={"image_pull_s": 500.0})
    assert fastest_cold_start(m, pool, measured, G6E, gib).image_pull_s == image_pull_s("soci-parallel", G6E)


def test_a_70b_engine_start_is_four_times_an_8b_one() -> None:
    from tests.specs import pd_raw

    raw = pd_raw()
    raw["models"][0] = model("m70b", arch=LLAMA_70B_FP8, queue="chat", pool="h100", criticality="best_effort",
                             slo={"ttft_p99_s": 2.0, "itl_p99_s": 0.05, "request_timeout_s": 900, "criticality": "best_effort"})
    spec = PlatformSpec.model_validate(raw)
    c = sized_cold_start(spec, spec.models[0])
    small = sized_cold_start(small_spec(), small_spec().models[0])
    assert c.engine_init_s == engine_start_s(70.55, "cold") > c.weights_s
    assert 3.5 < c.engine_init_s / small.engine_init_s < 4  # perf-model.md 4.3: ~40 s for 8B, ~150 s for 70B, cold
