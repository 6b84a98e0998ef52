"""PNG plots of a scenario result: replicas, queue depth and TTFT over time, one line per policy (matplotlib Agg)."""

from __future__ import annotations

from pathlib import Path

from gpuscale.sim.metrics import PolicyResult, ScenarioResult


def _ready(r: PolicyResult) -> list[float]:
    return [float(sum(s.ready[i] for s in r.series.roles)) for i in range(len(r.series.t_s))]


def _queue(r: PolicyResult) -> list[float]:
    return [float(sum(s.queue_depth[i] for s in r.series.roles)) for i in range(len(r.series.t_s))]


def _ttft(r: PolicyResult) -> tuple[list[float], list[float]]:
    pts = [(t, v) for t, v in zip(r.series.t_s, r.series.ttft_p99_s, strict=True) if v is not None]
    return [t for t, _ in pts], [v for _, v in pts]


def write_plots(result: ScenarioResult, out_dir: Path) -> list[Path]:
    """Write the three PNGs into ``out_dir`` (created if needed); returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    title = f"{result.stack}/{result.model}: {result.scenario} (seed {result.seed})"
    specs = [
        ("replicas.png", "ready replicas (all roles)", _ready, False),
        ("queue_depth.png", "waiting requests (vLLM queues + gateway)", _queue, False),
    ]
    paths: list[Path] = []
    for name, ylabel, fn, log in specs:
        fig, ax = plt.subplots(figsize=(10, 4.5))
        for r in result.results:
            ax.plot([t / 60 for t in r.series.t_s], fn(r), label=r.name, linewidth=1.4)
        _finish(ax, title, ylabel, log)
        paths.append(_save(fig, out_dir / name))
    fig, ax = plt.subplots(figsize=(10, 4.5))
    for r in result.results:
        ts, vs = _ttft(r)
        ax.plot([t / 60 for t in ts], vs, label=r.name, linewidth=1.2)
    ax.axhline(result.slo.ttft_p99_s, color="grey", linestyle="--", linewidth=1, label="TTFT p99 target")
    _finish(ax, title, "TTFT p99 by arrival time, s", True)
    paths.append(_save(fig, out_dir / "ttft.png"))
    return paths


def _finish(ax: object, title: str, ylabel: str, log: bool) -> None:
    ax.set_title(title)  # type: ignore[attr-defined]
    ax.set_xlabel("minutes")  # type: ignore[attr-defined]
    ax.set_ylabel(ylabel)  # type: ignore[attr-defined]
    if log:
        ax.set_yscale("log")  # type: ignore[attr-defined]
    ax.grid(True, alpha=0.3)  # type: ignore[attr-defined]
    ax.legend(fontsize=8)  # type: ignore[attr-defined]


def _save(fig: object, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()  # type: ignore[attr-defined]
    fig.savefig(path, dpi=110, metadata={"Software": None})  # type: ignore[attr-defined]
    plt.close(fig)  # type: ignore[arg-type]
    return path
