"""The plan's preemption-delay and capacity-reservation passages, rendered without simulations: numbers from sizing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from gpuscale.plan.context import build_context
from gpuscale.plan.evidence import Evidence
from gpuscale.plan.render import render_plan
from gpuscale.sizing import size_platform
from gpuscale.spec.platform import PlatformSpec
from gpuscale.stackfile import read_stack_config, validate_config
from tests.conftest import stack_path


def plan_text(spec: PlatformSpec) -> str:
    return render_plan(build_context("t", spec, size_platform(spec)), Evidence(node_manifests=[], simulations=[]))


def test_the_plan_states_each_models_preemption_delay_from_sizing(prod_spec: PlatformSpec) -> None:
    text = plan_text(prod_spec)
    assert "`kai.scheduler/preemption-delay`" in text
    for ms in size_platform(prod_spec).models:
        c = ms.cold_start
        assert f"{ms.model}: {c.node_s:g} s + {c.gpu_ready_s:g} s, `{ms.preemption_delay_s}s`" in text
        rows = [line for line in text.splitlines() if line.startswith(f"| {ms.model} |") and "Deployment" in line]
        assert rows and all(line.rstrip().endswith(f"| `{ms.preemption_delay_s}s` |") for line in rows)


def test_the_plan_shows_capacity_block_windows_and_the_drain_only_when_there_are_reservations(prod_spec: PlatformSpec) -> None:
    assert "Capacity reservations" not in plan_text(prod_spec)
    raw = read_stack_config(stack_path("prod"))
    start = datetime(2026, 12, 1, 11, 30, tzinfo=UTC)
    raw["topology"]["gpu_pools"][0].update(capacity_types=["reserved", "on-demand"], capacity_reservations=[
        {"id": "cr-0blk", "type": "capacity-block", "start_utc": start.isoformat(), "end_utc": (start + timedelta(days=7)).isoformat()},
    ])
    text = plan_text(validate_config(raw, "t"))
    assert "drained 40 minutes before its end" in text and "30 minutes before the end EC2 starts reclaiming" in text
    assert ("| h100 | `cr-0blk` | capacity-block | 2026-12-01 11:30 | 2026-12-08 11:30 | 2026-12-08 10:50 | 2026-12-08 11:00 "
            "| 167.3 | new nodes from on-demand |") in text
