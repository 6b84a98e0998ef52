"""A PNG a person can look at: a model's dashboard laid out as Grafana would (the same panels, titles, grid and
thresholds), each panel drawn with the simulator's series of the quantity it queries.

The series come from one run of the model under the ``gpuscale`` policy of the ``stack`` scenario. The signals are
read with ``policies.signal_value`` on each scrape's observation: the trigger's own expression tree evaluated on the
simulated samples, what the simulated autoscaler decides on. A panel whose quantity the simulator does not record
(ITL p99 over time, pods' ages, the outcome of each request at the door) is drawn empty and says so.

Needs the ``cli`` extra (numpy, matplotlib), like the simulator.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gpuscale.dashboards.grafana import GRID_COLUMNS, Dashboard, Panel
from gpuscale.dashboards.model_dashboard import model_dashboard
from gpuscale.feasibility import checked_sizing
from gpuscale.signals.base import Signal
from gpuscale.sim import traffic
from gpuscale.sim.inputs import SimSetup, Variant
from gpuscale.sim.policies import signal_value
from gpuscale.sim.runner import servable_of
from gpuscale.sim.scenarios import build_scenario
from gpuscale.sim.simulation import Simulation
from gpuscale.sim.traffic import Arrivals
from gpuscale.spec.platform import PlatformSpec

SNAPSHOT_POLICY = "gpuscale"
SNAPSHOT_SCENARIO = "stack"
SNAPSHOT_DURATION_S = 3600.0
"""One hour of the stack's own workload: its ramp to peak and back, a few bursts (about a second of CPU on dev)."""
PX_PER_COLUMN = 0.62
PX_PER_ROW_UNIT = 0.34
"""Inches per grid column and per grid row unit: a 24-column page about 15 inches wide."""


@dataclass
class SimulatedSeries:
    """Per panel ``measure``: ``(legend, values)`` lines sampled at ``t_s``."""

    t_s: list[float]
    lines: dict[str, list[tuple[str, list[float | None]]]] = field(default_factory=dict)
    scenario: str = ""


class _RecordingSimulation(Simulation):
    """The simulation, also recording on each series sample what every signal's trigger reads, the replica count the
    HPA multiplies a per-replica target by, and the requests the front door holds. (It extends the one place the
    simulation samples its series; the run itself is unchanged.)"""

    def __init__(self, setup: SimSetup, variant: Variant, arrivals: Arrivals, seed: int, servable: np.ndarray, *,
                 signals: Mapping[str, Sequence[Signal]]) -> None:
        super().__init__(setup, variant, arrivals, seed, servable)
        self._signals = signals
        self.extra: dict[str, list[float | None]] = defaultdict(list)

    def _record_series(self, t: float) -> None:
        super()._record_series(t)
        held = 0.0
        for role in self.replicas.roles:
            for sig in self._signals.get(role.name, ()):
                self.extra[f"signal:{role.name}:{sig.trigger_name}"].append(signal_value(sig, role.obs))
            self.extra[f"current:{role.name}"].append(float(len(role.replicas)))
            held += role.obs.gateway
        self.extra["door:held"].append(held)


def _values(xs: Iterable[float]) -> list[float | None]:
    return [float(x) for x in xs]


def simulate_series(spec: PlatformSpec, model_name: str, *, seed: int = 0,
                    duration_s: float = SNAPSHOT_DURATION_S) -> SimulatedSeries:
    """Run the model once under gpuscale's policy and gather the series each panel measure maps to."""
    sizing = checked_sizing(spec)
    ms = sizing.model(model_name)
    sc = build_scenario(SNAPSHOT_SCENARIO, spec, model=model_name, duration_s=duration_s)
    variant = next(v for v in sc.variants if v.name == SNAPSHOT_POLICY)
    arrivals = traffic.generate(sc.traffic, seed, sc.setup.duration_s)
    signals: dict[str, list[Signal]] = {r.role: list(r.signals) for r in ms.roles}
    sim = _RecordingSimulation(sc.setup, variant, arrivals, seed, servable_of(sc.setup, arrivals), signals=signals)
    result = sim.run()
    series = result.series
    n = len(series.t_s)
    extra = {k: v[:n] for k, v in sim.extra.items()}
    out = SimulatedSeries(t_s=list(series.t_s), scenario=f"{SNAPSHOT_SCENARIO} scenario, {SNAPSHOT_POLICY} policy, "
                                                          f"{duration_s / 3600:g} h, seed {seed}")
    gpus_per_replica = ms.shape.gpus
    for rs in series.roles:
        role = rs.role
        out.lines[f"replicas:{role}"] = [("desired", _values(rs.desired)), ("ready", _values(rs.ready))]
        out.lines[f"kv:{role}"] = [("KV use", list(rs.kv_usage))]
        for key in (k for k in extra if k.startswith(f"signal:{role}:")):
            out.lines[key] = [(key.rsplit(":", 1)[1], extra[key])]
        out.lines[f"current:{role}"] = [("replicas", extra[f"current:{role}"])]
        if role in ("aggregated", "prefill"):
            out.lines[f"ttft:{role}"] = [("TTFT p99 by arrival", list(series.ttft_p99_s))]
    out.lines["door:held"] = [("held", extra["door:held"])]
    step = series.t_s[1] - series.t_s[0] if n > 1 else 1.0
    out.lines["door:outcomes"] = [("arrivals/s", _values(a / step for a in series.arrived))]
    model = next(x for x in spec.models if x.name == model_name)
    out.lines[f"pool_gpus:{model.node_pool}"] = [("GPUs of the model's nodes", _values(series.gpus))]
    out.lines[f"pool_nodes:{model.node_pool}"] = [("nodes", _values(series.nodes))]
    ready_gpus = _values(sum(r.ready[i] for r in series.roles) * gpus_per_replica for i in range(n))
    for q in spec.queue_chain(model.queue):
        out.lines[f"queue_gpus:{q.name}"] = [("GPUs of ready replicas", ready_gpus)]
    return out


def _draw(ax: object, panel: Panel, sim: SimulatedSeries) -> bool:
    """One panel; False when the simulator has no series for it."""
    minutes = [t / 60 for t in sim.t_s]
    drawn = False
    for legend, values in sim.lines.get(panel.measure, []):
        pts = [(x, v) for x, v in zip(minutes, values, strict=False) if v is not None]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], linewidth=1.2, label=legend)  # type: ignore[attr-defined]
        drawn = drawn or bool(pts)
    role = panel.measure.split(":")[1] if panel.measure.count(":") >= 1 else ""
    for t in panel.thresholds:
        if t.per_replica:
            (_, current), *_ = sim.lines.get(f"current:{role}", [("", [])])
            ax.plot(minutes[: len(current)], [t.value * (c or 0.0) for c in current], linestyle="--",  # type: ignore[attr-defined]
                    color="red", linewidth=1, label=f"{t.label} x replicas")
        else:
            ax.axhline(t.value, linestyle="--", color="red", linewidth=1, label=t.label)  # type: ignore[attr-defined]
    if not drawn:
        ax.text(0.5, 0.5, "not simulated", transform=ax.transAxes, ha="center", va="center",  # type: ignore[attr-defined]
                color="grey")
    return drawn


def render_png(dashboard: Dashboard, sim: SimulatedSeries, path: Path) -> list[str]:
    """Draw every panel at its grid position; returns the titles drawn (in the dashboard's order)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    height = max(p.grid.y + p.grid.h for p in dashboard.panels)
    fig = plt.figure(figsize=(GRID_COLUMNS * PX_PER_COLUMN, height * PX_PER_ROW_UNIT + 0.8))
    fig.suptitle(f"{dashboard.title} (series: simulated, {sim.scenario})", fontsize=11)
    gs = fig.add_gridspec(height, GRID_COLUMNS, hspace=1.6, wspace=0.6, top=1 - 0.6 / (height * PX_PER_ROW_UNIT + 0.8))
    titles = []
    for panel in dashboard.panels:
        g = panel.grid
        if panel.row:
            ax = fig.add_subplot(gs[g.y: g.y + g.h, :])
            ax.axis("off")
            ax.text(0, 0.0, panel.title, fontsize=10, fontweight="bold", va="bottom")
            continue
        ax = fig.add_subplot(gs[g.y + 1: g.y + g.h, g.x: g.x + g.w])  # one row unit for the title's space
        _draw(ax, panel, sim)
        ax.set_title(panel.title if len(panel.title) < 60 else panel.title[:57] + "...", fontsize=8)
        ax.tick_params(labelsize=6)
        ax.set_xlabel("minutes", fontsize=6, labelpad=1)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=5, loc="upper left")
        titles.append(panel.title)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return titles


def write_snapshots(spec: PlatformSpec, out_dir: Path) -> list[Path]:
    """``<out_dir>/dashboard-<model>.png`` for every model of the spec."""
    sizing = checked_sizing(spec)
    paths = []
    for model in spec.models:
        path = out_dir / f"dashboard-{model.name}.png"
        render_png(model_dashboard(spec, sizing, model.name), simulate_series(spec, model.name), path)
        paths.append(path)
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m gpuscale.dashboards.snapshot STACK_FILE OUT_DIR``: how ``docs/img/dashboard-llama-8b.png`` is made
    (``stacks/Pulumi.dev.yaml docs/img``)."""
    import sys

    from gpuscale.problems import Refusal
    from gpuscale.stackfile import load_stack_file

    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print("usage: python -m gpuscale.dashboards.snapshot STACK_FILE OUT_DIR", file=sys.stderr)
        return 2
    try:
        spec = load_stack_file(Path(args[0]))
    except Refusal as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for path in write_snapshots(spec, Path(args[1])):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
