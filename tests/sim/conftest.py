"""Shared simulator fixtures: small stacks built from ``tests/sim/fixtures`` and cached scenario runs.

Unit tests use the tiny stacks and short runs; the shipped stacks have their own small set (``test_stacks.py``).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from gpuscale.sim.metrics import ScenarioResult
from gpuscale.sim.runner import Runner
from gpuscale.sim.scenarios import build_scenario
from gpuscale.spec.platform import PlatformSpec
from gpuscale.stackfile import load_stack_file
from tests.conftest import stack_path

FIXTURES = Path(__file__).parent / "fixtures"


@cache
def spec_of(name: str) -> PlatformSpec:
    """A fixture stack (``tiny-aggregated``, ``tiny-disaggregated``) or a shipped one (``dev``, ``staging``, ``prod``)."""
    path = FIXTURES / f"{name}.yaml"
    return load_stack_file(path if path.is_file() else stack_path(name))


@cache
def run_scenario(
    stack: str, scenario: str, duration_s: float | None, seed: int = 0, policies: tuple[str, ...] = (),
    spot: float | None = None,
) -> ScenarioResult:
    sc = build_scenario(scenario, spec_of(stack), duration_s=duration_s, spot_interruptions_per_node_hour=spot)
    return Runner(sc, seed=seed, policies=list(policies) or None).run()


@pytest.fixture(scope="session")
def tiny() -> PlatformSpec:
    return spec_of("tiny-aggregated")


@pytest.fixture(scope="session")
def tiny_pd() -> PlatformSpec:
    return spec_of("tiny-disaggregated")


def write_prefix_trace(
    path: Path, *, buckets: int = 100, per_bucket: int = 6, bucket_s: float = 3.0, groups: int = 4,
) -> Path:
    """A synthetic trace recorded in ``bucket_s`` buckets whose prompts share one of ``groups`` 1,024-token prefixes
    (64 KV blocks of ids); the Azure traces carry no prefix ids."""
    rows = ["arrival_s,input_tokens,output_tokens,prefix_ids"]
    for k in range(buckets):
        for j in range(per_bucket):
            group = (7 * k + j) % groups
            ids = " ".join(str(10_000 * (group + 1) + b) for b in range(64))
            rows.append(f"{bucket_s * k:.1f},{1_100 + 13 * j},{30 + 5 * j},{ids}")
    path.write_text("\n".join(rows) + "\n")
    return path
