"""Queue-tree and gang cross-checks: each refusal names the queues involved and the numbers."""

from __future__ import annotations

from typing import Any

import pytest

from gpuscale.stackfile import StackConfigError, validate_config
from tests.manifests.test_kai_wiring import gang_raw


def refuse(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(StackConfigError) as info:
        validate_config(raw, "test")
    return info.value.lines()


def test_workload_in_a_parent_queue_is_refused_naming_parent_and_leaves(raw_stack) -> None:  # type: ignore[no-untyped-def]
    raw = raw_stack("prod")
    raw["models"][1]["queue"] = "inference"
    (msg,) = refuse(raw)
    assert msg.startswith("gpuscale:models[1].queue: queue 'inference' has children (chat, search)")
    assert "leaf" in msg and "'chat'" in msg and "'search'" in msg


def test_unknown_queue_is_refused_with_the_leaves(raw_stack) -> None:  # type: ignore[no-untyped-def]
    raw = raw_stack("prod")
    raw["models"][1]["queue"] = "serach"
    (msg,) = refuse(raw)
    assert "queue 'serach' is not in teams; leaf queues: ['chat', 'search', 'training']" in msg


def test_parent_over_committed_by_its_children_quotas_is_refused(raw_stack) -> None:  # type: ignore[no-untyped-def]
    raw = raw_stack("prod")
    raw["teams"][0]["children"][1]["gpu_quota"] = 16  # chat 40 + search 16 = 56 > inference quota 52, within limit 64
    (msg,) = refuse(raw)
    assert msg.startswith("gpuscale:teams[0].gpu_quota: queue inference: children's GPU quotas (chat 40 + search 16 = 56) exceed its gpu_quota (52)")
    assert "Raise inference's gpu_quota to 56" in msg


def test_children_above_parent_limit_is_refused(raw_stack) -> None:  # type: ignore[no-untyped-def]
    raw = raw_stack("prod")
    raw["teams"][1]["gpu_limit"] = 12
    raw["teams"][1]["gpu_quota"] = 12
    raw["teams"][1]["children"][0].update(gpu_quota=16, gpu_limit=20)
    problems = refuse(raw)
    assert any("queue research: children's GPU quotas (training 16 = 16) exceed its gpu_limit (12)" in p for p in problems)


def test_three_level_over_commitment_names_the_middle_queue(raw_stack) -> None:  # type: ignore[no-untyped-def]
    raw = raw_stack("prod")
    chat = raw["teams"][0]["children"][0]
    chat["children"] = [
        {"name": "chat-eu", "gpu_quota": 30, "gpu_limit": 48},
        {"name": "chat-us", "gpu_quota": 20, "gpu_limit": 48},
    ]
    raw["models"][0]["queue"] = "chat-eu"
    (msg,) = refuse(raw)
    assert "queue chat: children's GPU quotas (chat-eu 30 + chat-us 20 = 50) exceed its gpu_limit (48)" in msg


def test_child_cpu_quota_needs_a_parent_cpu_quota(raw_stack) -> None:  # type: ignore[no-untyped-def]
    raw = raw_stack("prod")
    raw["teams"][0]["children"][0]["cpu_quota_cores"] = 64
    (msg,) = refuse(raw)
    assert "queue inference: children set cpu_quota_cores (chat 64 = 64) but inference leaves it unset" in msg
    raw["teams"][0]["cpu_quota_cores"] = 48
    (msg,) = refuse(raw)
    assert "queue inference: children's cpu_quota_cores (chat 64 = 64) exceed its cpu_quota_cores (48)" in msg
    raw["teams"][0]["cpu_quota_cores"] = 64
    assert validate_config(raw, "test").teams[0].children[0].cpu_quota_cores == 64


def test_memory_limit_below_quota_is_refused(raw_stack) -> None:  # type: ignore[no-untyped-def]
    raw = raw_stack("prod")
    raw["teams"][1].update(memory_quota_gib=512, memory_limit_gib=256)
    (msg,) = refuse(raw)
    assert "queue research: memory_limit_gib (256) is below memory_quota_gib (512)" in msg


def test_top_level_quotas_beyond_the_node_pools_are_refused_with_numbers(raw_stack) -> None:  # type: ignore[no-untyped-def]
    raw = raw_stack("prod")
    raw["teams"][1]["gpu_quota"] = raw["teams"][1]["children"][0]["gpu_quota"] = 28  # 52 + 28 = 80: exactly fits
    assert validate_config(raw, "test").teams[1].gpu_quota == 28
    raw["teams"][1]["gpu_quota"] = raw["teams"][1]["children"][0]["gpu_quota"] = 40
    problems = refuse(raw)
    assert any("(inference 52 + research 40 = 92) exceed the GPU node pools' limits (h100 64 + l40s 16 = 80)" in p for p in problems)


def test_gang_larger_than_a_non_preemptible_quota_can_never_start() -> None:
    raw = gang_raw()
    raw["teams"][0]["children"][1].update(gpu_quota=4)  # search: 4 GPUs of quota, the 70B replica needs 8 at once
    raw["teams"][0]["gpu_quota"] = 44
    raw["models"][1]["autoscaling"] = {"aggregated": {"min_replicas": 0, "wake_schedule": {"start": "0 8 * * 1-5", "end": "0 19 * * 1-5"}}}
    raw["models"][1]["slo"]["criticality"] = "best_effort"
    (msg,) = refuse(raw)
    assert msg.startswith("gpuscale:models[1].queue: one replica of llama-70b-bf16 is a gang of 2 pod(s) / 8 GPUs")
    assert "queue search is non-preemptible" in msg and "search gpu_quota 4 is below 8" in msg


def test_gang_larger_than_its_node_pool_is_refused() -> None:
    raw = gang_raw()
    raw["topology"]["gpu_pools"][1]["gpu_limit"] = 4
    problems = refuse(raw)
    assert any(p.startswith("gpuscale:models[1].node_pool: one replica of llama-70b-bf16 is a gang of 2 pod(s) / 8 GPUs "
                            "but node pool l40s may run at most 4 GPUs") for p in problems)


def test_gang_above_a_preemptible_limit_is_refused() -> None:
    raw = gang_raw()
    raw["models"][1]["queue"] = "training"
    raw["teams"][1].update(gpu_limit=6, gpu_quota=6)
    raw["teams"][1]["children"][0].update(gpu_quota=6, gpu_limit=6)
    problems = refuse(raw)
    assert any("gang of 2 pod(s) / 8 GPUs but research gpu_limit 6, training gpu_limit 6 caps the queue below it" in p
               for p in problems)


def test_topology_aliases_must_be_unique_and_distinct_from_labels(raw_stack) -> None:  # type: ignore[no-untyped-def]
    raw = raw_stack("prod")
    raw["topology"]["levels"] = [
        {"node_label": "topology.kubernetes.io/zone", "alias": "zone"},
        {"node_label": "kubernetes.io/hostname", "alias": "zone"},
    ]
    (msg,) = refuse(raw)
    assert "levels: aliases must be unique; repeated: ['zone']" in msg
    raw["topology"]["levels"][1]["alias"] = "topology.kubernetes.io/zone"
    (msg,) = refuse(raw)
    assert "equals a node_label" in msg
    raw["topology"]["levels"][1] = {"node_label": "not a label"}
    (msg,) = refuse(raw)
    assert "is not a Kubernetes label key" in msg


def test_the_gang_test_spec_itself_is_valid() -> None:
    spec = validate_config(gang_raw(), "gang")
    assert spec.models[1].queue == "search"
