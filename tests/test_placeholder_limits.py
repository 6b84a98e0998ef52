"""Placeholder pods KAI would refuse over a queue's limit are refused in ``validate``: KAI marks a refused pod
Unschedulable and Karpenter launches a node for it that stays empty (``guardrails.headroom.placeholder_limit_breach``)."""

from __future__ import annotations

from typing import Any

import pytest

from gpuscale.feasibility import checked_sizing
from gpuscale.guardrails.headroom import placeholder_limit_breach
from gpuscale.problems import Problems
from gpuscale.spec.platform import PlatformSpec
from gpuscale.stackfile import load_stack_file
from tests.conftest import stack_path


def prod_with_placeholders(chat_limit: float) -> PlatformSpec:
    raw: dict[str, Any] = load_stack_file(stack_path("prod")).model_dump(mode="json", exclude_unset=True)
    llama = raw["models"][0]
    llama["workload"]["burst"] = {"multiplier": 2.0, "duration_s": 600, "per_hour": 2}
    llama["headroom"] = {"mode": "placeholder-pods"}
    raw["teams"][0]["children"][0]["gpu_limit"] = chat_limit
    # room in the parent's limit for every GPU the pools may run (h100 64 + l40s 16), so only chat's limit decides:
    # at prod's 64 the search 8B's serving GPUs at max leave inference no room for the 70B's placeholders either
    raw["teams"][0]["gpu_limit"] = 80
    return PlatformSpec.model_validate(raw)


def placeholder_gpus(spec: PlatformSpec) -> tuple[int, int]:
    """(placeholder GPUs, serving GPUs at max_replicas) of the 70B, as sized with no limit in the way."""
    from gpuscale.sizing import size_platform
    ms = size_platform(spec).models[0]
    held = sum(r.headroom.gpus for r in ms.roles if r.headroom is not None and r.headroom.emitted)
    return held, sum(r.max_replicas * ms.shape.gpus for r in ms.roles)


def test_the_rule_at_below_and_above_the_limit() -> None:
    assert placeholder_limit_breach("chat", 48, 40, [("m", "decode", 8)]) is None  # exactly fits
    msg = placeholder_limit_breach("chat", 48, 44, [("m", "decode", 8)])
    assert msg is not None and "at least 52" in msg and "capacity-buffer" in msg
    assert placeholder_limit_breach("chat", -1, 400, [("m", "decode", 8)]) is None  # no limit: KAI never refuses
    assert placeholder_limit_breach("chat", 8, 40, []) is None  # no placeholders


def test_prod_with_placeholders_over_the_chat_limit_is_refused_at_the_models_headroom_mode() -> None:
    spec = prod_with_placeholders(48)
    held, serving = placeholder_gpus(spec)
    assert held > 0  # they pay on this stack, so they would be emitted
    if serving + held <= 48:
        pytest.fail(f"the case does not exceed the limit: {serving} + {held} <= 48")
    with pytest.raises(Problems) as exc:
        checked_sizing(spec)
    [p] = [p for p in exc.value.problems if p.path.endswith("headroom.mode")]
    assert p.path == "models[0].headroom.mode" and "queue chat" in p.message and "Unschedulable" in p.message


def test_a_limit_with_room_for_serving_at_max_and_every_placeholder_is_accepted() -> None:
    spec = prod_with_placeholders(64)
    held, serving = placeholder_gpus(spec)
    assert serving + held <= 64, (serving, held)
    sized = checked_sizing(spec)
    assert any(r.headroom is not None and r.headroom.emitted for r in sized.models[0].roles)
