"""The goals of issue 27, checked on one run against its references: the one definition ``bench/goal_table.py``
records and the plan and docs render.

Per run (untuned on the whole trace, or tuned on its held-out part), against the ceiling, the best fixed allocation in
hindsight, the duty-cycle HPA and the queue-depth HPA of the same part:

* **A**: servable attainment within ``ATTAINMENT_GOAL_POINTS`` (one point) of the ceiling's;
* **G**: GPU-hours at most ``GPU_HOURS_FACTOR`` (1.15) x the best fixed allocation's **within the spec's limits**
  (``best_fixed.search_both``: no role below its warm minimum, since an allocation below the spec's own minimum is not
  one the user may run); the ratio to the unconstrained best fixed allocation (from one replica per role) and to the
  lower bound are reported beside it, not goals (the bound has perfect foresight and no start-up or whole-replica
  cost);
* **P**: Pareto against both HPAs: no worse on attainment and on GPU-hours than either, better on at least one;
* **M**: misses above the ceiling's at most ``MISSES_SHARE`` (a tenth) of the duty-cycle HPA's.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from gpuscale.sim.best_fixed import ATTAINMENT_GOAL_POINTS
from gpuscale.sim.metrics import PolicyResult

GPU_HOURS_FACTOR = 1.15
MISSES_SHARE = 0.1
EPS = 1e-9


class GoalChecks(BaseModel):
    """One run's distance to each goal and whether it is met."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    attainment_gap_points: float
    """Ceiling's servable attainment minus the run's, in points."""
    attainment_met: bool
    gpu_hours_vs_best_fixed: float
    gpu_hours_met: bool
    gpu_hours_vs_best_fixed_unconstrained: float | None = None
    """Reported, not a goal: GPU-hours x the best fixed allocation from one replica per role (below the warm minimum
    where that is cheaper); None when not measured."""
    gpu_hours_vs_lower_bound: float | None
    """Reported, not a goal; None when the bound is infinite at this attainment."""
    pareto_vs: dict[str, str]
    """Per HPA (``dcgm-duty-cycle``, ``queue-depth``): ``better`` (no worse on both, better on one), ``same``, or what
    is worse (``attainment``, ``gpu-hours``, ``both``)."""
    pareto_met: bool
    excess_misses: int
    """Misses above the ceiling's."""
    duty_excess_misses: int
    misses_met: bool

    @property
    def letters(self) -> str:
        """``AGPM``: upper case met, lower case missed."""
        return "".join(c if ok else c.lower() for c, ok in (
            ("A", self.attainment_met), ("G", self.gpu_hours_met), ("P", self.pareto_met), ("M", self.misses_met)))


def _versus(r: PolicyResult, other: PolicyResult) -> str:
    a = r.slo_attainment_servable - other.slo_attainment_servable
    g = other.gpu_hours - r.gpu_hours
    worse = [name for name, d in (("attainment", a), ("gpu-hours", g)) if d < -EPS]
    if worse:
        return "both" if len(worse) == 2 else worse[0]
    return "better" if a > EPS or g > EPS else "same"


def check(
    r: PolicyResult, *, ceiling: PolicyResult, best_fixed: PolicyResult, duty: PolicyResult, queue_depth: PolicyResult,
    best_fixed_unconstrained: PolicyResult | None = None,
) -> GoalChecks:
    """``best_fixed`` is the reference within the spec's limits (the G goal's); ``best_fixed_unconstrained`` is
    reported beside it."""
    gap = ceiling.slo_attainment_servable - r.slo_attainment_servable
    excess = r.misses.total - ceiling.misses.total
    duty_excess = duty.misses.total - ceiling.misses.total
    ratio = _ratio(r, best_fixed)
    free = None if best_fixed_unconstrained is None else round(_ratio(r, best_fixed_unconstrained), 3)
    lb = r.lower_bound_gpu_hours
    vs = {"dcgm-duty-cycle": _versus(r, duty), "queue-depth": _versus(r, queue_depth)}
    return GoalChecks(
        attainment_gap_points=round(gap * 100, 2), attainment_met=gap <= ATTAINMENT_GOAL_POINTS + EPS,
        gpu_hours_vs_best_fixed=round(ratio, 3), gpu_hours_met=ratio <= GPU_HOURS_FACTOR + EPS,
        gpu_hours_vs_best_fixed_unconstrained=free,
        gpu_hours_vs_lower_bound=round(r.gpu_hours / lb, 3) if lb else None,
        pareto_vs=vs, pareto_met=all(v == "better" for v in vs.values()),
        excess_misses=excess, duty_excess_misses=duty_excess, misses_met=excess <= misses_allowed(duty_excess) + EPS,
    )


def misses_allowed(duty_excess: int) -> float:
    """The M goal's allowance: ``MISSES_SHARE`` of the duty-cycle HPA's misses above the ceiling's (none when it
    misses no more than the ceiling)."""
    return MISSES_SHARE * max(duty_excess, 0)


def _ratio(r: PolicyResult, reference: PolicyResult) -> float:
    return r.gpu_hours / reference.gpu_hours if reference.gpu_hours > 0 else float("inf")
