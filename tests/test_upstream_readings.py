"""Guards that keep true what docs/upstream-readings.md found upstream, where the finding needed no other fix."""

from __future__ import annotations

from typing import Any

import pytest

from gpuscale.synth.render import SynthResult
from tests.conftest import STACKS


def _mark_unschedulable(node: Any) -> list[Any]:
    if isinstance(node, dict):
        here = [node["markUnschedulable"]] if "markUnschedulable" in node else []
        return here + [v for child in node.values() for v in _mark_unschedulable(child)]
    if isinstance(node, list):
        return [v for child in node for v in _mark_unschedulable(child)]
    return []


@pytest.mark.parametrize("stack", STACKS)
def test_nothing_stops_kai_from_marking_pods_unschedulable(stack_synths: dict[str, SynthResult], stack: str) -> None:
    """Item 14: Karpenter provisions only for pods whose PodScheduled condition says Unschedulable; KAI v0.17.0 sets it
    on every pending pod of a ready pod group unless the PodGroup says ``markUnschedulable: false`` (nil means true).
    gpuscale emits no PodGroup and no object may carry that switch off."""
    objects = [obj for _, obj in stack_synths[stack].kubernetes_objects()]
    assert not [o for o in objects if o.get("kind") == "PodGroup"]
    assert [v for o in objects for v in _mark_unschedulable(o) if v is not True] == []
