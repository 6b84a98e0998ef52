"""The simulator charges capacity reservations as they bill: the reserved instances for the whole run, used or not,
and only the GPU-hours beyond them at the pool's rate (ODCR at the On-Demand rate unless stated, a Capacity Block at
the rate it was bought at)."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest

from gpuscale.sim.metrics import PolicyResult
from gpuscale.sim.runner import Runner
from gpuscale.sim.scenarios import build_scenario
from gpuscale.spec.catalogue import CATALOGUE
from gpuscale.spec.platform import PlatformSpec
from tests.sim.conftest import spec_of

DURATION_S = 600.0


def with_reservations(entries: list[dict[str, Any]]) -> PlatformSpec:
    raw = spec_of("tiny-aggregated").model_dump(mode="json", exclude_unset=True)
    raw["topology"]["gpu_pools"][0].update(capacity_types=["reserved", "on-demand"], capacity_reservations=entries)
    return PlatformSpec.model_validate(raw)


BLOCK = {"id": "cr-0block", "type": "capacity-block", "start_utc": "2026-12-01T00:00:00Z",
         "end_utc": "2026-12-15T00:00:00Z"}


@cache
def run(entries: tuple[tuple[tuple[str, Any], ...], ...] = ()) -> PolicyResult:
    spec = with_reservations([dict(e) for e in entries]) if entries else spec_of("tiny-aggregated")
    sc = build_scenario("stack", spec, duration_s=DURATION_S)
    [r] = [x for x in Runner(sc, seed=0, policies=["gpuscale"]).run().results if x.name == "gpuscale"]
    return r


def frozen(*entries: dict[str, Any]) -> tuple[tuple[tuple[str, Any], ...], ...]:
    return tuple(tuple(sorted(e.items())) for e in entries)


def test_a_reservation_does_not_change_what_the_cluster_does_only_what_it_costs() -> None:
    plain, odcr = run(), run(frozen({"id": "cr-0a", "instance_count": 1}))
    assert (odcr.completed, odcr.gpu_hours, odcr.nodes.launched) == (plain.completed, plain.gpu_hours, plain.nodes.launched)


def test_reserved_instances_covering_every_node_bill_the_whole_run_whatever_runs() -> None:
    # the tiny pool's limit is 4 g6e.xlarge: reserving 4 covers every GPU the model can ever hold
    r = run(frozen({"id": "cr-0a", "instance_count": 4}))
    rate = CATALOGUE["g6e.xlarge"].on_demand_usd_per_hour
    assert r.cost_usd == pytest.approx(4 * rate * r.end_s / 3600.0, abs=0.01)
    assert r.gpu_hours < 4 * r.end_s / 3600.0  # fewer GPUs ran than were reserved: the unused ones are paid too


def test_a_partial_reservation_bills_its_instances_plus_the_gpus_beyond_them() -> None:
    plain, odcr = run(), run(frozen({"id": "cr-0a", "instance_count": 1}))
    rate = CATALOGUE["g6e.xlarge"].on_demand_usd_per_hour
    reserved = rate * odcr.end_s / 3600.0
    # never below the reservation's bill, and never above it plus what the run cost without it
    assert reserved - 0.01 <= odcr.cost_usd <= plain.cost_usd + reserved + 0.01
    # the run holds at least one node throughout (a warm replica): it runs inside the reservation and is not billed twice
    assert odcr.cost_usd == pytest.approx(plain.cost_usd, abs=0.02)


def test_a_capacity_block_bills_at_the_rate_it_was_bought_at() -> None:
    cheap = run(frozen({**BLOCK, "instance_count": 4, "usd_per_instance_hour": 0.5}))
    assert cheap.cost_usd == pytest.approx(4 * 0.5 * cheap.end_s / 3600.0, abs=0.01)
    stated = run(frozen({"id": "cr-0a", "instance_count": 4, "usd_per_instance_hour": 0.25}))  # an ODCR under a plan
    assert stated.cost_usd == pytest.approx(4 * 0.25 * stated.end_s / 3600.0, abs=0.01)


# ---------------------------------------------------------------- a reserved-only pool, a shared reservation


def two_models(capacity_types: list[str], count: int) -> PlatformSpec:
    """tiny's pool reserved for ``count`` instances, carrying its model and a copy of it."""
    raw = spec_of("tiny-aggregated").model_dump(mode="json", exclude_unset=True)
    raw["topology"]["gpu_pools"][0].update(capacity_types=capacity_types,
                                           capacity_reservations=[{"id": "cr-0a", "instance_count": count}])
    twin = {**raw["models"][0], "name": "twin-8b"}
    raw["models"].append(twin)
    return PlatformSpec.model_validate(raw)


def test_a_reservation_two_models_share_is_split_between_their_simulations_and_billed_once() -> None:
    spec = two_models(["reserved", "on-demand"], 3)
    setups = [build_scenario("stack", spec, model=m.name, duration_s=DURATION_S).setup for m in spec.models]
    assert sorted(s.reserved_instances for s in setups) == [1, 2]  # 3 instances, equal peaks: largest remainder
    rate = CATALOGUE["g6e.xlarge"].on_demand_usd_per_hour
    assert sum(s.reserved_usd_per_hour for s in setups) == pytest.approx(3 * rate)  # once, not once per model
    assert all(not s.reserved_only for s in setups)  # on-demand beside reserved: no cap


def test_split_follows_peak_gpus_and_adds_up() -> None:
    from gpuscale.guardrails.reservations import split_instances
    assert split_instances(4, [("a", 6.0), ("b", 2.0)]) == {"a": 3, "b": 1}
    assert split_instances(3, [("a", 1.0), ("b", 1.0)]) == {"a": 2, "b": 1}
    assert split_instances(2, [("a", 0.0), ("b", 0.0)]) == {"a": 1, "b": 1}
    assert sum(split_instances(7, [("a", 1.3), ("b", 2.9), ("c", 0.4)]).values()) == 7


def test_a_reserved_only_pool_launches_no_node_beyond_its_reserved_instances() -> None:
    from gpuscale.sim.accounting import EventLog
    from gpuscale.sim.events import Environment
    from gpuscale.sim.provisioner import NodeLayer
    from tests.sim.actors import FakePendingPods, FakeWorkloads, context

    def launched(reserved_only: bool) -> tuple[int, list[str]]:
        ctx = context(gpus_per_node=1, pods_per_replica=1, gpus_per_pod=1, pool_gpu_limit=8, reserved_instances=2,
                      reserved_only=reserved_only)
        env = Environment()
        log = EventLog(env)
        prov = NodeLayer(ctx, env, log)
        prov.connect(FakePendingPods([1] * 5), FakeWorkloads())
        prov.start()
        prov.demand()
        env.run(120.0)
        prov.demand()  # the pods still pending trigger another pass (controller.go L77 requeues them every 10 s)
        env.run(240.0)
        return prov.launched, [e.detail for e in log.events if e.kind == "limit"]

    assert launched(False) == (5, [])  # with on-demand beside reserved, the limit is the pool's
    n, refusals = launched(True)
    assert n == 2  # two into the reservation; the other three stay Pending
    assert refusals and "2 reserved instance(s) are all in use" in refusals[0]
    spec = with_reservations([{"id": "cr-0a", "instance_count": 2}])
    raw = spec.model_dump(mode="json", exclude_unset=True)
    raw["topology"]["gpu_pools"][0]["capacity_types"] = ["reserved"]
    setup = build_scenario("stack", PlatformSpec.model_validate(raw), duration_s=DURATION_S).setup
    assert setup.reserved_only and setup.reserved_instances == 2
