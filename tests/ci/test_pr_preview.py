"""The PR preview's logic (.github/scripts/pr-preview.sh) under `bash -e`, GitHub's default shell, and the workflow
under actionlint."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO
from tests.specs import small_raw

SCRIPT = REPO / ".github" / "scripts" / "pr-preview.sh"
WORKFLOW = REPO / ".github" / "workflows" / "pr-preview.yml"
GPUSCALE = Path(sys.executable).parent / "gpuscale"


def _stack(folder: Path, name: str, raw: dict[str, Any]) -> None:
    (folder / "stacks").mkdir(parents=True, exist_ok=True)
    config = {f"gpuscale:{k}": v for k, v in raw.items()}
    (folder / "stacks" / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump({"config": config}, sort_keys=False))


def _preview(tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GPUSCALE_HEAD": str(GPUSCALE), "GPUSCALE_BASE": str(GPUSCALE), "BASE_REF": "main"}
    return subprocess.run(["bash", "-e", str(SCRIPT), str(tmp / "base"), str(tmp / "head"), str(tmp / "out")],
                          capture_output=True, text=True, env=env, timeout=300, check=False)


def test_stacks_that_differ_or_are_new_make_a_comment_and_do_not_fail_the_step(tmp_path: Path) -> None:
    # a stack that differs makes `gpuscale diff` exit 1, the case `bash -e` would turn into a failed step; an equal
    # stack takes the same path with exit 0 (the diff's own tests cover "No differences")
    same, changed = small_raw(), small_raw()
    changed["topology"]["gpu_pools"][0]["gpu_limit"] = 8
    changed["teams"] = [{"name": "dept", "gpu_quota": 8, "gpu_limit": 8,
                         "children": [{"name": "team", "gpu_quota": 8, "gpu_limit": 8}]}]
    _stack(tmp_path / "base", "changed", same)
    _stack(tmp_path / "head", "changed", changed)
    _stack(tmp_path / "head", "added", same)
    done = _preview(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    comment = (tmp_path / "out" / "comment.md").read_text()
    assert comment.startswith("<!-- gpuscale-pr-preview -->\n## gpuscale offline preview")
    sections = {part.split("`")[1]: part for part in comment.split("\n### ")[1:]}
    assert set(sections) == {"added", "changed"}
    assert "nothing to compare against" in sections["added"]
    assert "~ /spec/resources/gpu/limit: 16 -> 8" in sections["changed"]  # the team queue, as KAI will see it
    assert (tmp_path / "out" / "synth" / "head" / "changed" / "resources.json").is_file()
    assert (tmp_path / "out" / "diff" / "changed.md").is_file() and not (tmp_path / "out" / "diff" / "added.md").exists()


def test_a_stack_that_does_not_synthesize_fails_the_step_with_its_error(tmp_path: Path) -> None:
    broken = small_raw()
    broken["models"][0]["queue"] = "nobody"
    _stack(tmp_path / "base", "s", small_raw())
    _stack(tmp_path / "head", "s", broken)
    done = _preview(tmp_path)
    assert done.returncode == 1
    comment = (tmp_path / "out" / "comment.md").read_text()
    assert "### `s`: the PR's synth failed" in comment
    assert "gpuscale:models[0].queue" in comment


def _actionlint() -> str | None:
    return shutil.which("actionlint") or next(
        (str(p) for p in [REPO / ".tools" / "actionlint"] if p.is_file()), None)


@pytest.mark.skipif(_actionlint() is None, reason="actionlint is not installed (make .tools/actionlint builds it with Go)")
def test_the_workflow_passes_actionlint() -> None:
    done = subprocess.run([_actionlint() or "", str(WORKFLOW)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_workflow_runs_the_tested_script_and_upserts_new_stacks() -> None:
    doc = yaml.safe_load(WORKFLOW.read_text())
    steps = doc["jobs"]["synth-diff"]["steps"]
    (synth,) = [s for s in steps if s.get("id") == "synth"]
    assert "head/.github/scripts/pr-preview.sh base head preview" in synth["run"]
    (preview,) = [s for s in doc["jobs"]["pulumi-preview"]["steps"] if str(s.get("uses", "")).startswith("pulumi/actions")]
    assert preview["with"]["upsert"] is True


def _workflow_step(step_id: str) -> str:
    doc = yaml.safe_load(WORKFLOW.read_text())
    (step,) = [s for s in doc["jobs"]["synth-diff"]["steps"] if s.get("id") == step_id]
    assert "shell" not in step  # GitHub runs it as `bash -e {0}`
    return str(step["run"])


def test_a_broken_head_stack_still_posts_a_comment_naming_it_and_fails_the_job(tmp_path: Path) -> None:
    """The synth step exactly as GitHub runs it (``bash -e`` on its ``run:`` block, in the workspace holding the
    ``base`` and ``head`` checkouts), then what the next steps look at: ``comment.md`` (the comment step runs when it
    exists), the job summary, and the step's outcome (the last step fails the job on it)."""
    broken = small_raw()
    broken["models"][0]["queue"] = "nobody"
    _stack(tmp_path / "base", "dev", small_raw())
    _stack(tmp_path / "base", "prod", small_raw())
    _stack(tmp_path / "head", "dev", small_raw())
    _stack(tmp_path / "head", "prod", broken)
    scripts = tmp_path / "head" / ".github" / "scripts"
    scripts.mkdir(parents=True)
    shutil.copy(SCRIPT, scripts / SCRIPT.name)
    (tmp_path / "step.sh").write_text(_workflow_step("synth"))
    summary = tmp_path / "summary.md"
    env = {**os.environ, "GPUSCALE_HEAD": str(GPUSCALE), "GPUSCALE_BASE": str(GPUSCALE), "BASE_REF": "main",
           "GITHUB_STEP_SUMMARY": str(summary)}
    done = subprocess.run(["bash", "-e", "step.sh"], cwd=tmp_path, capture_output=True, text=True, env=env,
                          timeout=300, check=False)
    assert done.returncode != 0  # the step fails, so the job fails
    comment = (tmp_path / "comment.md").read_text()
    assert summary.read_text() == comment
    head = comment.split("\n### ")[0]
    assert "**This PR breaks 1 stack: `prod`**" in head  # said before any diff
    assert "### `prod`: the PR's synth failed" in comment
    assert "gpuscale:models[0].queue: queue 'nobody' is not in teams" in comment  # and why
    assert "### `dev`" in comment
