"""``gpuscale simulate``: exit codes, table, JSON and plots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuscale.cli import app
from gpuscale.sim.scenarios import plan_scenarios, scenario_names
from tests.conftest import SHARED, requires_shared, stack_path
from tests.sim.conftest import FIXTURES, write_prefix_trace

runner = CliRunner()
PROD = ["simulate", "--stack-file", str(stack_path("prod"))]
TINY = ["simulate", "--stack-file", str(FIXTURES / "tiny-aggregated.yaml")]


def test_gang_scenario_prints_table_and_writes_json_and_plots(tmp_path: Path) -> None:
    out = tmp_path / "r" / "gang.json"
    result = runner.invoke(app, [*TINY, "--scenario", "gang-7-of-8", "--json", str(out), "--plot", str(tmp_path / "p")])
    assert result.exit_code == 0, result.output
    assert "default-scheduler" in result.output and "kai-gang" in result.output
    assert "score = 100 x slo_attainment" in result.output and "traffic: synthetic" in result.output
    data = json.loads(out.read_text())
    assert data["scenario"] == "gang-7-of-8" and [r["name"] for r in data["results"]] == ["default-scheduler", "kai-gang"]
    for name in ("replicas.png", "queue_depth.png", "ttft.png"):
        assert (tmp_path / "p" / name).read_bytes()[:4] == b"\x89PNG"


def test_lists_come_from_the_registry() -> None:
    every = runner.invoke(app, ["simulate", "--list"])
    plan = runner.invoke(app, ["simulate", "--plan-scenarios"])
    assert every.exit_code == plan.exit_code == 0
    assert every.output.split() == scenario_names() and plan.output.split() == plan_scenarios()


def test_plan_runs_of_a_stack_name_the_model_and_the_file(tmp_path: Path) -> None:
    dev = runner.invoke(app, ["simulate", "--plan-scenarios", "--stack-file", str(stack_path("dev"))])
    assert dev.exit_code == 0, dev.output
    rows = [line.split() for line in dev.output.splitlines()]
    assert [r[0] for r in rows] == plan_scenarios()  # dev's one model may scale to zero: one scale-from-zero run
    assert rows[-1] == ["scale-from-zero", "llama-8b", "scale-from-zero--llama-8b"]
    assert all(r[1] == "llama-8b" and len(r) == 3 for r in rows)
    prod = runner.invoke(app, ["simulate", "--plan-scenarios", "--stack-file", str(stack_path("prod"))])
    assert "scale-from-zero" not in prod.output  # every prod model keeps a warm replica


def test_bucketed_trace_says_how_it_was_replayed(tmp_path: Path) -> None:
    trace = write_prefix_trace(tmp_path / "t.csv", buckets=30)
    for mode in ("batch", "spread"):
        result = runner.invoke(app, [*TINY, "--trace", str(trace), "--replay", mode, "--policies", "gpuscale"])
        assert result.exit_code == 0, result.output
        assert f"arrivals in 3 s buckets replayed {mode}" in result.output
        assert "with prefix ids" in result.output


def test_policies_subset_and_seed() -> None:
    args = [*TINY, "--scenario", "2am-huge-prompt", "--policies", "karpenter+warm-pool", "--seed", "3"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "karpenter+warm-pool" in result.output and "cluster-autoscaler" not in result.output.split("score =")[0]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--scenario", "rush-hour"], "unknown scenario 'rush-hour'; choose one of: stack, "),
        (["--scenario", "gang-7-of-8", "--policies", "gang,yolo"], "choose from: default-scheduler, kai-gang"),
        (["--model", "gpt-5"], "unknown model 'gpt-5'; this stack serves: llama-70b-fp8, search-8b"),
        (["--trace", "/nonexistent/trace.csv"], "cannot read the trace"),
        (["--scenario", "stack", "--trace", "x.csv"], "pass either --scenario or --trace"),
        (["--compress", "0"], "--compress"),
        (["--duration-s", "-5"], "--duration-s"),
        (["--replay", "jitter"], "--replay"),
        (["--spot-interruptions-per-hour", "-1"], "--spot-interruptions-per-hour"),
        (["--warmup-s", "-1"], "--warmup-s"),
        (["--scenario", "peak-hour", "--duration-s", "600", "--warmup-s", "601"], "from 0 to the run's duration"),
    ],
)
def test_bad_input_exits_2_without_traceback(args: list[str], expected: str) -> None:
    result = runner.invoke(app, [*PROD, *args])
    assert result.exit_code == 2, result.output
    assert expected in result.output
    assert "Traceback" not in result.output


def test_unreadable_trace_format_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("when,what\n1,2\n")
    result = runner.invoke(app, [*PROD, "--trace", str(bad)])
    assert result.exit_code == 2 and "unknown header" in result.output


def test_missing_stack_exits_2(tmp_path: Path) -> None:
    result = runner.invoke(app, ["simulate", "--stack-file", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2 and "file not found" in result.output


@requires_shared
def test_trace_replay_from_the_cli(tmp_path: Path) -> None:
    trace = SHARED / "traces" / "azure2023_code_norm.csv"
    args = [*PROD, "--model", "search-8b", "--trace", str(trace), "--compress", "20", "--policies", "gpuscale",
            "--json", str(tmp_path / "t.json")]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "t.json").read_text())
    assert data["parameters"]["compress"] == 20 and data["results"][0]["arrived"] == 8_819  # every request of the trace
    assert data["traffic"]["replay"] == "exact"


def test_warm_start_replay_and_best_fixed_in_the_json(tmp_path: Path) -> None:
    trace = write_prefix_trace(tmp_path / "t.csv", buckets=60)
    out = tmp_path / "r.json"
    args = [*TINY, "--trace", str(trace), "--replay", "batch", "--warmup-s", "60", "--policies", "gpuscale",
            "--json", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "warm start: 60 s of the same traffic" in result.output and "replayed batch" in result.output
    data = json.loads(out.read_text())
    assert data["traffic"]["warmup_s"] == 60.0 and data["traffic"]["replay"] == "batch"
    assert data["traffic"]["warmup_requests"] == 20 * 6  # the first 20 buckets of 6, replayed again, not scored
    names = [r["name"] for r in data["results"]]
    assert names == ["gpuscale", "ceiling", "best-fixed"]
    best = data["results"][2]
    for key in ("slo_attainment_servable", "gpu_hours", "misses", "arrived", "completed"):
        assert key in best
    assert best["arrived"] == 360 and best["bound"] == "best-fixed"
