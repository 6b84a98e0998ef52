"""Replay of the real Azure 2023 conversation trace, compressed x5 (27 req/s) into a scale-out test."""

from __future__ import annotations

import pytest

from gpuscale.sim.runner import Runner
from gpuscale.sim.scenarios import build_scenario
from gpuscale.sim.traffic import TraceTraffic
from gpuscale.spec.platform import PlatformSpec
from tests.conftest import SHARED, requires_shared


@requires_shared
@pytest.mark.slow
def test_conv_trace_replay_compressed(prod_spec: PlatformSpec) -> None:
    trace = TraceTraffic(path=SHARED / "traces" / "azure2023_conv_norm.csv", compress=5)
    sc = build_scenario("trace", prod_spec, trace=trace)
    assert sc.setup.duration_s == pytest.approx(700.34, abs=0.01)
    res = Runner(sc, seed=0, policies=["gpuscale", "oracle"]).run()
    assert res.parameters == {"trace": "azure2023_conv_norm.csv", "compress": 5.0}
    for r in res.results:
        assert r.arrived == 19_365  # every request but the last, which lands exactly at the end
        assert r.arrived == r.completed + r.dropped + r.lost_in_flight + r.still_queued
        assert r.completed > 0.95 * r.arrived
    assert res.result("oracle").ttft_p50_s < res.slo.ttft_p99_s  # type: ignore[operator]
