"""A subquery taken one step on (``promql.OverTime.row`` on ``RollingSamples``, the simulator's scrapes) reads exactly
the points the look-up of every point gives, and the controller decides the same with it as without it."""

from __future__ import annotations

import random

import pytest

from gpuscale.signals import promql
from gpuscale.signals.promql import Matcher
from gpuscale.sim.policies import GpuscalePolicy, HpaRole, ObservedSeries, RoleObservation, build_controller
from gpuscale.spec.platform import PlatformSpec
from tests.sim.test_policies import prod_context


class Plain:
    """The same scrapes without rows or memo: every point of every subquery looked up and evaluated afresh."""

    def __init__(self, s: ObservedSeries) -> None:
        self.s = s

    def gauge_sum(self, metric: str, matchers: tuple[Matcher, ...]) -> float | None:
        return self.s.gauge_sum(metric, matchers)

    def rate_sum(self, metric: str, matchers: tuple[Matcher, ...], window: str) -> float | None:
        return self.s.rate_sum(metric, matchers, window)

    def at(self, ago_s: float) -> Plain | None:
        past = self.s.at(ago_s)
        return Plain(past) if past is not None else None


def subqueries(hpa: HpaRole) -> list[promql.OverTime]:
    out: list[promql.OverTime] = []
    stack = [q for q in hpa.queries if q is not None]
    while stack:
        e = stack.pop()
        if isinstance(e, promql.OverTime):
            out.append(e)
        stack.extend(e.children())
    return out


def times(rng: random.Random, until: float) -> list[float]:
    """Syncs every 15 s on the simulator's half-second clock, with what breaks the step: gaps longer than a subquery's
    step or than what the controller keeps of its past, and instants off the exact grid."""
    out, t = [], 22.5
    while t < until:
        out.append(t)
        r = rng.random()
        if r < 0.01:
            out.append(t + 0.1)  # one sync off the grid
        t += rng.choice([30.0, 45.0, 135.0, 300.0, 900.0, 3700.0]) if r > 0.98 else 15.0
    return out


def prefill_role(spec: PlatformSpec) -> HpaRole:
    hpa = build_controller(GpuscalePolicy(), prod_context(spec)).roles["prefill"]  # type: ignore[attr-defined]
    assert isinstance(hpa, HpaRole) and hpa.keeps_past
    return hpa


def scrape(rng: random.Random) -> RoleObservation:
    rate = rng.choice([0.0, rng.uniform(100.0, 40_000.0)])
    return RoleObservation(
        "prefill", 4, 4, 0.0, rng.uniform(0, 20), 0.0, 0.0, 0.0, prompt_rate=rate, done_rate_5m=rng.uniform(0, 3),
        done_prompt_rate_5m=rng.uniform(0, 9000), prompt_rate_short=rate * rng.uniform(0.5, 1.5),
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rolled_rows_are_the_points_every_look_up_reads(prod_spec: PlatformSpec, seed: int) -> None:
    rng = random.Random(seed)
    hpa = prefill_role(prod_spec)
    nodes = subqueries(hpa)
    assert {n.step for n in nodes} == {"15s", "1m"}  # the dispersion and the burst term
    rolled = read = 0
    for t in times(rng, 4 * 3600.0):
        hpa.decide(t, scrape(rng))
        series = hpa.past[-1][1]
        for node in nodes:
            _, _, step_s, n, reach_s = node._plan
            prev = series.step_back(step_s, n, reach_s)
            if prev is not None and node.render() in prev.subquery_rows:
                rolled += 1
            else:
                read += 1
            assert node.points(series) == node.points(Plain(series))
    assert rolled > 10 * read > 0  # both ways taken, mostly the rolled one


@pytest.mark.parametrize("seed", [3, 4])
def test_the_controller_decides_the_same_without_rolled_rows(
    prod_spec: PlatformSpec, seed: int, monkeypatch: pytest.MonkeyPatch,
) -> None:
    def run() -> list[tuple[int, float]]:
        rng = random.Random(seed)
        hpa = prefill_role(prod_spec)
        out = []
        for t in times(rng, 3 * 3600.0):
            d = hpa.decide(t, scrape(rng))
            q = hpa.queries[0]
            assert q is not None
            out.append((d, promql.evaluate(q, hpa.past[-1][1])))
        return out

    with_rows = run()
    monkeypatch.setattr(ObservedSeries, "step_back", lambda self, step_s, n, reach_s=0.0: None)
    assert run() == with_rows


def test_a_point_between_scrapes_counts_its_offset_from_its_own_instant_and_stale_samples_are_empty() -> None:
    """After a gap in the syncs a subquery point falls between two scrapes: Prometheus reads the latest sample before
    the point, but ``x offset C`` at the point's own time less ``C``, and a sample older than its look-back (5 m) is no
    sample at all."""
    past: list[tuple[float, ObservedSeries]] = []
    past_t: list[float] = []
    for t, queue in ((0.0, 1.0), (60.0, 2.0), (120.0, 3.0), (600.0, 4.0), (660.0, 5.0)):
        obs = RoleObservation("prefill", 1, 1, 0.0, queue, 0.0, 0.0, 0.0)
        past.append((t, ObservedSeries(obs, None, t, past, past_t)))
        past_t.append(t)
    now = past[-1][1]
    queue = promql.Series("vllm:num_requests_waiting", ())
    # 60 s ago is the scrape at 600; 150 s ago (510) falls in the gap: the latest sample, 120, is 390 s old, stale
    assert promql.evaluate(queue, now.at(60.0)) == 4.0  # type: ignore[arg-type]
    assert now.at(150.0) is None
    # 480 s ago (180) is 60 s after the scrape at 120: that scrape answers, and an offset counts back from 180
    point = now.at(480.0)
    assert point is not None and not isinstance(point, ObservedSeries) and point.t == 180.0
    assert promql.evaluate(queue, point) == 3.0
    assert promql.evaluate(promql.shifted(queue, "1m"), point) == 3.0  # 120, not the scrape's own 120 - 60 = 60 (2.0)
    assert promql.evaluate(promql.shifted(queue, "2m"), point) == 2.0  # 60
