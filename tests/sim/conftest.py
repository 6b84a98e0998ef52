"""Scenario runs shared by the simulator tests: each (stack, scenario, duration, seed, policies) runs once per session."""

from __future__ import annotations

from functools import cache

import pytest

from gpuscale.sim.metrics import ScenarioResult
from gpuscale.sim.runner import Runner
from gpuscale.sim.scenarios import build_scenario
from gpuscale.stackfile import load_stack_file
from tests.conftest import stack_path


@cache
def run_scenario(stack: str, scenario: str, duration_s: float | None, seed: int = 0, policies: tuple[str, ...] = ()) -> ScenarioResult:
    spec = load_stack_file(stack_path(stack))
    sc = build_scenario(scenario, spec, duration_s=duration_s)
    return Runner(sc, seed=seed, policies=list(policies) or None).run()


PEAK = ("prod", "peak-hour", 1800.0, 0, ("dcgm-duty-cycle", "dcgm-duty-cycle+manual", "queue-depth", "gpuscale", "oracle"))
PROD_STACK = ("prod", "stack", 3600.0, 0, ())
"""The prod stack's own workload (disaggregated) compressed into one hour: ramp, peak, bursts, ramp down."""
TWO_AM = ("prod", "2am-huge-prompt", None, 0, ())
GANG = ("prod", "gang-7-of-8", None, 0, ())
CONSOLIDATION = ("staging", "consolidation-24x7", 10800.0, 0, ())
STACK_RUNS = (("staging", "stack", 3600.0, 0, ()), ("dev", "stack", 3600.0, 0, ()))


@pytest.fixture(scope="session")
def peak() -> ScenarioResult:
    return run_scenario(*PEAK)


@pytest.fixture(scope="session")
def two_am() -> ScenarioResult:
    return run_scenario(*TWO_AM)


@pytest.fixture(scope="session")
def gang() -> ScenarioResult:
    return run_scenario(*GANG)


@pytest.fixture(scope="session")
def consolidation() -> ScenarioResult:
    return run_scenario(*CONSOLIDATION)
