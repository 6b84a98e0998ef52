"""Cross-layer checks on the emitted objects: tolerations vs taints, GPUs per pod vs instance types, gangs vs pools."""

from __future__ import annotations

import pytest

from gpuscale.cross_layer import _tolerates, check_platform
from gpuscale.sizing import size_platform
from gpuscale.spec.platform import PlatformSpec
from gpuscale.stackfile import validate_config
from tests.conftest import STACKS
from tests.specs import multi_node_aggregated


@pytest.mark.parametrize("stack", STACKS)
def test_stacks_are_consistent_across_layers(stack_specs: dict[str, PlatformSpec], stack: str) -> None:
    spec = stack_specs[stack]
    assert check_platform(spec, size_platform(spec)) == []


def test_taint_toleration_matching() -> None:
    taint = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    assert _tolerates([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}], taint)
    assert _tolerates([{"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}], taint)
    assert not _tolerates([{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}], taint)
    assert not _tolerates([{"key": "other", "operator": "Exists"}], taint)


def test_max_replicas_beyond_pool_limit_is_refused(raw_stack) -> None:  # type: ignore[no-untyped-def]
    raw = raw_stack("prod")
    raw["models"][1]["autoscaling"] = {"aggregated": {"max_replicas": 30}}
    spec = PlatformSpec.model_validate(raw)
    problems = [p.message for p in check_platform(spec, size_platform(spec))]
    assert {p.path for p in check_platform(spec, size_platform(spec))} == {"models[1].autoscaling.aggregated.max_replicas"}
    assert any(p.startswith("max_replicas search-8b/aggregated 30 x 1 = 30 GPUs exceed node pool l40s gpu_limit 16; "
                            "Karpenter stops launching at the limit") for p in problems)
    assert any(p.startswith("max_replicas search-8b/aggregated 30 x 1 = 30 GPUs exceed queue search gpu_quota 12") for p in problems)


def test_gang_wider_than_the_pool_is_refused(raw_stack) -> None:  # type: ignore[no-untyped-def]
    raw = raw_stack("prod")
    # TP8 x PP2 = 16 GPUs over two p5 nodes, in a pool capped at 8 GPUs (one node)
    spec = validate_config(multi_node_aggregated(raw), "t")
    sizing = size_platform(spec)
    assert sizing.model("llama-70b-fp8").shape.pods == 2
    pool = spec.topology.gpu_pools[0].model_copy(update={"gpu_limit": 8})
    narrowed = spec.model_copy(update={"topology": spec.topology.model_copy(update={"gpu_pools": [pool, spec.topology.gpu_pools[1]]})})
    problems = [p.message for p in check_platform(narrowed, sizing)]
    assert "llama-70b-fp8/aggregated: one replica spans 2 nodes but node pool h100 may hold only 1 (8 GPUs / 8 per node)" in problems
