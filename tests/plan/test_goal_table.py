"""The plan's goal table (``bench/goal_table.py`` results) and its per-role policy and tuning lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuscale.cli import app
from gpuscale.plan.context import build_context
from gpuscale.plan.evidence import Evidence
from gpuscale.plan.goal_table import GoalTableError, load_goal_table
from gpuscale.plan.render import render_plan
from gpuscale.sizing import size_platform
from tests.specs import model, small_spec

runner = CliRunner()


def policy(attainment: float, gpu_hours: float, misses: int, goals: dict[str, Any] | None = None, decisions: int = 5) -> dict[str, Any]:
    out: dict[str, Any] = {
        "attainment_servable": attainment, "misses": {"total": misses}, "gpu_hours": gpu_hours,
        "lower_bound_gpu_hours": 2.0, "gpu_hours_vs_lower_bound": round(gpu_hours / 2.0, 3), "decisions": decisions,
        "fixed_allocation": decisions == 0,
    }
    if goals is not None:
        out["goals"] = goals
    return out


def checks(gap: float, ratio: float, pareto: bool, excess: int, duty_excess: int) -> dict[str, Any]:
    vs = "better" if pareto else "gpu-hours"
    return {
        "attainment_gap_points": gap, "attainment_met": gap <= 1.0, "gpu_hours_vs_best_fixed": ratio,
        "gpu_hours_met": ratio <= 1.15, "gpu_hours_vs_lower_bound": 1.5, "pareto_vs": {"dcgm-duty-cycle": vs, "queue-depth": vs},
        "pareto_met": pareto, "excess_misses": excess, "duty_excess_misses": duty_excess, "misses_met": excess <= duty_excess / 10,
    }


def part(untuned: dict[str, Any], unconstrained: bool = True) -> dict[str, Any]:
    """``unconstrained``: the best fixed allocation from one replica is measured (below the warm minimum of 2)."""
    out = {
        "ceiling": policy(0.99, 10.0, 10, decisions=0), "best_fixed": policy(0.985, 4.0, 12, decisions=0),
        "best_fixed_counts": {"aggregated": 2}, "duty_cycle": policy(0.90, 12.0, 100),
        "queue_depth": policy(0.95, 9.0, 50), "untuned": untuned,
    }
    if unconstrained:
        out |= {"best_fixed_unconstrained": policy(0.985, 2.0, 12, decisions=0), "best_fixed_unconstrained_counts": {"aggregated": 1}}
    return out


def cell(stack: str, trace: str, compress: float) -> dict[str, Any]:
    held = {**part(policy(0.98, 4.4, 14, checks(1.0, 1.1, True, 4, 90)), unconstrained=False), "fraction": 0.5, "start_s": 1800.0,
            "requests": 500, "tuned": policy(0.985, 4.2, 15, checks(0.5, 1.05, True, 5, 90), decisions=0)}
    return {
        "stack": stack, "model": "m8b", "trace": trace, "compress": compress, "replay": "exact", "warmup_s": 600.0,
        "requests": 1000, "limits_carry": True,
        "whole": part(policy(0.975, 6.0, 25, checks(1.5, 1.5, False, 15, 90))), "held_out": held,
        "search_evaluations": 7, "seconds": 3.0,
    }


def table(tmp_path: Path, cells: list[dict[str, Any]]) -> Path:
    path = tmp_path / "goal_table.json"
    path.write_text(json.dumps({"cells": cells, "planned_cells": len(cells) + 1, "max_evals": 40, "warmup_s": 600.0,
                                "holdout": 0.5, "seconds": 9.0}))
    return path


def render(goal_path: Path | None, stack: str = "small", **model_extra: Any) -> str:
    spec = small_spec(models=[model(**model_extra)])
    goals = load_goal_table(goal_path) if goal_path is not None else None
    return render_plan(build_context(stack, spec, size_platform(spec)), Evidence(node_manifests=[], simulations=[], goal_table=goals))


def test_the_plan_quotes_the_stacks_rows_with_goals_met_and_missed(tmp_path: Path) -> None:
    text = render(table(tmp_path, [cell("small", "code", 2), cell("other", "conv", 1)]))
    rows = [ln for ln in text.splitlines() if ln.startswith("| small | code |")]
    assert rows == [
        "| small | code | 2 | exact | shipped | 99.0 / 10.0 / 10 | 98.5 / 4.0 / 12 (a2) | 98.5 / 2.0 / 12 (a1) | "
        "90.0 / 12.0 / 100 | 95.0 / 9.0 / 50 | 97.5 / 6.0 / 25 | 1.5; 1.50x; 15 / 90 **agpm** | 98.5 / 4.0 / 12 (a2) | "
        "- | 98.0 / 4.4 / 14 | 98.5 / 4.2 / 15 | 0.5; 1.05x; 5 / 90 **AGPM** (fixed) |"
    ]
    assert "| other |" not in text  # another stack's rows stay in docs/simulator.md
    assert "2 of 3 planned cells" in text  # a partial run says so
    assert ("**untuned, whole trace**: every goal met in 0 of 1 cells (A 0, G 0, P 0, M 0); worst gap to the ceiling "
            "1.5 points, worst GPU-hours 1.50x the best fixed allocation; 0 fixed allocations") in text
    assert "**untuned, held-out part**: every goal met in 1 of 1 cells (A 1, G 1, P 1, M 1)" in text
    assert "**tuned on the fit part, held-out part**: every goal met in 1 of 1 cells" in text
    assert "1 fixed allocation." in text
    # the plan stack's verdict lines, one per judged run, every number from the JSON
    verdicts = text.split("Verdicts on this stack's cells", 1)[1]
    assert "- **small / code x2 exact**:" in verdicts and "other / conv" not in verdicts
    assert ("  - untuned, whole trace: meets no goal; misses A (1.5 points below the ceiling), G (1.50x the best fixed "
            "allocation within the spec's limits), P (not better than dcgm-duty-cycle: gpu-hours; queue-depth: "
            "gpu-hours), M (15 misses above the ceiling's, against the duty-cycle HPA's 90); 5 scaling decisions.") in verdicts
    assert ("  - tuned on the fit part, held-out part: meets A, G, P, M (every goal); a fixed allocation (no scaling "
            "decision).") in verdicts


def test_cells_whose_limits_cannot_carry_the_trace_say_what_they_ran_with(tmp_path: Path) -> None:
    limited = {**cell("small", "long", 1), "limits_carry": False, "limits_message": "m8b: raise the pool to 12 GPUs",
               "limits_raised": ["topology.gpu_pools[0].gpu_limit from 4 to 12 GPUs"]}
    text = render(table(tmp_path, [cell("small", "code", 1), limited]))
    assert "| small | long | 1 | exact | raised |" in text
    assert ("- small / long x1 exact: raised topology.gpu_pools[0].gpu_limit from 4 to 12 GPUs. `gpuscale tune` said: "
            "m8b: raise the pool to 12 GPUs") in text


def test_a_stack_without_rows_shows_every_row_and_says_so(tmp_path: Path) -> None:
    text = render(table(tmp_path, [cell("other", "conv", 1)]))
    assert "none of its cells is this stack's" in text and "| other | conv | 1 |" in text


def test_without_a_goal_table_the_plan_says_how_to_get_one() -> None:
    assert "Not given to this run (`gpuscale plan --goal-table bench/results/goal_table.json`" in render(None)


def test_each_role_line_names_its_policy_and_who_chose_it() -> None:
    untuned = render(None)
    assert "burst mode on; SLO guard on (mean vllm:request_queue_time_seconds" in untuned
    assert "sizing's defaults (not tuned" in untuned
    tuned = render(None, autoscaling={
        "tuned_on": "gpuscale tune --trace t.csv --compress 2 --seed 0",
        "aggregated": {"burst_mode": False, "slo_guard": False, "target_utilisation": 0.55,
                       "warm_schedule": [{"start": "0 8 * * *", "end": "0 18 * * *", "replicas": 2}]},
    })
    assert "load target 55% of a replica; burst mode off; SLO guard off; warm-up 0 8 * * * .. 0 18 * * * UTC: 2" in tuned
    assert "tuned by `gpuscale tune --trace t.csv --compress 2 --seed 0`" in tuned


@pytest.mark.parametrize(("content", "says"), [
    ("{not json", "not JSON"),
    (json.dumps({"cells": [{"stack": "x"}], "planned_cells": 1, "max_evals": 1, "seconds": 1}), "cells.0.model: Field required"),
])
def test_a_bad_goal_table_is_refused_naming_the_problem(tmp_path: Path, content: str, says: str) -> None:
    path = tmp_path / "g.json"
    path.write_text(content)
    with pytest.raises(GoalTableError, match=says):
        load_goal_table(path)
    with pytest.raises(GoalTableError, match="not found"):
        load_goal_table(tmp_path / "missing.json")


def test_plan_with_a_bad_goal_table_exits_2_before_simulating(tmp_path: Path) -> None:
    from tests.conftest import stack_path

    bad = tmp_path / "g.json"
    bad.write_text("[]")
    out = tmp_path / "plan.md"
    result = runner.invoke(app, ["plan", "--stack-file", str(stack_path("dev")), "--goal-table", str(bad), "--out", str(out)])
    assert result.exit_code == 2 and "--goal-table" in result.output and "not a bench/goal_table.py result" in result.output
    assert not out.exists()


def test_a_cell_no_replica_count_carries_is_shown_and_left_out_of_the_counts(tmp_path: Path) -> None:
    hopeless = {**cell("small", "long", 2), "limits_carry": False, "limits_raised": [],
                "limits_message": "m8b: at 8 times those replicas the attainment is still 12.0%"}
    text = render(table(tmp_path, [cell("small", "code", 1), hopeless]))
    assert "| small | long | 2 | exact | none carries |" in text
    assert ("**untuned, whole trace**: every goal met in 0 of 1 cells (A 0, G 0, P 0, M 0); worst gap to the ceiling "
            "1.5 points, worst GPU-hours 1.50x the best fixed allocation; 0 fixed allocations; 1 cell left out (no "
            "replica count carries the trace: \"none carries\").") in text
    assert "- **small / long x2 exact** (no replica count carries the trace: the goals compare nothing here):" in text
    assert "- small / long x2 exact: raised (nothing: no count tried carries it)." in text
