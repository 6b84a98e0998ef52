"""Dump builders over the shipped stacks' synth output (synthesized once per test session)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gpuscale.doctor.cluster import Settings
from gpuscale.spec.platform import PlatformSpec
from gpuscale.synth.render import SynthResult
from tests.doctor.builders import DumpBuilder


@pytest.fixture
def builder(stack_specs: dict[str, PlatformSpec], stack_synths: dict[str, SynthResult]) -> Callable[[str], DumpBuilder]:
    return lambda stack: DumpBuilder(stack_specs[stack], stack_synths[stack])


@pytest.fixture
def settings(stack_specs: dict[str, PlatformSpec]) -> Callable[[str], Settings]:
    def of(stack: str) -> Settings:
        spec = stack_specs[stack]
        return Settings.from_provisioning(spec.topology.provisioning, frozenset(p.name for p in spec.topology.gpu_pools))
    return of
