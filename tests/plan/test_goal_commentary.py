"""What ``docs/simulator.md`` says under the goal table is rendered from the JSON: every figure of a reason is the
fixture's (numbers chosen to appear nowhere else), and a re-measure with other numbers rewrites the reason."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from gpuscale.plan.goal_table import load_goal_table
from gpuscale.plan.render import goal_commentary_markdown, goal_table_docs
from tests.plan.test_goal_table import checks, part, policy


def run(attainment: float, gpu_hours: float, queueing: int, cold_start: int, goals: dict[str, Any] | None = None,
        decisions: int = 3, **extra: Any) -> dict[str, Any]:
    out = policy(attainment, gpu_hours, queueing + cold_start, goals, decisions=decisions)
    out["misses"] = {"total": queueing + cold_start, "queueing": queueing, "cold_start": cold_start}
    return out | extra


def one_cell(untuned: dict[str, Any], stack: str = "small", seconds: float = 7.25, simulations: int = 31,
             **cell_extra: Any) -> dict[str, Any]:
    whole = part(untuned) | {"ceiling": run(0.9925, 10.0, 11, 0, decisions=0)}
    held = {**part(run(0.99, 4.4, 14, 0, checks(0.2, 1.1, True, 4, 90))), "fraction": 0.5, "start_s": 1800.0,
            "requests": 500, "tuned": run(0.99, 4.2, 15, 0, checks(0.5, 1.05, True, 5, 90), decisions=0)}
    return {"stack": stack, "model": "m8b", "trace": "code", "compress": 2.0, "replay": "exact", "warmup_s": 600.0,
            "requests": 1000, "limits_carry": True, "whole": whole, "held_out": held, "search_evaluations": 7,
            "simulations": simulations, "seconds": seconds} | cell_extra


def write(tmp_path: Path, cells: list[dict[str, Any]], **top: Any) -> Path:
    path = tmp_path / "goal_table.json"
    path.write_text(json.dumps({"cells": cells, "planned_cells": len(cells), "max_evals": 13, "warmup_s": 600.0,
                                "holdout": 0.5, "seconds": 123.4, "code": "c0ffee", "wall_seconds_last_run": 77.7}
                               | top))
    return path


def misses_m(duty_excess: int, excess: int) -> dict[str, Any]:
    """A run that meets A, G and P and misses M: ``excess`` misses above the ceiling's."""
    goals = checks(0.3, 1.02, True, excess, duty_excess)
    goals["misses_met"] = False
    return run(0.9895, 4.1, 11 + excess, 0, goals)


def test_an_m_miss_says_the_duty_cycle_hpa_is_at_the_ceiling_from_the_numbers(tmp_path: Path) -> None:
    text = goal_commentary_markdown(load_goal_table(write(tmp_path, [one_cell(misses_m(0, 6))])))
    assert ("  * small / code x2 exact: 6 misses above the ceiling's against the duty-cycle HPA's 0: the duty-cycle HPA "
            "misses no more than the ceiling, so 1/10 of its excess is 0.") in text
    assert "missed in 1 of 1; in 1 of these 1 the duty-cycle HPA misses no more than the ceiling." in text
    # re-measured: the duty-cycle HPA now misses 270 above the ceiling, and the reason follows
    again = goal_commentary_markdown(load_goal_table(write(tmp_path, [one_cell(misses_m(270, 43))])))
    assert "  * small / code x2 exact: 43 misses above the ceiling's against the duty-cycle HPA's 270, of which 1/10 is 27.0." in again
    assert "misses no more than the ceiling" not in again


def test_an_a_miss_names_the_gap_the_reference_and_the_kind_of_misses(tmp_path: Path) -> None:
    goals = checks(8.25, 0.87, True, 1695, 4000)
    goals["misses_met"] = True
    text = goal_commentary_markdown(load_goal_table(write(tmp_path, [one_cell(run(0.91, 3.5, 20, 1604, goals))])))
    assert ("  * small / code x2 exact: 8.2 points below the ceiling (91.0 % against 99.2 %) on fewer GPU-hours than "
            "the best fixed allocation (0.87x; a2 reaches 98.5 %); its misses above the ceiling's are mostly cold "
            "starts (replicas started after the requests that needed them came): +1,604 cold-start, +9 queueing.") in text


def test_a_g_miss_of_a_run_that_never_scaled_says_what_it_held(tmp_path: Path) -> None:
    goals = checks(0.0, 1.5, True, 0, 90)
    never = run(0.9925, 6.0, 11, 0, goals, decisions=0, replicas_max={"aggregated": 3}, replicas_mean={"aggregated": 3.0})
    text = goal_commentary_markdown(load_goal_table(write(tmp_path, [one_cell(never)])))
    assert ("  * small / code x2 exact: 1.50x (6.0 GPU-hours against the best fixed allocation's 4.0, a2): it never "
            "scaled, holding a3 throughout.") in text


def test_a_p_miss_against_an_hpa_that_attains_less_is_counted(tmp_path: Path) -> None:
    goals = checks(0.0, 1.0, False, 0, 90)  # worse on GPU-hours than both HPAs
    text = goal_commentary_markdown(load_goal_table(write(tmp_path, [one_cell(run(0.9925, 12.5, 11, 0, goals))])))
    # the fixture's duty-cycle HPA: 90.0 % on 12.0 GPU-hours; queue-depth: 95.0 % on 9.0
    assert ("  * small / code x2 exact: more GPU-hours than the duty-cycle HPA, which attains less (99.2 % on 12.5 "
            "GPU-hours against 90.0 % on 12.0); more GPU-hours than the queue-depth HPA, which attains less (99.2 % on "
            "12.5 GPU-hours against 95.0 % on 9.0).") in text
    assert "missed in 1 of 1; in 1 of these 1, P is missed only on GPU-hours, against an HPA that attains less" in text


def test_the_run_line_and_the_verdicts_come_from_the_json(tmp_path: Path) -> None:
    hopeless = one_cell(misses_m(0, 6), stack="other", seconds=19.5, simulations=44, limits_carry=False,
                        limits_raised=[])
    text = goal_commentary_markdown(load_goal_table(write(tmp_path, [one_cell(misses_m(0, 6)), hopeless])))
    assert text.startswith(
        "Run: `bench/goal_table.py --stacks small,other` (at most 13 `tune` simulations per cell; the run that wrote "
        "the JSON took 78 s of wall time). The 2 cells took 123 s summed and 75 simulations (7.25-19.5 s and 31-44 "
        "simulations a cell; the dearest: other / code x2 exact, 19.5 s). Measured at code hash `c0ffee`")
    assert ("of the 2 cells, 1 is \"none carries\" and left out; of the 1 other every goal is met in 0 (untuned, "
            "whole trace), 1 (untuned, held-out part) and 1 (tuned on the fit part, held-out part).") in text
    assert "* **The 1 cell no replica count carries**: other / code x2 exact (m8b)." in text


def test_the_docs_block_is_the_table_then_the_commentary(tmp_path: Path) -> None:
    table = load_goal_table(write(tmp_path, [one_cell(misses_m(0, 6))]))
    docs = goal_table_docs(table)
    assert docs.index("| stack | trace |") < docs.index("Run: `bench/goal_table.py") < docs.index("<details>")


def test_a_table_from_before_the_counts_still_renders(tmp_path: Path) -> None:
    old = one_cell(misses_m(0, 6))
    del old["simulations"]
    for p in ("whole", "held_out"):
        for r in old[p].values():
            if isinstance(r, dict) and "misses" in r:
                r["misses"] = {"total": r["misses"]["total"]}
    doc = json.loads(write(tmp_path, [copy.deepcopy(old)]).read_text())
    del doc["wall_seconds_last_run"]
    (tmp_path / "goal_table.json").write_text(json.dumps(doc))
    text = goal_commentary_markdown(load_goal_table(tmp_path / "goal_table.json"))
    assert "(at most 13 `tune` simulations per cell). The 1 cell took 123 s summed (7.25-7.25 s a cell;" in text
