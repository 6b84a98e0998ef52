"""What the plan quotes from the offline synth (emitted manifests) and from the simulator (policy comparisons)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from gpuscale.input_files import SIM_RESULT_MAX_BYTES, SYNTH_FILE_MAX_BYTES, read_text_bounded
from gpuscale.plan.goal_table import GoalTable
from gpuscale.problems import Refusal
from gpuscale.schedule.report import ScheduleReport, shorten
from gpuscale.sim import PolicyResult, ScenarioResult
from gpuscale.sim.plots import write_plots
from gpuscale.sim.scenarios import definition, plan_runs, plan_scenarios
from gpuscale.sizing import PlatformSizing
from gpuscale.spec.base import Spec
from gpuscale.spec.platform import PlatformSpec


class EvidenceError(Refusal):
    """An earlier run's output (``--synth`` manifests, ``--sim-dir`` results) that cannot be read; names the file."""


class ManifestExcerpt(Spec):
    kind: str
    name: str
    yaml: str


Cell = Callable[[PolicyResult, ScenarioResult], str]


def _n(x: float | None, fmt: str, unit: str = "") -> str:
    return "-" if x is None else format(x, fmt) + unit


def _per_day(res: ScenarioResult) -> float:
    return float(res.parameters.get("per_day_factor", 86400.0 / res.duration_s))


def _misses(r: PolicyResult, _: ScenarioResult) -> str:
    parts = [f"{k.replace('_', ' ')} {v:,}" for k, v in r.misses.model_dump().items() if k != "total" and v]
    return "; ".join(parts) if parts else "none"


def _tracked(r: PolicyResult, _: ScenarioResult) -> str:
    if not r.tracked:
        return "-"
    t = r.tracked[0]
    return t.outcome.replace("_", " ") + (f" (TTFT {t.ttft_s:.0f} s)" if t.ttft_s is not None else "")


def _first_of_day(r: PolicyResult, _: ScenarioResult) -> str:
    t = next((x for x in r.tracked if x.label == "first-of-the-day"), None)
    if t is None:
        return "-"
    return t.outcome.replace("_", " ") + (f" ({t.ttft_s:.0f} s)" if t.ttft_s is not None else "")


def _first_ready(r: PolicyResult, _: ScenarioResult) -> str:
    t = next((e.t_s for e in r.events if e.kind == "ready"), None)
    return _n(t, ".0f", " s")


def _min_ready(r: PolicyResult, res: ScenarioResult) -> str:
    """Per role, the fewest ready replicas sampled from ``parameters.drift_at_s`` on (the ``ami-rollout`` table)."""
    at = float(res.parameters.get("drift_at_s", 0.0))
    parts = []
    for role in r.series.roles:
        after = [n for t, n in zip(r.series.t_s, role.ready, strict=True) if t >= at]
        parts.append(f"{role.role} {min(after) if after else 0}")
    return ", ".join(parts)


COLUMNS: dict[str, tuple[str, str, Cell]] = {
    "policy": ("policy", "---", lambda r, _: r.name),
    "attainment": ("on time, all / servable", "---:", lambda r, _: f"{100 * r.slo_attainment:.1f}% / {100 * r.slo_attainment_servable:.1f}%"),
    "misses": ("misses by cause", "---", _misses),
    "ttft": ("TTFT p50 / p99 (s)", "---", lambda r, _: f"{_n(r.ttft_p50_s, '.2f')} / {_n(r.ttft_p99_s, '.2f')}"),
    "itl_p99": ("ITL p99 (ms)", "---:", lambda r, _: _n(r.itl_p99_s * 1000 if r.itl_p99_s is not None else None, ".0f")),
    "gpu_hours": ("GPU-hours", "---:", lambda r, _: f"{r.gpu_hours:,.1f}"),
    "lower_bound": ("lower bound at that attainment (GPU-h)", "---:", lambda r, _: _n(r.lower_bound_gpu_hours, ",.1f")),
    "idle": ("idle GPU-min", "---:", lambda r, _: f"{r.idle_gpu_minutes.total:,.0f}"),
    "cost": ("cost", "---:", lambda r, _: f"${r.cost_usd:,.0f}"),
    "score": ("score", "---:", lambda r, _: f"{r.score:.1f}"),
    "gang_wait": ("GPU-minutes bound waiting for the gang", "---:", lambda r, _: f"{r.idle_gpu_minutes.gang_wait:.1f}"),
    "first_ready": ("replica serving at", "---:", _first_ready),
    "tracked": ("the labelled request", "---", _tracked),
    "first_of_day": ("first request of the day", "---", _first_of_day),
    "first_answer": ("first answer after the first request", "---:", lambda r, _: _n(r.first_answer_s, ".0f", " s")),
    "answered": ("answered", "---:", lambda r, _: f"{r.completed:,}"),
    "refused": ("503 + Retry-After", "---:", lambda r, _: f"{r.refused:,}"),
    "lost": ("lost (timed out, no endpoint, in flight)", "---:", lambda r, _: f"{r.dropped_timeout + r.lost_in_flight:,}"),
    "first_node": ("first node ready after Pending", "---:", lambda r, _: _n(r.nodes.first_ready_latency_s, ".0f", " s")),
    "evictions_day": ("evictions / day", "---:", lambda r, res: f"{r.evictions * _per_day(res):.1f}"),
    "lost_day": ("lost in flight / day", "---:", lambda r, res: f"{r.lost_in_flight * _per_day(res):,.0f}"),
    "unanswered_day": ("unanswered / day", "---:", lambda r, res: f"{r.unanswered * _per_day(res):,.0f}"),
    "gpu_hours_day": ("GPU-hours / day", "---:", lambda r, res: f"{r.gpu_hours * _per_day(res):,.1f}"),
    "cost_day": ("cost / day", "---:", lambda r, res: f"${r.cost_usd * _per_day(res):,.0f}"),
    "lost_unanswered": ("lost in flight / unanswered", "---:", lambda r, _: f"{r.lost_in_flight:,} / {r.unanswered:,}"),
    "min_ready": ("fewest ready replicas during the rollout", "---", _min_ready),
    "evictions": ("evictions", "---:", lambda r, _: f"{r.evictions:,}"),
}
"""Every column a plan table can show: header, Markdown alignment, cell from one result row."""


class SimSection(Spec):
    """One simulated scenario as the plan quotes it: a table whose columns the scenario chose, and its findings."""

    scenario: str
    section: str
    """Where in the plan it goes (``ScenarioDef.plan_section``)."""
    description: str
    model: str
    seed: int
    duration_s: float
    header: list[str]
    align: list[str]
    rows: list[list[str]]
    """Cells, formatted from the ``PolicyResult`` of each row."""
    policies: list[str]
    descriptions: list[str]
    """Each policy's one-line description, row order."""
    findings: list[str]
    score_formula: str | None
    score_explanation: str | None
    traffic: str
    images: list[str]
    """Paths of the plots, relative to the plan document."""

    def cell(self, policy: str, column: str) -> str:
        return self.rows[self.policies.index(policy)][self.header.index(COLUMNS[column][0])]


class PendingRole(Spec):
    """A role whose replicas the real KAI Scheduler leaves Pending, with its reasons quoted."""

    model: str
    role: str
    pending: int
    requested: int
    reasons: list[str]


class ScheduleEvidence(Spec):
    """What ``gpuscale schedule`` found for the stack at peak replicas (the real KAI Scheduler's verdict)."""

    computed: bool = False
    note: str = ("not computed (`gpuscale plan --no-schedule`; `make plan` leaves it out of the committed dev plan, so "
                 "that plan is the same on every machine)")
    """How it was computed (scheduler version, nodes), or why it was not."""
    pending: list[PendingRole] = []


class Evidence(Spec):
    node_manifests: list[ManifestExcerpt]
    simulations: list[SimSection]
    """Every plan scenario, in ``plan_scenarios()`` order."""
    schedule: ScheduleEvidence = ScheduleEvidence()
    """What the real KAI Scheduler leaves Pending at peak (``gpuscale schedule``), or why it was not asked."""
    goal_table: GoalTable | None = None
    """``bench/goal_table.py``'s measurements (``gpuscale plan --goal-table``), or None when not given."""

    def section(self, name: str) -> list[SimSection]:
        """The scenarios quoted in one part of the plan (templates never name scenarios)."""
        return [s for s in self.simulations if s.section == name]

    def scenario(self, name: str) -> SimSection:
        for s in self.simulations:
            if s.scenario == name:
                return s
        raise KeyError(name)


def sim_section(result: ScenarioResult, images: list[str]) -> SimSection:
    d = definition(result.scenario)
    cols = [COLUMNS[c] for c in d.columns]
    t = result.traffic
    traffic = f"{t.kind}, {t.requests:,} request{'s' if t.requests != 1 else ''}" + (
        f", arrivals in {t.granularity_s:g} s buckets replayed {t.replay}" if t.granularity_s is not None else ""
    )
    scored = "score" in d.columns
    return SimSection(
        scenario=result.scenario, section=d.plan_section or "", description=result.description, model=result.model,
        seed=result.seed, duration_s=result.duration_s, header=[c[0] for c in cols], align=[c[1] for c in cols],
        rows=[[c[2](r, result) for c in cols] for r in result.results],
        policies=[r.name for r in result.results], descriptions=[r.description for r in result.results],
        findings=result.findings, score_formula=result.score_formula if scored else None,
        score_explanation=result.score_explanation if scored else None, traffic=traffic, images=images,
    )


def run_simulations(
    spec: PlatformSpec, *, stack: str, image_dir: Path, image_prefix: str, sim_dir: Path | None = None,
    duration_s: float | None = None, simulate: Callable[..., ScenarioResult] | None = None,
) -> list[SimSection]:
    """Each plan scenario: read ``<sim_dir>/<scenario>.json`` when present (``make plan`` writes them), else simulate."""
    if simulate is None:
        from gpuscale.sim import simulate as simulate_fn

        simulate = simulate_fn
    sections: list[SimSection] = []
    for scenario in plan_scenarios():
        for model, stem in plan_runs(spec, scenario):
            cached = sim_dir / f"{stem}.json" if sim_dir else None
            result = load_result(cached) if cached is not None and cached.is_file() else None
            if result is None or result.model != model:
                result = simulate(spec, scenario, model=model, duration_s=duration_s)
            images: list[str] = []
            if definition(scenario).plan_section == "simulation":
                paths = write_plots(result, image_dir / stem)
                images = [f"{image_prefix}/{stem}/{p.name}" for p in paths]
            sections.append(sim_section(result, images))
    return sections


def load_result(path: Path) -> ScenarioResult:
    """A ``gpuscale simulate --json`` result; ``EvidenceError`` naming the file when it is not one."""
    try:
        return ScenarioResult.model_validate(json.loads(read_text_bounded(path, SIM_RESULT_MAX_BYTES, "a simulate result")))
    except (OSError, ValueError, RecursionError) as exc:  # ValidationError and JSON/UTF-8 errors are ValueErrors
        reason = f"{exc.error_count()} field(s) do not match" if isinstance(exc, ValidationError) else str(exc)
        raise EvidenceError(
            f"{path}: not a `gpuscale simulate --json` result ({reason}); re-run the simulation or drop --sim-dir"
        ) from None


def node_manifests(objects: list[dict[str, Any]]) -> list[ManifestExcerpt]:
    """The NodePools and EC2NodeClasses as emitted, GPU pools first."""
    picked = [o for o in objects if o.get("kind") in ("NodePool", "EC2NodeClass")]
    picked.sort(key=lambda o: (o["metadata"]["name"] == "cpu", o["metadata"]["name"], o["kind"] != "NodePool"))
    return [
        ManifestExcerpt(kind=o["kind"], name=o["metadata"]["name"], yaml=yaml.safe_dump(o, sort_keys=True, width=120).rstrip())
        for o in picked
    ]


def manifests_from_synth_dir(path: Path) -> list[dict[str, Any]]:
    """Every object in ``<path>/manifests/*.yaml``; ``EvidenceError`` naming the file that is not YAML."""
    out: list[dict[str, Any]] = []
    for f in sorted((path / "manifests").glob("*.yaml")):
        try:
            docs = list(yaml.safe_load_all(read_text_bounded(f, SYNTH_FILE_MAX_BYTES, "a synth manifest")))
        except (OSError, ValueError, yaml.YAMLError, RecursionError) as exc:
            raise EvidenceError(
                f"{f}: not a manifest written by `gpuscale synth` ({exc}); re-run the synth or drop --synth"
            ) from None
        objects = [d for d in docs if isinstance(d, dict)]
        bad = [d for d in objects if not isinstance(d.get("kind"), str) or not isinstance(d.get("metadata"), dict)
               or not isinstance(d["metadata"].get("name"), str)]
        if bad:
            raise EvidenceError(f"{f}: an object without kind or metadata.name; re-run the synth or drop --synth")
        out += objects
    return out


def schedule_evidence(
    spec: PlatformSpec, sizing: PlatformSizing, objects: list[dict[str, Any]], charts: list[dict[str, Any]] | Path,
) -> ScheduleEvidence:
    """Run the real KAI Scheduler over the stack at peak replicas; say why not when Go or the build is missing.
    ``charts``: the synth's chart list, or the ``gpuscale synth`` output directory to read it from."""
    from gpuscale.schedule.binary import BuildError, GoUnavailableError
    from gpuscale.schedule.replay import ReplayError
    from gpuscale.schedule.snapshot import SnapshotError
    from gpuscale.schedule.stack import charts_from_synth_dir, schedule_level

    try:
        chart_list = charts_from_synth_dir(charts) if isinstance(charts, Path) else charts
        report = schedule_level(spec, sizing, objects, chart_list, "peak").report
    except (GoUnavailableError, BuildError, ReplayError, SnapshotError) as exc:
        return ScheduleEvidence(computed=False, note=f"not computed: {str(exc).splitlines()[0]}")
    return evidence_from_report(report)


def evidence_from_report(report: ScheduleReport) -> ScheduleEvidence:
    pools = ", ".join(f"{n} x {it} ({p})" for p, (it, n) in sorted(report.nodes_per_pool.items()))
    return ScheduleEvidence(
        computed=True,
        note=f"KAI Scheduler {report.kai_version} over {pools}, {report.sessions} scheduling sessions",
        pending=[
            PendingRole(model=r.model, role=r.role, pending=r.pending, requested=r.requested,
                        reasons=[shorten(m) for m in r.reasons])
            for r in report.roles if r.pending
        ],
    )
