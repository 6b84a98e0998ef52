"""Warm starts (``--warmup-s``): the same traffic's start replayed first and not scored; and bucketed arrivals
detected through a logger's jitter, on a synthetic trace and on the shared Azure traces."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpuscale.sim import traffic
from gpuscale.sim.runner import Runner
from gpuscale.sim.scenarios import ScenarioError, build_scenario
from gpuscale.sim.traffic import TraceTraffic, arrival_granularity_s, generate, load_trace, scored_part, with_warmup
from tests.conftest import SHARED
from tests.sim.conftest import spec_of

TRACES = SHARED / "traces"


def jittered_trace(path: Path, *, buckets: int = 200, per_bucket: int = 4, bucket_s: float = 3.0,
                   jitter_s: float = 0.006) -> Path:
    """Arrivals logged in ``bucket_s`` buckets, each timestamp up to ``jitter_s`` late (a logger's few ms)."""
    rng = np.random.default_rng(5)
    rows = ["arrival_s,input_tokens,output_tokens"]
    for k in range(buckets):
        for t in np.sort(bucket_s * k + rng.uniform(0.0, jitter_s, per_bucket)):
            rows.append(f"{t:.6f},{rng.integers(200, 3000)},{rng.integers(20, 200)}")
    path.write_text("\n".join(rows) + "\n")
    return path


def test_jittered_buckets_are_buckets_and_spread_spreads_them(tmp_path: Path) -> None:
    path = jittered_trace(tmp_path / "j.csv")
    a = load_trace(path)
    assert len(np.unique(a.arrival_s)) == len(a)  # no two timestamps equal: the old test called this exact
    assert arrival_granularity_s(a.arrival_s) == 3.0
    batch = generate(TraceTraffic(path=path, replay="batch"), seed=0, duration_s=None)
    spread = generate(TraceTraffic(path=path, replay="spread"), seed=0, duration_s=None)
    assert np.array_equal(batch.arrival_s, a.arrival_s)  # batch: as recorded, a bucket within 6 ms
    assert np.ptp(spread.arrival_s[:4]) > 0.1  # spread: across the bucket
    bucket = np.floor(np.sort(a.arrival_s) / 3.0 + 0.01)
    assert np.all(np.floor(spread.arrival_s / 3.0) >= bucket.min()) and spread.arrival_s.max() < 600.0
    # every bucket keeps its requests: the spread times fall in the recorded buckets, four each
    assert np.array_equal(np.bincount(np.floor(spread.arrival_s / 3.0).astype(int)), np.full(200, 4))


@pytest.mark.parametrize("jitter_s", [0.0, 0.002, 0.015])
def test_grid_fitted_through_empty_buckets_and_jitter(jitter_s: float) -> None:
    rng = np.random.default_rng(1)
    used = np.sort(rng.choice(1200, 300, replace=False))  # most buckets empty: gaps of several steps
    t = np.sort(np.repeat(used * 2.5, 3) + rng.uniform(0.0, jitter_s, 900) if jitter_s else np.repeat(used * 2.5, 3))
    assert arrival_granularity_s(t - t[0]) == 2.5


def test_exact_arrivals_are_not_buckets() -> None:
    rng = np.random.default_rng(2)
    dense = np.sort(rng.uniform(0.0, 3600.0, 50_000))  # ~14/s: many chained within the jitter, on no grid
    assert arrival_granularity_s(dense - dense[0]) is None
    wide = np.array([0.0, 0.0, 3.0, 3.0, 6.04, 9.0])  # one bucket 40 ms off the grid: not a grid
    assert arrival_granularity_s(wide) is None


@pytest.mark.skipif(not TRACES.is_dir(), reason=f"shared traces {TRACES} are absent (a clone outside the workplace)")
def test_shared_traces_exact_and_their_bucketed_logs_detected(tmp_path: Path) -> None:
    for name in ("azure2023_code_norm.csv", "azure2023_conv_norm.csv"):
        a = load_trace(TRACES / name)
        assert arrival_granularity_s(a.arrival_s) is None, name  # sub-ms timestamps: replayed exactly
        # the same arrivals as a 3 s bucket log with up to 5 ms of jitter
        logged = np.floor(a.arrival_s / 3.0) * 3.0 + np.random.default_rng(3).uniform(0.0, 0.005, len(a))
        rows = ["arrival_s,input_tokens,output_tokens", *(
            f"{t:.6f},{p},{o}" for t, p, o in sorted(zip(logged, a.prompt_tokens, a.output_tokens, strict=True)))]
        path = tmp_path / name
        path.write_text("\n".join(rows) + "\n")
        assert arrival_granularity_s(load_trace(path).arrival_s) == 3.0, name
        spread = generate(TraceTraffic(path=path, replay="spread"), seed=0, duration_s=None)
        assert len(np.unique(np.round(spread.arrival_s, 3))) > 0.9 * len(a)  # no longer a batch per bucket


def test_warmup_prepends_the_start_and_scored_part_inverts_it() -> None:
    a = traffic.Arrivals(np.array([0.0, 1.0, 5.0, 9.0]), np.array([10, 11, 12, 13]), np.array([1, 2, 3, 4]),
                         labels={3: "last"}, timeouts_s={3: 30.0})
    w, n = with_warmup(a, 6.0)
    assert n == 3 and list(w.arrival_s) == [0.0, 1.0, 5.0, 6.0, 7.0, 11.0, 15.0]
    assert list(w.prompt_tokens) == [10, 11, 12, 10, 11, 12, 13] and w.labels == {6: "last"} and w.timeouts_s == {6: 30.0}
    back = scored_part(w, n, 6.0)
    assert np.array_equal(back.arrival_s, a.arrival_s) and back.labels == a.labels and back.timeouts_s == a.timeouts_s


def test_warm_start_scores_the_same_requests_after_the_warmup() -> None:
    sc = build_scenario("stack", spec_of("tiny-aggregated"), duration_s=600.0)
    cold = Runner(sc, seed=0).run()
    warm = Runner(sc, seed=0, warmup_s=300.0).run()
    assert warm.traffic.warmup_s == 300.0 and cold.traffic.warmup_s == 0.0
    scored = generate(sc.traffic, 0, sc.setup.duration_s)
    assert warm.traffic.requests == cold.traffic.requests == len(scored)
    assert warm.traffic.warmup_requests == int(np.count_nonzero(scored.arrival_s < 300.0))
    for c, w in zip(cold.results, warm.results, strict=True):
        assert w.arrived == c.arrived and w.series.t_s[0] == 0.0 and w.end_s < 700.0  # the scored window's clock
    # a constant allocation costs the same GPU time in either window; the duty-cycle HPA scaled up in the warm-up, so
    # it enters the scored window with its nodes and launches fewer there
    assert warm.result("ceiling").gpu_hours == pytest.approx(cold.result("ceiling").gpu_hours, rel=1e-3)
    hpa_cold, hpa_warm = cold.result("dcgm-duty-cycle"), warm.result("dcgm-duty-cycle")
    assert hpa_warm.nodes.launched < hpa_cold.nodes.launched
    assert hpa_warm.scale_events < hpa_cold.scale_events


def test_warmup_longer_than_the_run_is_refused() -> None:
    sc = build_scenario("stack", spec_of("tiny-aggregated"), duration_s=600.0)
    with pytest.raises(ScenarioError, match="from 0 to the run's duration"):
        Runner(sc, warmup_s=601.0)
