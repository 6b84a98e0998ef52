"""The goal table of ``bench/goal_table.py`` (issue 15's goal, measured), read back for the plan and the docs.

The bench writes one record per (stack, trace, compression) cell; this module reads that JSON into typed rows, so the
plan template and ``docs/simulator.md`` show generated numbers only, through one template
(``plan_goal_table.md.j2``).
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from gpuscale.input_files import GOAL_TABLE_MAX_BYTES, InputFileError, read_text_bounded
from gpuscale.problems import Refusal


class _Row(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class GoalMisses(_Row):
    total: int


class GoalChecks(_Row):
    attainment_gap_points: float
    """Ceiling's servable attainment minus the policy's, in points (goal: at most 1)."""
    attainment_met: bool
    gpu_hours_met: bool
    """GPU-hours at most 1.15x the lower bound at the policy's own attainment."""
    excess_misses: int
    """Misses above the ceiling's."""
    duty_excess_misses: int
    """The duty-cycle HPA's misses above the ceiling's (goal: the policy's excess at most a tenth of it)."""
    misses_met: bool


class GoalPolicy(_Row):
    attainment_servable: float
    misses: GoalMisses
    gpu_hours: float
    lower_bound_gpu_hours: float
    gpu_hours_vs_lower_bound: float | None
    goals: GoalChecks | None = None

    @property
    def cell(self) -> str:
        """``attainment % / x lower bound / misses`` as the table shows it."""
        ratio = "-" if self.gpu_hours_vs_lower_bound is None else f"{self.gpu_hours_vs_lower_bound:.2f}"
        return f"{100 * self.attainment_servable:.1f} / {ratio} / {self.misses.total:,}"


class GoalCell(_Row):
    stack: str
    model: str
    trace: str
    compress: float
    requests: int
    limits_carry: bool
    limits_message: str | None = None
    """What ``gpuscale tune`` says to raise when the limits cannot carry the trace."""
    ceiling: GoalPolicy
    duty_cycle: GoalPolicy
    untuned: GoalPolicy
    tuned: GoalPolicy
    search_evaluations: int
    seconds: float


class GoalTable(_Row):
    cells: list[GoalCell]
    planned_cells: int
    max_evals: int
    seconds: float

    def of_stack(self, stack: str) -> list[GoalCell]:
        return [c for c in self.cells if c.stack == stack]


class GoalSummary(_Row):
    """How many cells meet each goal, and the worst miss, for one policy (``untuned`` or ``tuned``)."""

    policy: str
    cells: int
    attainment_met: int
    gpu_hours_met: int
    misses_met: int
    worst_gap_points: float
    worst_gpu_hours_ratio: float | None


def summarise(cells: list[GoalCell], policy: str) -> GoalSummary:
    """The goals of ``policy`` over ``cells`` (cells whose limits carry the trace, for a meaningful count)."""
    runs = [getattr(c, policy) for c in cells]
    checks = [r.goals for r in runs if r.goals is not None]
    ratios = [r.gpu_hours_vs_lower_bound for r in runs if r.gpu_hours_vs_lower_bound is not None]
    return GoalSummary(
        policy=policy, cells=len(checks), attainment_met=sum(g.attainment_met for g in checks),
        gpu_hours_met=sum(g.gpu_hours_met for g in checks), misses_met=sum(g.misses_met for g in checks),
        worst_gap_points=max((g.attainment_gap_points for g in checks), default=0.0),
        worst_gpu_hours_ratio=max(ratios, default=None),
    )


class GoalTableError(Refusal):
    """The goal-table JSON cannot be read; names the file and what is wrong."""


def load_goal_table(path: Path) -> GoalTable:
    try:
        return GoalTable.model_validate(json.loads(read_text_bounded(path, GOAL_TABLE_MAX_BYTES, "a goal table")))
    except OSError as exc:
        raise GoalTableError(f"--goal-table {path}: cannot read it ({exc.strerror or exc})") from exc
    except json.JSONDecodeError as exc:
        raise GoalTableError(f"--goal-table {path}: not JSON ({exc.msg} at line {exc.lineno})") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise GoalTableError(
            f"--goal-table {path}: not a bench/goal_table.py result ({where}: {first['msg']})"
        ) from exc
    except InputFileError as exc:  # not a regular file, or larger than the bound
        raise GoalTableError(f"--goal-table {exc}") from exc
    except (UnicodeDecodeError, RecursionError) as exc:
        raise GoalTableError(f"--goal-table {path}: not a bench/goal_table.py result ({exc})") from exc
