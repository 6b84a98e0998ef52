"""Tuned values written into a stack file: comments, order and layout kept; only the tuned keys change."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from gpuscale.spec.model import WakeSchedule
from gpuscale.stackfile import StackConfigError, load_stack_file
from gpuscale.tune.params import current_params
from gpuscale.tune.writeback import WritebackError, check_text, updated_text
from tests.conftest import stack_path


def changed_lines(before: str, after: str) -> tuple[list[str], list[str]]:
    diff = list(difflib.ndiff(before.splitlines(), after.splitlines()))
    return [d[2:] for d in diff if d.startswith("- ")], [d[2:] for d in diff if d.startswith("+ ")]


def test_prod_keeps_every_comment_and_line_and_adds_the_tuned_keys(tmp_path: Path) -> None:
    path = stack_path("prod")
    text = path.read_text()
    spec = load_stack_file(path)
    params = current_params(spec, "llama-70b-fp8").replace_role("prefill", target_utilisation=0.5, min_replicas=3)
    params = params.replace_role("decode", warm_schedule=[WakeSchedule(start="53 8 * * *", end="0 17 * * *", replicas=3)])
    new = updated_text(text, "llama-70b-fp8", params, keda=True, tuned_on="gpuscale tune --trace t.csv --compress 5 --seed 0")
    removed, added = changed_lines(text, new)
    assert removed == ["          min_replicas: 2"]  # the prefill minimum, rewritten in place
    assert "          min_replicas: 3" in added
    assert "          target_utilisation: 0.5" in added
    assert "          warm_schedule:" in added
    assert '            - {timezone: UTC, start: 53 8 * * *, end: 0 17 * * *, replicas: 3}' in added
    assert "        tuned_on: gpuscale tune --trace t.csv --compress 5 --seed 0" in added
    # every comment of the file survives, in order
    assert [ln for ln in new.splitlines() if ln.lstrip().startswith("#")] == [
        ln for ln in text.splitlines() if ln.lstrip().startswith("#")
    ]
    out = tmp_path / "Pulumi.prod.yaml"
    out.write_text(new)
    check_text(new, out)
    tuned = load_stack_file(out).models[0].autoscaling
    assert tuned.prefill.target_utilisation == 0.5 and tuned.prefill.min_replicas == 3
    assert tuned.decode.warm_schedule[0].replicas == 3 and tuned.tuned_on is not None


def test_dev_comment_inside_the_role_stays_where_it_was() -> None:
    path = stack_path("dev")
    text = path.read_text()
    params = current_params(load_stack_file(path), "llama-8b").replace_role("aggregated", target_utilisation=0.5)
    new = updated_text(text, "llama-8b", params, keda=True, tuned_on="x")
    lines = new.splitlines()
    i = next(k for k, ln in enumerate(lines) if "# the front door (on by default" in ln)
    assert lines[i - 1].strip() == "max_replicas: 4" and lines[i + 2].strip().startswith("# wake_schedule:")
    assert lines[i + 3].strip() == "target_utilisation: 0.5"  # the tuned keys follow the role's comment block
    removed, _ = changed_lines(text, new)
    assert removed == []


def test_a_stack_without_the_model_or_pool_is_refused() -> None:
    path = stack_path("dev")
    params = current_params(load_stack_file(path), "llama-8b")
    with pytest.raises(WritebackError, match="no model named 'other'"):
        updated_text(path.read_text(), "other", params, keda=True, tuned_on="x")
    with pytest.raises(WritebackError, match="no 'config:' mapping"):
        updated_text("just: text\n", "llama-8b", params, keda=True, tuned_on="x")


def test_text_that_would_not_validate_is_refused(tmp_path: Path) -> None:
    path = stack_path("dev")
    params = current_params(load_stack_file(path), "llama-8b").replace_role("aggregated", min_replicas=9)
    new = updated_text(path.read_text(), "llama-8b", params, keda=True, tuned_on="x")  # min 9 > max 4
    with pytest.raises(StackConfigError, match="min_replicas"):
        check_text(new, tmp_path / "Pulumi.dev.yaml")
