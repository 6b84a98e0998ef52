"""The goal table of ``bench/goal_table.py`` (issue 27's goals, measured), read back for the plan and the docs.

The bench writes one record per (stack, trace, compression, replay) cell; this module reads that JSON into typed rows, so the
plan template and ``docs/simulator.md`` show generated numbers only: the table through one template
(``plan_goal_table.md.j2``), and in the docs why each goal is missed (``goal_commentary.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from gpuscale.input_files import GOAL_TABLE_MAX_BYTES, InputFileError, read_text_bounded
from gpuscale.problems import Refusal
from gpuscale.tune.goals import GoalChecks


class _Row(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class GoalMisses(_Row):
    total: int
    queueing: int = 0
    cold_start: int = 0


class GoalPolicy(_Row):
    attainment_servable: float
    misses: GoalMisses
    gpu_hours: float
    lower_bound_gpu_hours: float | None
    gpu_hours_vs_lower_bound: float | None
    decisions: int
    """Scaling decisions in the scored window."""
    fixed_allocation: bool
    """No scaling decision: whatever its settings, the run was a fixed allocation."""
    replicas_max: dict[str, int] = {}
    replicas_mean: dict[str, float] = {}
    goals: GoalChecks | None = None

    @property
    def cell(self) -> str:
        """``attainment % / GPU-hours / misses`` as the table shows it."""
        return f"{100 * self.attainment_servable:.1f} / {self.gpu_hours:.1f} / {self.misses.total:,}"

    def sentence(self, label: str) -> str:
        """One verdict line: which goals the run meets and, for each one missed, by how much (numbers from the JSON)."""
        g = self.goals
        if g is None:
            return f"{label}: not judged"
        met = [c for c, ok in zip("AGPM", (g.attainment_met, g.gpu_hours_met, g.pareto_met, g.misses_met), strict=True) if ok]
        missed: list[str] = []
        if not g.attainment_met:
            missed.append(f"A ({g.attainment_gap_points:.1f} points below the ceiling)")
        if not g.gpu_hours_met:
            missed.append(f"G ({g.gpu_hours_vs_best_fixed:.2f}x the best fixed allocation within the spec's limits)")
        if not g.pareto_met:
            worse = "; ".join(f"{k}: {v}" for k, v in g.pareto_vs.items() if v != "better")
            missed.append(f"P (not better than {worse})")
        if not g.misses_met:
            missed.append(f"M ({g.excess_misses:,} misses above the ceiling's, against the duty-cycle HPA's "
                          f"{g.duty_excess_misses:,})")
        text = f"{label}: " + (f"meets {', '.join(met)}" if met else "meets no goal")
        text += f"; misses {', '.join(missed)}" if missed else " (every goal)"
        if g.gpu_hours_vs_best_fixed_unconstrained is not None:
            text += f"; {g.gpu_hours_vs_best_fixed_unconstrained:.2f}x the unconstrained best fixed allocation"
        if self.fixed_allocation:
            text += "; a fixed allocation (no scaling decision)"
        else:
            text += f"; {self.decisions:,} scaling decision{'s' if self.decisions != 1 else ''}"
        return text

    @property
    def verdict(self) -> str:
        """``gap; x best fixed; excess / duty excess AGPM`` (and ``fixed`` for a run that never scaled)."""
        g = self.goals
        if g is None:
            return "-"
        return (f"{g.attainment_gap_points:.1f}; {g.gpu_hours_vs_best_fixed:.2f}x; {g.excess_misses:,} / "
                f"{g.duty_excess_misses:,} **{g.letters}**" + (" (fixed)" if self.fixed_allocation else ""))


def counts_label(counts: dict[str, int] | None) -> str:
    """``p2 d2`` (the roles' initials: aggregated, prefill, decode)."""
    return " ".join(f"{k[0]}{v}" for k, v in counts.items()) if counts else "-"


class GoalPart(_Row):
    """The runs on one part of the trace (the whole of it, or its held-out end)."""

    ceiling: GoalPolicy
    best_fixed: GoalPolicy
    """Within the spec's limits (no role below its warm minimum): the G goal's reference."""
    best_fixed_counts: dict[str, int]
    best_fixed_unconstrained: GoalPolicy | None = None
    """From one replica per role (below the warm minimum where that is cheaper); None in a table from before it was
    measured."""
    best_fixed_unconstrained_counts: dict[str, int] | None = None
    duty_cycle: GoalPolicy
    queue_depth: GoalPolicy
    untuned: GoalPolicy

    @property
    def fixed_cell(self) -> str:
        """The best fixed allocation within the spec's limits, with its counts."""
        return f"{self.best_fixed.cell} ({counts_label(self.best_fixed_counts)})"

    @property
    def unconstrained_cell(self) -> str:
        """The unconstrained one, ``same`` when it is the same allocation, ``-`` when not measured."""
        u = self.best_fixed_unconstrained
        if u is None:
            return "-"
        if self.best_fixed_unconstrained_counts == self.best_fixed_counts:
            return "same"
        return f"{u.cell} ({counts_label(self.best_fixed_unconstrained_counts)})"


class GoalHeldOut(GoalPart):
    fraction: float
    start_s: float
    requests: int
    tuned: GoalPolicy


class GoalCell(_Row):
    stack: str
    model: str
    trace: str
    compress: float
    replay: str
    """``exact`` (timestamps as recorded), or a bucketed trace's ``batch`` or ``spread``."""
    warmup_s: float
    requests: int
    limits_carry: bool
    """The shipped stack's limits carry the trace; when not, the cell ran with ``limits_raised``."""
    limits_message: str | None = None
    """What ``gpuscale tune`` says to raise when the shipped limits cannot carry the trace."""
    limits_raised: list[str] = []
    whole: GoalPart
    held_out: GoalHeldOut
    search_evaluations: int
    simulations: int | None = None
    """Simulations the cell ran (references, limits check, search); None in a table from before it was counted."""
    seconds: float

    @property
    def comparable(self) -> bool:
        """Some replica count carries the trace (the shipped limits, or the raised ones the cell ran with). When none
        does (``tune`` found no count up to 8x the ceiling's that meets the goodput target: the misses are not a
        matter of replicas), every policy is bounded by the same per-request latency and the goals compare nothing:
        the summaries leave such a cell out and say how many."""
        return self.limits_carry or bool(self.limits_raised)

    @property
    def limits(self) -> str:
        """The table's limits column: ``shipped``, ``raised`` or ``none carries``."""
        return "shipped" if self.limits_carry else "raised" if self.limits_raised else "none carries"

    @property
    def name(self) -> str:
        """``prod / code x1 exact``."""
        return f"{self.stack} / {self.trace} x{self.compress:g} {self.replay}"

    @property
    def verdicts(self) -> list[str]:
        """The cell's verdict lines, one per judged run (``RUNS``)."""
        return [getattr(getattr(self, part), policy).sentence(label) for label, part, policy in RUNS]


class GoalTable(_Row):
    cells: list[GoalCell]
    planned_cells: int
    max_evals: int
    warmup_s: float
    holdout: float
    seconds: float
    """Seconds the cells took, summed over the cells (each cell's own wall time, whichever run measured it)."""
    code: str | None = None
    """The hash of the sources the cells were measured at (``bench/goal_table.py``'s ``code_hash``)."""
    wall_seconds_last_run: float | None = None
    """Wall time of the run that wrote the JSON (the cells it kept from an earlier run not counted)."""

    def of_stack(self, stack: str) -> list[GoalCell]:
        return [c for c in self.cells if c.stack == stack]


RUNS: tuple[tuple[str, str, str], ...] = (
    ("untuned, whole trace", "whole", "untuned"),
    ("untuned, held-out part", "held_out", "untuned"),
    ("tuned on the fit part, held-out part", "held_out", "tuned"),
)
"""The runs the goals are judged on: (label, part, policy)."""


class GoalSummary(_Row):
    """How many cells meet each goal, and the worst miss, for one run."""

    label: str
    cells: int
    left_out: int = 0
    """Cells no replica count carries (not comparable; not counted above)."""
    attainment_met: int
    gpu_hours_met: int
    pareto_met: int
    misses_met: int
    all_met: int
    fixed: int
    """Runs that made no scaling decision."""
    worst_gap_points: float
    worst_gpu_hours_ratio: float


def summarise(cells: list[GoalCell], label: str, part: str, policy: str) -> GoalSummary:
    """Counts over the comparable cells (``GoalCell.comparable``); ``left_out`` says how many were not."""
    runs = [getattr(getattr(c, part), policy) for c in cells if c.comparable]
    checks = [r.goals for r in runs if r.goals is not None]
    return GoalSummary(
        label=label, cells=len(checks), left_out=sum(not c.comparable for c in cells), attainment_met=sum(g.attainment_met for g in checks),
        gpu_hours_met=sum(g.gpu_hours_met for g in checks), pareto_met=sum(g.pareto_met for g in checks),
        misses_met=sum(g.misses_met for g in checks),
        all_met=sum(g.attainment_met and g.gpu_hours_met and g.pareto_met and g.misses_met for g in checks),
        fixed=sum(r.fixed_allocation for r in runs),
        worst_gap_points=max((g.attainment_gap_points for g in checks), default=0.0),
        worst_gpu_hours_ratio=max((g.gpu_hours_vs_best_fixed for g in checks), default=0.0),
    )


def summaries(cells: list[GoalCell]) -> list[GoalSummary]:
    return [summarise(cells, *run) for run in RUNS]


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
