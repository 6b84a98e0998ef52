"""Accounting: every request decided (drain), conservation, misses by cause, attainment over all and servable requests."""

from __future__ import annotations

import numpy as np
import pytest

from gpuscale.sim.replica import servable_mask
from gpuscale.sim.runner import Runner, servable_of
from gpuscale.sim.scenarios import build_scenario
from gpuscale.sim.traffic import HugePrompt, RatePoint, SyntheticTraffic, generate
from gpuscale.spec.platform import PlatformSpec
from gpuscale.spec.workload import TokenDistribution
from tests.sim.conftest import run_scenario


def test_runs_drain_until_every_request_is_decided() -> None:
    res = run_scenario("tiny-aggregated", "peak-hour", 600.0)
    for r in res.results:
        assert r.arrived == r.completed + r.dropped_timeout + r.dropped_rejected + r.lost_in_flight, r.name
        assert r.end_s >= res.duration_s
        assert r.misses.total == r.arrived - r.on_time
    # the busiest policy is still serving when arrivals stop: the drain decides what is left instead of dropping it
    assert max(r.end_s for r in res.results) > res.duration_s + 1.0


def test_gpu_time_is_charged_to_the_end_of_the_drain() -> None:
    res = run_scenario("tiny-aggregated", "stack", 600.0)
    ceiling = res.ceiling
    assert ceiling is not None
    gpus = sum(ceiling.replicas_max.values())  # single-GPU replicas, every one on its own warm node
    assert ceiling.gpu_hours == pytest.approx(gpus * ceiling.end_s / 3600.0, abs=1e-4)
    for r in res.results:
        assert r.idle_gpu_minutes.total + r.serving_gpu_minutes == pytest.approx(r.gpu_hours * 60, rel=1e-3, abs=0.05)


def huge_requests_scenario(spec: PlatformSpec):  # type: ignore[no-untyped-def]
    """The tiny stack at 1 req/s plus one request longer than the context and one that no replica serves in time."""
    sc = build_scenario("stack", spec, duration_s=300.0)
    traffic = SyntheticTraffic(
        profile=[RatePoint(t_s=0, rps=1.0)], prompt_tokens=TokenDistribution(mean=300, p99=600),
        output_tokens=TokenDistribution(mean=40, p99=100),
        huge_prompts=[
            HugePrompt(at_s=30.0, prompt_tokens=20_000, output_tokens=10, label="too-long"),
            HugePrompt(at_s=60.0, prompt_tokens=14_000, output_tokens=2_000, label="slow-decode"),
        ],
    )
    return sc.model_copy(update={"traffic": traffic})


def test_misses_are_broken_down_by_cause(tiny: PlatformSpec) -> None:
    sc = huge_requests_scenario(tiny)
    # an ITL target no replica meets for a long decode: the slow request is infeasible even on an idle replica
    sc = sc.model_copy(update={"setup": sc.setup.model_copy(update={"itl_slo_s": 0.030})})
    res = Runner(sc, seed=1, policies=["gpuscale"]).run()
    r = res.result("gpuscale")
    assert r.tracked_request("too-long").outcome == "rejected"
    assert r.misses.rejected == r.dropped_rejected == 1
    arrivals = generate(sc.traffic, 1, sc.setup.duration_s)
    servable = servable_of(sc.setup, arrivals)
    assert r.servable == int(servable.sum()) < r.arrived - 1
    assert r.misses.infeasible == r.arrived - r.servable - 1
    assert r.slo_attainment_servable > r.slo_attainment


def test_servable_mask_matches_the_idle_replica(tiny: PlatformSpec) -> None:
    sc = build_scenario("stack", tiny, duration_s=60.0)
    m = sc.setup.replica
    prompt = np.array([500, 14_000, 16_000, 200])
    output = np.array([10, 10, 1_000, 10])
    mask = servable_mask(m, prompt, output, 2.0, 0.08, disaggregated=False, transfer_bytes_per_s=1e12)
    assert mask.tolist() == [True, m.idle_prefill_s(14_000) <= 2.0, False, True]  # 17k tokens > the 16k context


def test_cold_start_misses_are_told_apart_from_queueing(tiny: PlatformSpec) -> None:
    # start from zero replicas: the first requests wait for a node and a replica
    sc = build_scenario("stack", tiny, duration_s=600.0)
    sc = sc.model_copy(update={"variants": [v.model_copy(update={"initial_replicas": {"aggregated": 0}}) for v in sc.variants]})
    res = Runner(sc, seed=0, policies=["queue-depth"]).run()
    r = res.result("queue-depth")
    assert r.misses.cold_start > 0
    first_ready = next(e.t_s for e in r.events if e.kind == "ready")
    early = sum(a for t, a in zip(r.series.t_s, r.series.arrived, strict=True) if t < first_ready - 60.0)
    assert r.misses.cold_start >= early > 0
