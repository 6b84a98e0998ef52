"""Tuned values written into a stack file: comments, order and layout kept; only the tuned keys change."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from gpuscale.spec.model import WakeSchedule
from gpuscale.stackfile import StackConfigError, load_stack_file
from gpuscale.tune.params import TuneParams, current_params
from gpuscale.tune.writeback import WritebackError, check_text, updated, updated_text
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


def _changed_lines(before: bytes, after: bytes) -> list[str]:
    """Lines removed or added (keeping their line endings), as text."""
    a = before.decode("utf-8-sig").splitlines(keepends=True)
    b = after.decode("utf-8-sig").splitlines(keepends=True)
    return [d[2:] for d in difflib.ndiff(a, b) if d[:2] in ("- ", "+ ")]


def _dev_params(**changes: object) -> TuneParams:
    return current_params(load_stack_file(stack_path("dev")), "llama-8b").replace_role("aggregated", **changes)


TUNED_KEYS = ("min_replicas", "max_replicas", "target_utilisation", "burst_mode", "slo_guard",
              "scale_down_stabilization_s", "warm_schedule", "tuned_on", "consolidate_after", "- {timezone")


def test_every_byte_outside_the_tuned_values_is_kept_crlf_and_bom_included() -> None:
    text = stack_path("prod").read_text()
    data = b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode()
    params = current_params(load_stack_file(stack_path("prod")), "llama-70b-fp8").replace_role("prefill", min_replicas=3)
    out = updated(data, "llama-70b-fp8", params, keda=True, tuned_on="x").data
    assert out.startswith(b"\xef\xbb\xbf")
    assert out.count(b"\n") == out.count(b"\r\n")
    changed = _changed_lines(data, out)
    assert changed and all(any(k in ln for k in TUNED_KEYS) for ln in changed), changed
    # the lines before the first tuned one are the original bytes, byte for byte
    head = data[: data.index(b"        prefill:")]
    assert out.startswith(head)


def test_a_flow_style_role_takes_the_new_keys_inside_its_braces() -> None:
    text = stack_path("dev").read_text().replace(
        "        aggregated:\n          min_replicas: 0\n          max_replicas: 4\n",
        "        aggregated: {min_replicas: 0, max_replicas: 4}  # flow\n",
    )
    new = updated_text(text, "llama-8b", _dev_params(target_utilisation=0.5), keda=True, tuned_on="x")
    line = next(ln for ln in new.splitlines() if ln.strip().startswith("aggregated:"))
    assert line.startswith("        aggregated: {min_replicas: 0, max_replicas: 4, target_utilisation: 0.5")
    assert line.endswith("}  # flow")


def test_a_model_without_autoscaling_gets_a_new_block() -> None:
    text = stack_path("dev").read_text()
    block = "      autoscaling:\n        backend: keda\n        aggregated:\n          min_replicas: 0\n          max_replicas: 4\n"
    start = text.index(block)
    end = text.index("      front_door:")
    bare = text[:start] + text[end:]
    new = updated_text(bare, "llama-8b", _dev_params(min_replicas=1), keda=True, tuned_on="t")
    # the SLO-derived target (None) writes no utilisation; a chosen one is written
    assert "      node_pool: l40s-spot\n      autoscaling:\n        aggregated:\n          burst_mode: " in new
    assert "target_utilisation" not in new
    stated = updated_text(bare, "llama-8b", _dev_params(min_replicas=1, target_utilisation=0.5), keda=True, tuned_on="t")
    assert "      autoscaling:\n        aggregated:\n          target_utilisation: 0.5\n" in stated
    assert new.endswith("          slo_guard: true\n        tuned_on: t\n")
    assert _changed_lines(bare.encode(), new.encode())[0] == "      autoscaling:\n"


def test_a_warm_schedule_no_longer_chosen_is_removed_with_its_lines() -> None:
    path = stack_path("dev")
    windows = [WakeSchedule(start="0 8 * * *", end="0 17 * * *", replicas=2)]
    with_windows = updated_text(path.read_text(), "llama-8b", _dev_params(warm_schedule=windows), keda=True, tuned_on="a")
    assert "          warm_schedule:\n            - {timezone: UTC, start: 0 8 * * *, end: 0 17 * * *, replicas: 2}\n" in with_windows
    without = updated_text(with_windows, "llama-8b", _dev_params(), keda=True, tuned_on="b")
    assert "warm_schedule" not in without.replace("# wake_schedule", "")
    assert _changed_lines(with_windows.encode(), without.encode()) == [
        "          warm_schedule:\n", "            - {timezone: UTC, start: 0 8 * * *, end: 0 17 * * *, replicas: 2}\n",
        "        tuned_on: a\n", "        tuned_on: b\n",
    ]


def test_an_anchor_our_value_carries_for_another_place_is_refused() -> None:
    text = stack_path("dev").read_text().replace(
        "        gpu_limit: 4\n        # SOCI", "        consolidate_after: &ca 1h\n        drift_window: {duration: *ca}\n"
        "        gpu_limit: 4\n        # SOCI")
    params = _dev_params().model_copy(update={"consolidate_after": "2h"})
    with pytest.raises(WritebackError, match=r"topology.gpu_pools\[0\].consolidate_after carries an anchor that "
                       r"topology.gpu_pools\[0\].drift_window.duration refers to"):
        updated_text(text, "llama-8b", params, keda=True, tuned_on="x")


def test_a_role_that_comes_from_a_merge_key_is_refused_and_a_merged_scalar_is_overridden_here() -> None:
    text = stack_path("dev").read_text()
    defaults = "  gpuscale:environment:"
    with_defaults = text.replace(
        "        aggregated:\n          min_replicas: 0\n          max_replicas: 4\n",
        "        aggregated:\n          <<: {min_replicas: 0}\n          max_replicas: 4\n",
    )
    new = updated(with_defaults.encode(), "llama-8b", _dev_params(min_replicas=1), keda=True, tuned_on="x")
    assert "          min_replicas: 1\n" in new.data.decode() and "<<: {min_replicas: 0}" in new.data.decode()
    assert any("merge key" in w for w in new.warnings)
    whole = text.replace(
        "      autoscaling:\n        backend: keda\n        aggregated:\n          min_replicas: 0\n          max_replicas: 4\n",
        "      autoscaling:\n        <<: {aggregated: {min_replicas: 0, max_replicas: 4}}\n        backend: keda\n",
    )
    assert defaults in whole
    with pytest.raises(WritebackError, match="comes from a merge key"):
        updated_text(whole, "llama-8b", _dev_params(min_replicas=1), keda=True, tuned_on="x")
