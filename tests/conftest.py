"""Shared fixtures: repository paths, the ../shared reference data, stack specs, and the Pulumi mock runner."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpuscale.spec.platform import PlatformSpec
from gpuscale.stackfile import load_stack_file, read_stack_config
from gpuscale.synth.mocks import RecordedResource, run_program
from gpuscale.synth.render import SynthResult, synth_spec

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
STACKS = ("dev", "staging", "prod")

requires_shared = pytest.mark.skipif(
    not (SHARED / "crds").is_dir(),
    reason=f"reference data {SHARED} is absent (a clone outside the workplace); CI has it",
)


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not (SHARED / "crds").is_dir():
        pytest.skip(f"reference data {SHARED} is absent (a clone outside the workplace); CI has it")
    return SHARED


def stack_path(name: str) -> Path:
    return REPO / "stacks" / f"Pulumi.{name}.yaml"


@pytest.fixture(scope="session")
def stack_specs() -> dict[str, PlatformSpec]:
    return {name: load_stack_file(stack_path(name)) for name in STACKS}


@pytest.fixture(scope="session")
def stack_synths(stack_specs: dict[str, PlatformSpec]) -> dict[str, SynthResult]:
    """Each shipped stack synthesized once per test process (the synth and plan tests read the same output)."""
    return {name: synth_spec(spec, stack=name) for name, spec in stack_specs.items()}


@pytest.fixture
def prod_spec(stack_specs: dict[str, PlatformSpec]) -> PlatformSpec:
    return stack_specs["prod"]


@pytest.fixture
def dev_spec(stack_specs: dict[str, PlatformSpec]) -> PlatformSpec:
    return stack_specs["dev"]


@pytest.fixture
def raw_stack() -> Callable[[str], dict[str, Any]]:
    """The ``gpuscale:*`` dict of a stack file, for tests that mutate one field and re-validate."""
    return lambda name: read_stack_config(stack_path(name))


@pytest.fixture
def run_pulumi() -> Callable[..., list[RecordedResource]]:
    """Run a Pulumi program function under deterministic mocks; returns every registration in order."""
    return run_program
