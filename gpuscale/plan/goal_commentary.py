"""Why each goal of the goal table is missed, cell by cell, from the table's own numbers: what ``docs/simulator.md``
says under the table (``templates/goal_table_commentary.md.j2``), so it stays true after every re-measure.

Each reason reads the figures the goal compares (``GoalChecks``) and the references of the same part of the trace,
and the goals' thresholds from ``gpuscale.tune.goals`` (the one definition): nothing is typed in by hand.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from gpuscale.plan.goal_table import (
    RUNS,
    GoalCell,
    GoalPart,
    GoalPolicy,
    GoalSummary,
    GoalTable,
    counts_label,
    summarise,
)
from gpuscale.sim.best_fixed import ATTAINMENT_GOAL_POINTS
from gpuscale.tune.goals import GPU_HOURS_FACTOR, MISSES_SHARE, GoalChecks, misses_allowed

__all__ = ["Commentary", "GoalMissed", "Miss", "RunCommentary", "commentary"]

HPAS = (("dcgm-duty-cycle", "duty_cycle", "duty-cycle HPA"), ("queue-depth", "queue_depth", "queue-depth HPA"))
"""(``pareto_vs`` key, ``GoalPart`` field, name in a sentence)."""


@dataclass(frozen=True)
class Miss:
    cell: str
    """``prod / code x1 exact``."""
    reason: str


@dataclass(frozen=True)
class GoalMissed:
    letter: str
    goal: str
    """The goal as the reader checks it, its threshold rendered from its constant."""
    misses: list[Miss]
    note: str | None = None
    """What the misses have in common, counted from them (``None`` when nothing is)."""


@dataclass(frozen=True)
class RunCommentary:
    summary: GoalSummary
    goals: list[GoalMissed]


@dataclass(frozen=True)
class Commentary:
    table: GoalTable
    stacks: list[str]
    simulations: int | None
    """Summed over the cells; ``None`` when a cell did not record its count."""
    cell_seconds: tuple[float, float]
    cell_simulations: tuple[int, int] | None
    dearest: GoalCell
    not_carried: list[GoalCell]
    runs: list[RunCommentary]
    lower_bound_ratio: tuple[float, float] | None
    """Least and most GPU-hours x the lower bound of the untuned policy on the whole trace, over comparable cells."""


def pct(p: GoalPolicy) -> str:
    return f"{100 * p.attainment_servable:.1f} %"


def replicas(values: dict[str, int] | dict[str, float]) -> str:
    """``p4.9 d2.0`` (the roles' initials, as ``counts_label``, with one decimal for a mean)."""
    return " ".join(f"{k[0]}{v:g}" if isinstance(v, int) else f"{k[0]}{v:.1f}" for k, v in values.items()) or "-"


def attainment_reason(part: GoalPart, run: GoalPolicy, g: GoalChecks) -> str:
    fixed, ceiling = part.best_fixed, part.ceiling
    fewer = "fewer" if g.gpu_hours_vs_best_fixed < 1 else "no fewer"
    cold = run.misses.cold_start - ceiling.misses.cold_start
    queued = run.misses.queueing - ceiling.misses.queueing
    why = ("mostly cold starts (replicas started after the requests that needed them came)" if cold >= queued
           else "mostly queueing (too few replicas ready for the load)")
    return (f"{g.attainment_gap_points:.1f} points below the ceiling ({pct(run)} against {pct(ceiling)}) on {fewer} "
            f"GPU-hours than the best fixed allocation ({g.gpu_hours_vs_best_fixed:.2f}x; "
            f"{counts_label(part.best_fixed_counts)} reaches {pct(fixed)}); its misses above the ceiling's are {why}: "
            f"{cold:+,} cold-start, {queued:+,} queueing")


def gpu_hours_reason(part: GoalPart, run: GoalPolicy, g: GoalChecks) -> str:
    text = (f"{g.gpu_hours_vs_best_fixed:.2f}x ({run.gpu_hours:.1f} GPU-hours against the best fixed allocation's "
            f"{part.best_fixed.gpu_hours:.1f}, {counts_label(part.best_fixed_counts)})")
    if run.fixed_allocation:
        return text + f": it never scaled, holding {replicas(run.replicas_max)} throughout"
    plural = "" if run.decisions == 1 else "s"
    return text + f": a mean of {replicas(run.replicas_mean)} over {run.decisions:,} scaling decision{plural}"


def versus(part: GoalPart, run: GoalPolicy, field: str, name: str, how: str) -> str:
    other: GoalPolicy = getattr(part, field)
    ours = f"{pct(run)} on {run.gpu_hours:.1f} GPU-hours"
    theirs = f"{pct(other)} on {other.gpu_hours:.1f}"
    if how in ("attainment", "both"):  # by less than the one decimal shown, maybe
        theirs += f"; {100 * (other.attainment_servable - run.attainment_servable):.2f} points more"
    if how == "gpu-hours":
        verdict = "more GPU-hours than the " + name
        if other.attainment_servable < run.attainment_servable:
            verdict += ", which attains less"
    elif how == "attainment":
        verdict = "lower attainment than the " + name
    elif how == "both":
        verdict = "lower attainment and more GPU-hours than the " + name
    else:
        verdict = "the same attainment and GPU-hours as the " + name
    return f"{verdict} ({ours} against {theirs})"


def pareto_reason(part: GoalPart, run: GoalPolicy, g: GoalChecks) -> str:
    return "; ".join(versus(part, run, field, name, g.pareto_vs[key])
                     for key, field, name in HPAS if g.pareto_vs.get(key, "better") != "better")


def under_provisioning_hpa(part: GoalPart, run: GoalPolicy, g: GoalChecks) -> bool:
    """P missed only on GPU-hours, against HPAs that each attain less: being no worse on GPU-hours than them would
    mean attaining less too."""
    worse = [(field, g.pareto_vs[key]) for key, field, _ in HPAS if g.pareto_vs.get(key, "better") != "better"]
    return bool(worse) and all(
        how == "gpu-hours" and getattr(part, field).attainment_servable < run.attainment_servable for field, how in worse)


def misses_reason(part: GoalPart, run: GoalPolicy, g: GoalChecks) -> str:
    share = Fraction(MISSES_SHARE).limit_denominator(1000)
    text = f"{g.excess_misses:,} misses above the ceiling's against the duty-cycle HPA's {g.duty_excess_misses:,}"
    if g.duty_excess_misses <= 0:
        return text + f": the duty-cycle HPA misses no more than the ceiling, so {share} of its excess is 0"
    return text + f", of which {share} is {misses_allowed(g.duty_excess_misses):,.1f}"


Reason = Callable[[GoalPart, GoalPolicy, GoalChecks], str]


def goal_list() -> list[tuple[str, str, str, Reason]]:
    """(letter, the goal with its threshold, the ``GoalChecks`` field saying it is met, why a run misses it)."""
    points, share = f"{100 * ATTAINMENT_GOAL_POINTS:g}", Fraction(MISSES_SHARE).limit_denominator(1000)
    return [
        ("A", f"attainment within {points} point{'' if points == '1' else 's'} of the ceiling", "attainment_met",
         attainment_reason),
        ("G", f"GPU-hours at most {GPU_HOURS_FACTOR:g}x the best fixed allocation within the spec's limits",
         "gpu_hours_met", gpu_hours_reason),
        ("P", "no worse than the duty-cycle and the queue-depth HPA on attainment and GPU-hours, better on one",
         "pareto_met", pareto_reason),
        ("M", f"excess misses at most {share} of the duty-cycle HPA's", "misses_met", misses_reason),
    ]


def run_commentary(cells: list[GoalCell], label: str, part_name: str, policy: str) -> RunCommentary:
    judged: list[tuple[GoalCell, GoalPart, GoalPolicy, GoalChecks]] = []
    for c in cells:
        part: GoalPart = getattr(c, part_name)
        run: GoalPolicy = getattr(part, policy)
        if c.comparable and run.goals is not None:
            judged.append((c, part, run, run.goals))
    goals: list[GoalMissed] = []
    for letter, goal, met, reason in goal_list():
        rows = [(c, p, r, g) for c, p, r, g in judged if not getattr(g, met)]
        note = None
        only = sum(under_provisioning_hpa(p, r, g) for _, p, r, g in rows) if letter == "P" else 0
        if only:
            note = (f"in {only} of these {len(rows)}, P is missed only on GPU-hours, against an HPA that attains less "
                    f"there: no worse on GPU-hours than it would mean attaining less too, against the A goal")
        at_ceiling = sum(g.duty_excess_misses <= 0 for *_, g in rows) if letter == "M" else 0
        if at_ceiling:
            note = f"in {at_ceiling} of these {len(rows)} the duty-cycle HPA misses no more than the ceiling"
        goals.append(GoalMissed(letter, goal, [Miss(c.name, reason(p, r, g)) for c, p, r, g in rows], note))
    return RunCommentary(summarise(cells, label, part_name, policy), goals)


def commentary(table: GoalTable) -> Commentary:
    cells = table.cells
    if not cells:
        raise ValueError("a goal table without cells has nothing to comment")
    counted = [c.simulations for c in cells]
    sims = [s for s in counted if s is not None]
    ratios = [c.whole.untuned.goals.gpu_hours_vs_lower_bound for c in cells
              if c.comparable and c.whole.untuned.goals is not None and c.whole.untuned.goals.gpu_hours_vs_lower_bound]
    return Commentary(
        table=table,
        stacks=list(dict.fromkeys(c.stack for c in cells)),
        simulations=sum(sims) if len(sims) == len(counted) else None,
        cell_seconds=(min(c.seconds for c in cells), max(c.seconds for c in cells)),
        cell_simulations=(min(sims), max(sims)) if sims else None,
        dearest=max(cells, key=lambda c: c.seconds),
        not_carried=[c for c in cells if not c.comparable],
        runs=[run_commentary(cells, *run) for run in RUNS],
        lower_bound_ratio=(min(ratios), max(ratios)) if ratios else None,
    )
