"""The CLI as a newcomer meets it: complete help, a version, exit codes, and plan paths that keep the repo clean."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from gpuscale.cli import app
from gpuscale.cli.plan import default_out
from gpuscale.sim.scenarios import build_scenario, scenario_names
from gpuscale.spec.platform import PlatformSpec
from tests.conftest import REPO
from tests.specs import small_raw

runner = CliRunner()
COMMANDS = ("validate", "schema", "synth", "diff", "simulate", "plan", "workload", "tune", "perf")


def help_text(*args: str) -> str:
    result = runner.invoke(app, [*args, "--help"], env={"COLUMNS": "200", "TERMINAL_WIDTH": "200"})
    assert result.exit_code == 0, result.output
    return re.sub(r"[│╭╮╰╯─]", " ", result.output)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_documents_its_exit_codes(command: str) -> None:
    text = " ".join(help_text(command).split())
    assert "Exit codes: 0" in text and "2 invalid input" in text


@pytest.mark.parametrize("command", ["validate", "synth", "simulate", "plan", "tune"])
def test_stack_options_say_they_are_exclusive(command: str) -> None:
    text = " ".join(help_text(command).split())
    assert "Use --stack or --stack-file, not both" in text and "(instead of --stack)" in text


def test_flags_show_no_type_label_and_refuse_a_value() -> None:
    text = help_text("diff")
    assert "<bool>" not in text and "--markdown" in text
    assert "<bool>" not in help_text()
    result = runner.invoke(app, ["diff", "a", "b", "--markdown=yes"])
    assert result.exit_code == 2 and "does not take a value" in result.output


def test_diff_usage_names_its_arguments() -> None:
    assert re.search(r"Usage: gpuscale diff \[OPTIONS\] BASE HEAD", help_text("diff"))


def test_version() -> None:
    from importlib.metadata import version

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"gpuscale {version('gpuscale')}"


def test_plan_help_says_synth_and_sim_dir_reuse_earlier_results() -> None:
    text = " ".join(help_text("plan").split())
    assert "Reuse this earlier `gpuscale synth --out DIR` output" in text
    assert "Reuse earlier `gpuscale simulate --json DIR/<scenario>.json` results" in text


def write_stack(raw: dict[str, object], folder: Path) -> Path:
    path = folder / "Pulumi.t.yaml"
    path.write_text(yaml.safe_dump({"config": {f"gpuscale:{k}": v for k, v in raw.items()}}))
    return path


def test_list_names_every_policy_of_every_scenario_for_the_stack(tmp_path: Path) -> None:
    assert "simulate --list --stack NAME" in " ".join(help_text("simulate").split())
    raw = small_raw()
    spec = PlatformSpec.model_validate(raw)
    listed = runner.invoke(app, ["simulate", "--list", "--stack-file", str(write_stack(raw, tmp_path))])
    assert listed.exit_code == 0, listed.output
    lines = dict(line.split(": ", 1) for line in listed.output.strip().splitlines())
    assert set(lines) == set(scenario_names())
    for scenario in scenario_names():
        if scenario == "trace":
            continue
        names = [v.name for v in build_scenario(scenario, spec, duration_s=600).variants]
        assert lines[scenario] == ", ".join(names)


def test_plans_of_other_stacks_never_overwrite_the_committed_dev_plan() -> None:
    assert default_out("dev", "dev") == Path("outputs/skill-gpu-autoscaler-plan.md")
    assert default_out("prod", "prod") == Path("outputs/prod/skill-gpu-autoscaler-plan.md")
    assert default_out(None, "dev") == Path("outputs/dev/skill-gpu-autoscaler-plan.md")  # --stack-file: not the committed one


def test_make_plan_paths_match_the_cli_and_are_ignored_by_git() -> None:
    makefile = (REPO / "Makefile").read_text()
    assert "outputs/$(STACK)/skill-gpu-autoscaler-plan.md" in makefile and "--out $(PLAN_OUT)" in makefile
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    ignored = ["outputs/prod/skill-gpu-autoscaler-plan.md", "outputs/prod/skill-gpu-autoscaler-plan-images/stack/ttft.png",
               "out/prod/synth/resources.json"]
    kept = ["outputs/skill-gpu-autoscaler-plan.md", "outputs/skill-gpu-autoscaler-plan-images/stack/ttft.png"]
    check = subprocess.run(["git", "check-ignore", "--no-index", *ignored, *kept], cwd=REPO, capture_output=True, text=True)
    assert set(check.stdout.split()) == set(ignored)


def test_a_command_imports_only_what_it_needs() -> None:
    # `gpuscale diff` reads two folders: it must not pay for Pulumi, the simulator or matplotlib on every invocation
    code = (
        "import sys; from gpuscale.cli.main import load_subcommand; load_subcommand('diff'); "
        "print(sorted(m for m in ('pulumi', 'numpy', 'matplotlib', 'gpuscale.sim', 'gpuscale.plan') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_help_lists_every_subcommand() -> None:
    from gpuscale.cli.main import SUBCOMMANDS

    panel = help_text().split(" Commands ")[1].splitlines()
    listed = [m.group(1) for line in panel if (m := re.match(r"^  ([a-z][a-z-]+)  ", line))]
    assert listed == list(SUBCOMMANDS)
