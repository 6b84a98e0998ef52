"""``gpuscale synth`` and ``gpuscale diff``: files written twice byte-identical, exit codes 0/1/2, no tracebacks.

The platform program (``gpuscale.program.deploy``) is composed separately; these tests stand in a small program
that reads a few numbers from the spec, so different stacks synthesize differently.
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from gpuscale.cli import app
from gpuscale.problems import Problems
from gpuscale.spec.platform import PlatformSpec
from tests.conftest import stack_path
from tests.synth.programs import Knobs, platform_program

runner = CliRunner()


def fake_deploy(spec: PlatformSpec) -> None:
    pool = spec.topology.gpu_pools[0]
    platform_program(Knobs(
        ami_alias=pool.ami_alias, gpu_limit=pool.gpu_limit, consolidate_after=pool.consolidate_after,
        extra_models=len(spec.models) - 1,
    ))()


@pytest.fixture
def program(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gpuscale.program", types.SimpleNamespace(deploy=fake_deploy))


def synth(stack: str, out: Path) -> None:
    result = runner.invoke(app, ["synth", "--stack-file", str(stack_path(stack)), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert f"synth {stack}:" in result.output


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.usefixtures("program")
def test_synth_writes_resources_and_manifests_twice_byte_identical(tmp_path: Path) -> None:
    synth("prod", tmp_path / "a")
    synth("prod", tmp_path / "b")
    files = tree(tmp_path / "a")
    assert files == tree(tmp_path / "b")
    assert "resources.json" in files and "charts.yaml" in files
    assert any(name.startswith("manifests/") for name in files)
    doc = json.loads(files["resources.json"])
    assert (doc["stack"], doc["region"]) == ("prod", "us-east-1")


@pytest.mark.usefixtures("program")
def test_diff_of_a_synth_against_itself_exits_0(tmp_path: Path) -> None:
    synth("dev", tmp_path / "dev")
    result = runner.invoke(app, ["diff", str(tmp_path / "dev"), str(tmp_path / "dev")])
    assert result.exit_code == 0, result.output
    assert "No differences." in result.output


@pytest.mark.usefixtures("program")
def test_diff_of_dev_and_prod_exits_1_with_a_summary(tmp_path: Path) -> None:
    synth("dev", tmp_path / "dev")
    synth("prod", tmp_path / "prod")
    result = runner.invoke(app, ["diff", str(tmp_path / "dev"), str(tmp_path / "prod")])
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("gpuscale diff: ") and lines[0].endswith("(prod)")
    assert "GPU nodes replaced or disrupted" in result.output
    assert "~ /spec/limits/nvidia.com~1gpu: " in result.output  # a field path, with the pool limits of each stack
    md = tmp_path / "diff.md"
    result = runner.invoke(app, ["diff", str(tmp_path / "dev"), str(tmp_path / "prod"), "--markdown", "--out", str(md)])
    assert result.exit_code == 1
    text = md.read_text()
    assert text.startswith("### gpuscale synth diff: `dev` → `prod`") and len(text) <= 60_000
    result = runner.invoke(app, ["diff", str(tmp_path / "dev"), str(tmp_path / "prod"), "--markdown",
                                 "--max-chars", "2000"])
    assert result.exit_code == 1 and len(result.output) <= 2000


def test_diff_refuses_a_directory_that_is_not_a_synth(tmp_path: Path) -> None:
    # NotASynthDirError is a Refusal: the command's wrapper (cli.main.Command) turns it into exit 2, no traceback
    result = runner.invoke(app, ["diff", str(tmp_path), str(tmp_path)])
    assert result.exit_code == 2
    assert "not a gpuscale synth output (no resources.json)" in result.output
    assert "Traceback" not in result.output


def test_synth_refuses_an_invalid_stack_file(tmp_path: Path) -> None:
    doc = yaml.safe_load(stack_path("prod").read_text())
    doc["config"]["gpuscale:topology"]["gpu_pools"][0]["consolidation_policy"] = "WhenEmptyOrUnderutilized"
    bad = tmp_path / "Pulumi.bad.yaml"
    bad.write_text(yaml.safe_dump(doc))
    result = runner.invoke(app, ["synth", "--stack-file", str(bad), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "gpuscale:topology.gpu_pools[0]" in result.output
    assert not (tmp_path / "out").exists()


def test_synth_turns_program_refusals_into_exit_2(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def refusing(spec: PlatformSpec) -> None:
        raise Problems([("models[0].autoscaling.prefill.max_replicas",
                             "16 replicas x 4 GPUs = 64 GPUs exceed queue chat's gpu_limit 48")])

    monkeypatch.setitem(sys.modules, "gpuscale.program", types.SimpleNamespace(deploy=refusing))
    result = runner.invoke(app, ["synth", "--stack-file", str(stack_path("prod")), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "gpuscale:models[0].autoscaling.prefill.max_replicas: 16 replicas x 4 GPUs" in result.output
    assert "Traceback" not in result.output


def test_synth_without_the_platform_program_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "gpuscale.program", None)
    result = runner.invoke(app, ["synth", "--stack-file", str(stack_path("dev")), "--out", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert "gpuscale.program" in result.output and "Traceback" not in result.output


@pytest.mark.usefixtures("program")
def test_synth_prints_policy_violations(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "gpuscale.program", types.SimpleNamespace(
        deploy=lambda spec: platform_program(Knobs(decode_scheduler="default-scheduler"))()))
    result = runner.invoke(app, ["synth", "--stack-file", str(stack_path("dev")), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0
    assert "policy gang-scheduling-multi-pod-gpu: kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet::" in result.output


def test_component_warnings_reach_the_terminal_as_warning_lines(tmp_path: Path) -> None:
    # dev with the cron schedule instead of the front door scales llama-8b to zero outside its wake schedule:
    # RoleAutoscaler warns through pulumi.log.warn
    doc = yaml.safe_load(stack_path("dev").read_text())
    model = doc["config"]["gpuscale:models"][0]
    model["front_door"] = {"enabled": False}
    model["autoscaling"]["aggregated"]["wake_schedule"] = {"start": "0 8 * * 1-5", "end": "0 19 * * 1-5"}
    stack = tmp_path / "Pulumi.cron.yaml"
    stack.write_text(yaml.safe_dump(doc))
    result = runner.invoke(app, ["synth", "--stack-file", str(stack), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if "scales to zero outside its wake schedule" in line]
    assert lines and all(line.startswith("warning: llama-8b/aggregated ") for line in lines)

