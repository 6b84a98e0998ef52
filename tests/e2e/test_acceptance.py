"""The real kube-apiserver accepts every object every shipped stack emits, and every stack of the spec's feature grid
(``tests/synth/test_feature_grid.py``: P/D and aggregated, a front door or warm replicas, multi-node, EFA, KEDA or
HPA, the cold-start choices), warns about none, and a re-apply changes nothing (``e2e.acceptance``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from e2e.acceptance import accept, manifest_objects, ref, remove
from gpuscale.feasibility import checked_sizing
from gpuscale.problems import Problems
from gpuscale.spec.platform import PlatformSpec
from gpuscale.synth.render import synth_spec
from tests.conftest import STACKS
from tests.synth.test_feature_grid import CASES, Case, build
from tests.synth.test_feature_grid import _id as case_id

REPO = Path(__file__).resolve().parents[2]
GRID_OUT = REPO / "out" / "e2e" / "synth" / "grid"
REQUIRED = {"shape": {"prefill-decode", "aggregated", "multi-node"}, "door": {"warm", "scale-to-zero"},
            "efa": {"efa", "no-efa"}}
"""The feature values the issue names: each must be in a grid stack the API server accepted."""


def _assert_accepted(verdict: Any) -> None:
    assert verdict.objects > 0
    assert not verdict.rejected, verdict.rejected
    assert not verdict.warnings, verdict.warnings
    assert not verdict.changed_on_reapply, verdict.changed_on_reapply


@pytest.mark.parametrize("stack", STACKS)
def test_apply_stack(stack: str, harness: Any, synth_dir: Any, scenario: Any) -> None:
    objects = manifest_objects(synth_dir(stack))
    kinds = sorted({o["kind"] for o in objects})
    verdict = accept(harness.kubectl, objects)
    scenario.observed.update(verdict.as_dict(), kinds=kinds)
    try:
        _assert_accepted(verdict)
    finally:
        # leave no workload or autoscaler behind for the controller scenarios (namespaces and CRDs stay)
        scenario.observed["cleanup_error"] = remove(harness.kubectl, objects)


class Grid:
    """The grid's run so far: what the cluster last accepted (the cases share most objects, each distinct one is
    applied once), everything applied (removed at the end) and which feature values were accepted."""

    def __init__(self) -> None:
        self.last_accepted: dict[str, str] = {}
        self.applied: dict[str, dict[str, Any]] = {}
        self.accepted: set[tuple[str, str]] = set()


@pytest.fixture(scope="module")
def grid(harness: Any) -> Iterator[Grid]:
    state = Grid()
    yield state
    error = remove(harness.kubectl, list(state.applied.values()), wait=True)
    assert not error, f"removing the grid's objects: {error}"


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_apply_feature_grid(case: Case, harness: Any, grid: Grid, scenario: Any) -> None:
    scenario.observed["features"] = dict(case)
    try:
        spec = PlatformSpec.model_validate(build(case))
        checked_sizing(spec)
    except (ValidationError, Problems) as exc:
        # the grid's own property allows a refusal with paths; such a stack emits nothing to apply
        scenario.observed["refused_by_spec"] = str(exc)[:2000]
        return
    out = GRID_OUT / case_id(case)
    synth_spec(spec, stack="grid").write(out)
    objects = manifest_objects(out / "manifests")
    for obj in objects:
        grid.applied[ref(obj)] = obj
    verdict = accept(harness.kubectl, objects, grid.last_accepted)
    scenario.observed.update(verdict.as_dict(), kinds=sorted({o["kind"] for o in objects}))
    _assert_accepted(verdict)
    grid.accepted.update(case)


def test_the_grid_covered_every_feature_the_issue_names(harness: Any, grid: Grid, scenario: Any) -> None:
    """Runs after the grid (file order): the named features were each in an accepted stack, so the grid cannot pass
    by being refused by the spec."""
    missing = sorted((f, v) for f, values in REQUIRED.items() for v in values if (f, v) not in grid.accepted)
    scenario.observed.update(accepted=sorted(grid.accepted), missing=missing)
    assert not missing, f"no accepted grid stack had {missing}"
