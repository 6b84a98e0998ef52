"""The tuner's ``consolidate_after`` candidates come from the guardrail's floor, so it never tries what validate refuses."""

from __future__ import annotations

import pytest

from gpuscale.guardrails import consolidation
from gpuscale.spec.base import duration_seconds
from gpuscale.spec.platform import PlatformSpec
from gpuscale.stackfile import read_stack_config, validate_config
from gpuscale.tune.params import consolidate_after_candidates
from tests.conftest import stack_path


@pytest.mark.parametrize(("cold_start_s", "expected"), [
    (250.0, ["1h", "2h"]),  # the stack's 1h, then twice the floor
    (4259.2, ["1h", "71m", "142m"]),  # the stack's value first (the search starts there), then the floor and twice it
    (4260.5, ["1h", "72m", "143m"]),  # whole minutes never below the cold start
])
def test_candidates_start_at_the_floor(cold_start_s: float, expected: list[str]) -> None:
    spec = PlatformSpec.model_validate(read_stack_config(stack_path("dev")), strict=True)
    out = consolidate_after_candidates(spec, "llama-8b", cold_start_s)
    assert out == expected
    assert all(duration_seconds(c) >= consolidation.floor_s(cold_start_s) for c in out[1:])


def test_every_candidate_of_an_unacknowledged_pool_is_one_validate_accepts() -> None:
    raw = read_stack_config(stack_path("dev"))
    spec = PlatformSpec.model_validate(raw, strict=True)
    for candidate in consolidate_after_candidates(spec, "llama-8b", 250.0):
        raw["topology"]["gpu_pools"][0]["consolidate_after"] = candidate
        validate_config(raw, "dev")  # raises if the tuner would try a refused value


def test_an_acknowledged_pool_may_also_try_its_cold_start() -> None:
    raw = read_stack_config(stack_path("dev"))
    raw["topology"]["gpu_pools"][0]["acknowledge_underutilized_consolidation_evicts_inference"] = True
    spec = PlatformSpec.model_validate(raw, strict=True)
    assert consolidate_after_candidates(spec, "llama-8b", 250.0) == ["1h", "5m", "30m", "2h"]
