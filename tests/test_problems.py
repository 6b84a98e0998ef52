"""One exception family: every stage's refusal of bad input is a ``Refusal``, which every command ends with exit 2."""

from __future__ import annotations

import pytest
import typer

from gpuscale.cli.common import fail_refusal
from gpuscale.plan.evidence import EvidenceError
from gpuscale.plan.goal_table import GoalTableError
from gpuscale.problems import Problems, Refusal
from gpuscale.schedule.binary import BuildError, GoUnavailableError
from gpuscale.schedule.replay import ReplayError
from gpuscale.schedule.snapshot import SnapshotError
from gpuscale.sim.scenarios.base import ScenarioError
from gpuscale.sim.traffic import TraceError
from gpuscale.sizing import SizingError
from gpuscale.stackfile import StackConfigError
from gpuscale.tune.writeback import WritebackError

STAGE_ERRORS = [SizingError, ScenarioError, TraceError, WritebackError, EvidenceError, GoalTableError, StackConfigError,
                GoUnavailableError, BuildError, ReplayError, SnapshotError]


@pytest.mark.parametrize("error", STAGE_ERRORS, ids=lambda e: e.__name__)
def test_every_stage_error_is_a_refusal(error: type[Exception]) -> None:
    assert issubclass(error, Refusal)


def test_a_refusal_exits_2_with_its_source_and_lines(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(typer.Exit) as exited:
        fail_refusal(TraceError("t.csv: empty file"))
    assert exited.value.exit_code == 2
    assert capsys.readouterr().err.splitlines() == ["error: gpuscale: invalid input", "  t.csv: empty file"]
    # the schedule's refusals name the command and print a build failure's tail line by line
    with pytest.raises(typer.Exit):
        fail_refusal(BuildError("go build failed (exit 1):\nmain.go:3: undefined: x"))
    assert capsys.readouterr().err.splitlines() == [
        "error: gpuscale schedule: invalid input", "  go build failed (exit 1):", "  main.go:3: undefined: x",
    ]
    with pytest.raises(typer.Exit):
        fail_refusal(Problems([("models[0].queue", "no such queue")], "stacks/Pulumi.dev.yaml"))
    assert capsys.readouterr().err.splitlines() == [
        "error: stacks/Pulumi.dev.yaml: invalid input", "  gpuscale:models[0].queue: no such queue",
    ]
