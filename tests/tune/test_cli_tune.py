"""``gpuscale tune`` and ``gpuscale workload`` as a user runs them: exit codes, refusals, nothing half-written."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import yaml

from gpuscale.spec.workload import WorkloadSpec
from tests.cli.runner import FastRunner
from tests.sim.conftest import FIXTURES
from tests.tune.conftest import steady, write_trace

runner = FastRunner()


def tiny_stack(tmp_path: Path) -> Path:
    path = tmp_path / "Pulumi.tiny.yaml"
    shutil.copy(FIXTURES / "tiny-aggregated.yaml", path)
    return path


def test_tune_writes_the_tuned_values_keeping_the_file(tmp_path: Path) -> None:
    stack = tiny_stack(tmp_path)
    before = stack.read_text()
    trace = write_trace(tmp_path / "steady.csv", steady(7.0, 300.0), 2000, 1)
    # the steady load needs a second warm replica from t = 0; the warm minimum is the last coordinate searched
    result = runner.invoke(args=["tune", "--stack-file", str(stack), "--trace", str(trace), "--max-evals", "24"])
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "before (stack as written)" in out and "after (tuned)" in out and "ceiling" in out and "duty-cycle HPA" in out
    assert "simulations" in out and f"wrote the tuned values into {stack}" in out
    after = stack.read_text()
    assert after != before
    assert "tuned_on: gpuscale tune --trace steady.csv --compress 1 --seed 0" in after
    # the lines of the file before are all still there, in order (only tuned keys were added or rewritten)
    tuned_keys = ("min_replicas", "max_replicas", "target_utilisation", "burst_mode", "slo_guard",
                  "scale_down_stabilization_s", "consolidate_after", "warm_schedule")
    kept = [ln for ln in before.splitlines() if not any(f"{k}:" in ln for k in tuned_keys)]
    assert [ln for ln in after.splitlines() if ln in kept] == kept


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    stack = tiny_stack(tmp_path)
    before = stack.read_text()
    trace = write_trace(tmp_path / "steady.csv", steady(3.0, 120.0), 1000, 10)
    result = runner.invoke(args=["tune", "--stack-file", str(stack), "--trace", str(trace), "--max-evals", "2", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "--dry-run: nothing written" in result.output and stack.read_text() == before


def test_limits_that_cannot_carry_the_trace_exit_2_and_write_nothing(tmp_path: Path) -> None:
    stack = tiny_stack(tmp_path)
    before = stack.read_text()
    trace = write_trace(tmp_path / "heavy.csv", steady(30.0, 120.0), 2000, 1)
    result = runner.invoke(args=["tune", "--stack-file", str(stack), "--trace", str(trace)])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "the limits cannot carry the trace" in text and "Raise: " in text and "topology.gpu_pools[0].gpu_limit from 4 to" in text
    assert "nothing written" in text and "Traceback" not in text
    assert stack.read_text() == before


def test_stack_and_stack_file_are_exclusive_and_the_output_is_checked_first(tmp_path: Path) -> None:
    stack = tiny_stack(tmp_path)
    trace = write_trace(tmp_path / "t.csv", steady(1.0, 30.0), 100, 10)
    both = runner.invoke(args=["tune", "--stack", "dev", "--stack-file", str(stack), "--trace", str(trace)])
    assert both.exit_code == 2 and "not both" in both.output
    if os.geteuid() != 0:  # root writes anywhere: the permission check cannot fail
        stack.chmod(0o444)
        ro = runner.invoke(args=["tune", "--stack-file", str(stack), "--trace", str(trace)])
        assert ro.exit_code == 2 and "not writable" in ro.output
    folder = runner.invoke(args=["tune", "--stack-file", str(tmp_path), "--trace", str(trace)])
    assert folder.exit_code == 2 and "Traceback" not in folder.output
    bad = runner.invoke(args=["tune", "--stack-file", str(stack), "--trace", str(tmp_path / "missing.csv")])
    assert bad.exit_code == 2 and "missing.csv" in bad.output and "Traceback" not in bad.output
    model = runner.invoke(args=["tune", "--stack-file", str(stack), "--trace", str(trace), "--model", "nope"])
    assert model.exit_code == 2 and "unknown model 'nope'" in model.output


def test_workload_prints_a_workload_section_the_spec_accepts(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "t.csv", steady(2.0, 1800.0), 1200, 80)
    result = runner.invoke(args=["workload", "--trace", str(trace), "--compress", "2"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("# derived by gpuscale workload from t.csv")
    doc = yaml.safe_load(result.output)
    w = WorkloadSpec.model_validate(doc["workload"])
    assert w.base_rps == w.peak_rps == 4.0  # compressed twice
    assert (w.prompt_tokens.mean, w.output_tokens.mean) == (1200, 80)
    bad = runner.invoke(args=["workload", "--trace", str(tmp_path / "none.csv")])
    assert bad.exit_code == 2 and "none.csv" in bad.output and "Traceback" not in bad.output
