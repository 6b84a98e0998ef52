"""What the plan quotes from the offline synth (emitted manifests) and from the simulator (policy comparisons)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from gpuscale.sim import ScenarioResult
from gpuscale.sim.plots import write_plots
from gpuscale.spec.base import Spec
from gpuscale.spec.platform import PlatformSpec

PLAN_SCENARIOS = ("stack", "consolidation-24x7", "gang-7-of-8", "2am-huge-prompt")
"""Scenarios every plan quotes: the stack's own workload, then one per failure the plan explains."""


class EvidenceError(ValueError):
    """An earlier run's output (``--synth`` manifests, ``--sim-dir`` results) that cannot be read; names the file."""


class ManifestExcerpt(Spec):
    kind: str
    name: str
    yaml: str


class SimRow(Spec):
    """One policy's line in a comparison table (every number straight from ``PolicyResult``)."""

    policy: str
    description: str
    arrived: int
    completed: int
    dropped: int
    lost_in_flight: int
    still_queued: int
    slo_attainment_pct: float
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    itl_p99_s: float | None
    gpu_hours: float
    idle_gpu_minutes: float
    cost_usd: float
    score: float
    gpu_hours_vs_oracle: float | None
    evictions: int


class SimSection(Spec):
    scenario: str
    description: str
    model: str
    seed: int
    duration_s: float
    per_day_factor: float
    rows: list[SimRow]
    findings: list[str]
    score_formula: str
    score_explanation: str
    images: list[str]
    """Paths of the plots, relative to the plan document."""

    def row(self, policy: str) -> SimRow:
        for r in self.rows:
            if r.policy == policy:
                return r
        raise KeyError(policy)


class Evidence(Spec):
    node_manifests: list[ManifestExcerpt]
    simulations: dict[str, SimSection]


def _r(x: float | None, nd: int = 3) -> float | None:
    return None if x is None else round(x, nd)


def sim_section(result: ScenarioResult, images: list[str]) -> SimSection:
    rows = [
        SimRow(
            policy=r.name, description=r.description, arrived=r.arrived, completed=r.completed, dropped=r.dropped,
            lost_in_flight=r.lost_in_flight, still_queued=r.still_queued, slo_attainment_pct=round(100 * r.slo_attainment, 1),
            ttft_p50_s=_r(r.ttft_p50_s), ttft_p99_s=_r(r.ttft_p99_s), itl_p99_s=_r(r.itl_p99_s, 4),
            gpu_hours=round(r.gpu_hours, 2), idle_gpu_minutes=round(r.idle_gpu_minutes.total, 1), cost_usd=round(r.cost_usd, 2),
            score=r.score, gpu_hours_vs_oracle=_r(r.gpu_hours_vs_oracle, 2), evictions=r.evictions,
        )
        for r in result.results
    ]
    return SimSection(
        scenario=result.scenario, description=result.description, model=result.model, seed=result.seed,
        duration_s=result.duration_s, per_day_factor=float(result.parameters.get("per_day_factor", 86400 / result.duration_s)),
        rows=rows, findings=result.findings, score_formula=result.score_formula,
        score_explanation=result.score_explanation, images=images,
    )


def primary_model(spec: PlatformSpec) -> str:
    """The model the plan simulates: the first critical one, else the first."""
    critical = [m.name for m in spec.models if m.slo.criticality == "critical"]
    return critical[0] if critical else spec.models[0].name


def run_simulations(
    spec: PlatformSpec, *, stack: str, image_dir: Path, image_prefix: str, sim_dir: Path | None = None,
    duration_s: float | None = None, simulate: Callable[..., ScenarioResult] | None = None,
) -> dict[str, SimSection]:
    """Each plan scenario: read ``<sim_dir>/<scenario>.json`` when present (``make plan`` writes them), else simulate."""
    if simulate is None:
        from gpuscale.sim import simulate as simulate_fn

        simulate = simulate_fn
    model = primary_model(spec)
    sections: dict[str, SimSection] = {}
    for scenario in PLAN_SCENARIOS:
        cached = sim_dir / f"{scenario}.json" if sim_dir else None
        result = load_result(cached) if cached is not None and cached.is_file() else None
        if result is None or result.model != model:
            result = simulate(spec, scenario, model=model, duration_s=duration_s)
        images: list[str] = []
        if scenario == "stack":
            paths = write_plots(result, image_dir / scenario)
            images = [f"{image_prefix}/{scenario}/{p.name}" for p in paths]
        sections[scenario] = sim_section(result, images)
    return sections


def load_result(path: Path) -> ScenarioResult:
    """A ``gpuscale simulate --json`` result; ``EvidenceError`` naming the file when it is not one."""
    try:
        return ScenarioResult.model_validate(json.loads(path.read_text(encoding="utf-8")))
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
            docs = list(yaml.safe_load_all(f.read_text(encoding="utf-8")))
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
