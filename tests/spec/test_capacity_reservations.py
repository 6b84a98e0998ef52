"""Capacity reservations with dates: typed entries, backward-compatible ids, and the two refusals at a block's end."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpuscale.guardrails import reservations
from gpuscale.plan.context import build_context
from gpuscale.sizing import size_platform
from gpuscale.spec.platform import PlatformSpec
from gpuscale.spec.topology import CapacityReservationSpec
from gpuscale.stackfile import StackConfigError, load_stack_file, read_stack_config, validate_config
from tests.conftest import stack_path

START = datetime(2026, 12, 1, 11, 30, tzinfo=UTC)
PEAK_H = 8.0  # the prod h100 model's peak_hours_per_day
END_PATH = "topology.gpu_pools[0].capacity_reservations[0].end_utc"


def block(end: datetime, start: datetime = START, rid: str = "cr-0block1") -> dict[str, Any]:
    return {"id": rid, "type": "capacity-block", "start_utc": start.isoformat(), "end_utc": end.isoformat()}


def prod_with(capacity_types: list[str], entries: list[dict[str, Any]], **pool: Any) -> dict[str, Any]:
    raw = read_stack_config(stack_path("prod"))
    raw["topology"]["gpu_pools"][0].update(capacity_types=capacity_types, capacity_reservations=entries, **pool)
    return raw


def refusals(raw: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(StackConfigError) as info:
        validate_config(raw, "test")
    return {p.path: p.message for p in info.value.problems}


def test_the_prod_peak_is_the_threshold_this_file_assumes(prod_spec: PlatformSpec) -> None:
    assert [m.workload.peak_hours_per_day for m in prod_spec.models if m.node_pool == "h100"] == [PEAK_H]


@pytest.mark.parametrize(("usable_s", "refused"), [(-60, True), (0, False), (60, False)])
def test_a_block_that_drains_before_one_peak_is_over_is_refused_at_its_end(usable_s: int, refused: bool) -> None:
    # the block serves until Karpenter drains it, 40 min before its end: at, just below and just above one peak
    end = START + timedelta(hours=PEAK_H, seconds=reservations.DRAIN_LEAD_S + usable_s)
    raw = prod_with(["reserved", "on-demand"], [block(end)])
    if not refused:
        spec = validate_config(raw, "test")
        (only,) = spec.topology.gpu_pools[0].reservations
        assert (only.type, only.start_utc, only.end_utc) == ("capacity-block", START, end)
        return
    found = refusals(raw)
    assert list(found) == [END_PATH]
    assert "less than the 8 h daily peak of llama-70b-fp8" in found[END_PATH] and "7.98 h" in found[END_PATH]


def test_a_reserved_only_pool_of_blocks_cannot_carry_a_warm_minimum_past_the_last_end() -> None:
    first, last = START + timedelta(days=7), START + timedelta(days=14)
    raw = prod_with(["reserved"], [block(last, start=first, rid="cr-0late"), block(first, rid="cr-0early")])
    found = refusals(raw)
    assert list(found) == [END_PATH]  # the block that ends last, where the pool runs out
    message = found[END_PATH]
    assert "cr-0late" in message and "2026-12-15T10:50Z" in message  # drained 40 min before 2026-12-15T11:30Z
    assert "llama-70b-fp8 prefill (min 2), llama-70b-fp8 decode (min 2)" in message


@pytest.mark.parametrize("fallback", [
    {"capacity_types": ["reserved", "on-demand"]},
    {"capacity_types": ["reserved"], "capacity_reservation_ids": ["cr-0odcr"]},
])
def test_a_pool_that_falls_back_after_the_block_keeps_its_warm_minimum(fallback: dict[str, Any]) -> None:
    types = fallback.pop("capacity_types")
    spec = validate_config(prod_with(types, [block(START + timedelta(days=7))], **fallback), "test")
    assert not spec.topology.gpu_pools[0].launches_only_reserved_blocks


def test_warm_minimum_zero_on_a_blocks_only_pool_is_accepted() -> None:
    raw = prod_with(["reserved"], [block(START + timedelta(days=7))])
    raw["models"][0]["slo"].update(criticality="best_effort", request_timeout_s=900)  # a cold first answer fits
    for role in ("prefill", "decode"):
        raw["models"][0]["autoscaling"].setdefault(role, {})["min_replicas"] = 0
    spec = validate_config(raw, "test")
    assert spec.topology.gpu_pools[0].launches_only_reserved_blocks


@pytest.mark.parametrize(("entry", "path", "words"), [
    ({"id": "cr-0a", "type": "capacity-block", "start_utc": "2026-12-01T11:30:00Z"}, "end_utc", "needs start_utc and end_utc"),
    ({"id": "cr-0a", "type": "capacity-block", "start_utc": "2026-12-02T11:30:00Z", "end_utc": "2026-12-01T11:30:00Z"},
     "end_utc", "is not after start_utc"),
    ({"id": "cr-0a", "type": "capacity-block", "start_utc": "2026-12-01T11:30:00+02:00", "end_utc": "2026-12-09T11:30:00Z"},
     "start_utc", "not in UTC"),
    ({"id": "cr-0a", "type": "capacity-block", "start_utc": "2026-12-01 11:30", "end_utc": "2026-12-09T11:30:00Z"},
     "start_utc", "not in UTC"),
    ({"id": "cr-0a", "type": "capacity-block", "start_utc": "next tuesday", "end_utc": "2026-12-09T11:30:00Z"},
     "start_utc", "not an ISO 8601"),
    ({"id": "cr-0a", "end_utc": "2026-12-09T11:30:00Z"}, "end_utc", "only for type: capacity-block"),
    ({"id": "cr-0a", "type": "odcr-ish"}, "type", "'odcr' or 'capacity-block'"),
    ({"id": "cr_0a"}, "id", "not a capacity reservation id"),
])
def test_malformed_entries_are_refused_with_their_path(entry: dict[str, Any], path: str, words: str) -> None:
    found = refusals(prod_with(["reserved", "on-demand"], [entry]))
    assert list(found) == [f"topology.gpu_pools[0].capacity_reservations[0].{path}"], found
    assert words in found[f"topology.gpu_pools[0].capacity_reservations[0].{path}"]


def test_an_id_listed_both_ways_is_refused() -> None:
    raw = prod_with(["reserved"], [{"id": "cr-0a"}], capacity_reservation_ids=["cr-0a"])
    assert "listed twice" in refusals(raw)["topology.gpu_pools[0].capacity_reservations"]


def test_an_entry_without_type_is_an_odcr_and_bare_ids_still_mean_odcrs() -> None:
    spec = validate_config(prod_with(["reserved"], [{"id": "cr-0b"}], capacity_reservation_ids=["cr-0a"]), "test")
    assert spec.topology.gpu_pools[0].reservations == [CapacityReservationSpec(id="cr-0a"), CapacityReservationSpec(id="cr-0b")]
    assert {r.type for r in spec.topology.gpu_pools[0].reservations} == {"odcr"}


def test_yaml_timestamps_read_as_utc_datetimes(tmp_path: Path) -> None:
    text = stack_path("prod").read_text().replace(
        "        capacity_types: [on-demand]\n        gpu_limit: 64",
        "        capacity_types: [reserved, on-demand]\n        capacity_reservations:\n"
        "          - {id: cr-0abc, type: capacity-block, start_utc: 2026-12-01T11:30:00Z, end_utc: 2026-12-08T11:30:00Z}\n"
        "        gpu_limit: 64", 1)
    path = tmp_path / "Pulumi.prod.yaml"
    path.write_text(text)
    spec = load_stack_file(path)
    (only,) = spec.topology.gpu_pools[0].reservations
    assert only.end_utc == datetime(2026, 12, 8, 11, 30, tzinfo=UTC)


def test_the_plan_shows_each_window_and_what_happens_at_its_end() -> None:
    end = START + timedelta(days=7)
    spec = validate_config(prod_with(["reserved", "on-demand"], [block(end)], capacity_reservation_ids=["cr-0odcr"]), "t")
    rows = {r.id: r for r in build_context("t", spec, size_platform(spec)).reservations}
    b = rows["cr-0block1"]
    assert (b.start, b.end, b.drain_from, b.reclaim_from) == ("2026-12-01 11:30", "2026-12-08 11:30", "2026-12-08 10:50", "2026-12-08 11:00")
    assert b.usable_hours == f"{7 * 24 - 40 / 60:.1f}"
    assert b.after_end == "new nodes from ODCR cr-0odcr, on-demand"
    assert rows["cr-0odcr"].drain_from == "-" and "its other Capacity Blocks" in rows["cr-0odcr"].after_end


@pytest.mark.parametrize(("entry", "path", "words"), [
    ({"id": "cr-0a", "instance_count": 9}, "instance_count", "above the pool's gpu_limit 64"),
    ({"id": "cr-0a", "instance_count": 0}, "instance_count", "greater than or equal to 1"),
    ({"id": "cr-0a", "usd_per_instance_hour": 30.0}, "instance_count", "set instance_count"),
    ({"id": "cr-0a", "instance_type": "g6e.xlarge", "instance_count": 1}, "instance_type", "not one of the pool's"),
    ({**block(START + timedelta(days=7)), "instance_count": 2}, "usd_per_instance_hour", "UpfrontFee"),
])
def test_billing_fields_are_refused_with_their_path(entry: dict[str, Any], path: str, words: str) -> None:
    found = refusals(prod_with(["reserved", "on-demand"], [entry]))
    assert list(found) == [f"topology.gpu_pools[0].capacity_reservations[0].{path}"], found
    assert words in found[f"topology.gpu_pools[0].capacity_reservations[0].{path}"]


def test_the_largest_reservation_the_limit_launches_is_accepted() -> None:
    spec = validate_config(prod_with(["reserved", "on-demand"], [{"id": "cr-0a", "instance_count": 8}]), "t")
    rate = spec.topology.gpu_pools[0].instances[0].on_demand_usd_per_hour
    assert spec.topology.gpu_pools[0].reserved_instances("p5.48xlarge") == (8, 8 * rate)  # an ODCR: On-Demand


def test_the_plan_shows_what_each_reservation_bills() -> None:
    end = START + timedelta(days=7)
    spec = validate_config(prod_with(["reserved", "on-demand"], [
        {**block(end), "instance_count": 2, "usd_per_instance_hour": 31.464},
        {"id": "cr-0odcr", "instance_count": 1}, {"id": "cr-0free"}]), "t")
    rows = {r.id: r for r in build_context("t", spec, size_platform(spec)).reservations}
    assert rows["cr-0block1"].bill == "2 x p5.48xlarge at $31.46/h = $62.93/h, $10,572 up front for the block's 168 h"
    on_demand = spec.topology.gpu_pools[0].instances[0].on_demand_usd_per_hour
    assert rows["cr-0odcr"].bill == f"1 x p5.48xlarge at ${on_demand:,.2f}/h = ${on_demand:,.2f}/h (${on_demand * 24:,.0f}/day) while it exists"
    assert rows["cr-0free"].bill == "not billed here (no instance_count)"


def test_a_reservation_two_models_share_is_billed_once_in_validate_and_the_plan(tmp_path: Path) -> None:
    from gpuscale.cli import app
    from gpuscale.plan.evidence import Evidence
    from gpuscale.plan.render import render_plan
    from tests.cli.runner import FastRunner

    raw = prod_with(["reserved", "on-demand"], [{"id": "cr-0a", "instance_count": 5}])
    for m in raw["models"][:1]:  # chat's quota holds two 70B models at a lower peak
        m["workload"] = {**m["workload"], "base_rps": 5, "peak_rps": 15}
    raw["models"].append({**raw["models"][0], "name": "llama-b"})  # a second model on the h100 pool
    spec = validate_config(raw, "t")
    sized = size_platform(spec)
    shares = build_context("t", spec, sized).reservation_shares
    assert {s.model for s in shares} == {"llama-70b-fp8", "llama-b"}
    assert sum(s.instances for s in shares) == 5  # split, not 5 each
    rate = spec.topology.gpu_pools[0].instances[0].on_demand_usd_per_hour
    assert sum(s.usd_per_hour for s in shares) == pytest.approx(5 * rate)
    assert all(s.pool_instances == 5 and s.shared_with for s in shares)
    doc = render_plan(build_context("t", spec, sized), Evidence(node_manifests=[], simulations=[]))
    assert "bills once, however many models launch into it" in doc
    assert "llama-b" in doc.split("bills once")[1].split("\n\n")[1]

    path = tmp_path / "Pulumi.t.yaml"
    import yaml
    path.write_text(yaml.safe_dump({"config": {f"gpuscale:{k}": v for k, v in raw.items()}}))
    out = FastRunner().invoke(app, ["validate", "--stack-file", str(path)], terminal_width=250)
    assert out.exit_code == 0, out.output
    table = out.output.split("Capacity reservations")[1]
    assert "h100" in table and "llama-b" in table and f"{5 * rate:,.2f}" in table
