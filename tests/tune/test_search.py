"""The search on objectives whose optimum is known."""

from __future__ import annotations

from gpuscale.tune.params import RoleParams, TuneParams
from gpuscale.tune.search import Coordinate, Score, coordinates, search


def start() -> TuneParams:
    role = RoleParams(target_utilisation=0.7, burst_mode=True, slo_guard=True, min_replicas=1, max_replicas=8,
                      scale_down_stabilization_s=420)
    return TuneParams(roles={"prefill": role, "decode": role}, consolidate_after="1h")


def objective(p: TuneParams) -> Score | None:
    """Meets the goal iff prefill holds >= 0.5 headroom-utilisation... a known optimum: prefill util 0.5 and 2 warm
    decode replicas; GPU-hours grow with headroom and warm replicas; a minimum above 4 is 'refused by the spec'."""
    pre, dec = p.roles["prefill"], p.roles["decode"]
    if dec.min_replicas > 4:
        return None
    util = 0.6 if pre.target_utilisation is None else pre.target_utilisation  # the SLO-derived target acts as 0.6 here
    met = util <= 0.5 and dec.min_replicas >= 2
    gpu_h = 10 / util + 3 * dec.min_replicas + 2 * pre.min_replicas + (0 if dec.burst_mode else 1)
    attainment = 0.9 + 0.1 * met - 0.01 * util
    return Score(met, attainment, gpu_h)


def test_coordinate_descent_finds_the_known_optimum() -> None:
    coords = coordinates(start(), keda=True, consolidate_after=["1h"], min_floor={"prefill": 1, "decode": 1})
    seen: list[int] = []
    res = search(start(), objective, coords, max_evals=200, progress=lambda done, total: seen.append(done))
    best = res.best
    assert res.best_score.met and not res.start_score.met
    assert best.roles["prefill"].target_utilisation == 0.5  # the highest utilisation that meets the goal
    assert None in next(c.candidates for c in coords if c.name == "target_utilisation")  # the derived target is tried
    assert best.roles["decode"].min_replicas == 2 and best.roles["prefill"].min_replicas == 1
    assert best.roles["decode"].burst_mode is True
    assert seen == list(range(1, res.evaluations + 1))  # one progress tick per simulation
    assert res.history  # every move is recorded


def test_the_search_is_deterministic_and_keeps_its_budget() -> None:
    coords = coordinates(start(), keda=True, consolidate_after=["1h", "2h"])
    a = search(start(), objective, coords, max_evals=7)
    b = search(start(), objective, coords, max_evals=7)
    assert a.evaluations == b.evaluations == 7
    assert a.best == b.best and a.best_score == b.best_score


def test_refused_points_cost_no_simulation() -> None:
    calls = []

    def refuse_all_but_start(p: TuneParams) -> Score | None:
        calls.append(p)
        return Score(False, 0.5, 1.0) if p == start() else None

    res = search(start(), refuse_all_but_start, [Coordinate("prefill", "min_replicas", (2, 3, 4))], max_evals=2)
    assert res.evaluations == 1 and len(calls) == 4 and res.best == start()


def test_a_point_that_meets_the_goal_beats_any_that_does_not() -> None:
    assert Score(True, 0.90, 100.0).better_than(Score(False, 0.99, 1.0))
    assert Score(True, 0.90, 10.0).better_than(Score(True, 0.99, 11.0))
    assert Score(False, 0.95, 10.0).better_than(Score(False, 0.94, 1.0))
