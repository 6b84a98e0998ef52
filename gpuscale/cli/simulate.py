"""``gpuscale simulate``: run a scenario (or a trace) against the autoscaling policies and compare them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from gpuscale.cli.common import StackFileOpt, StackOpt, console, fail, spec_from_options
from gpuscale.sim.metrics import ScenarioResult
from gpuscale.sim.runner import Runner
from gpuscale.sim.scenarios import ScenarioError, build_scenario, plan_scenarios, scenario_names
from gpuscale.sim.traffic import TraceError, TraceTraffic
from gpuscale.sizing import SizingError

ScenarioOpt = Annotated[
    str | None,
    typer.Option("--scenario", help=f"Scenario: {', '.join(n for n in scenario_names() if n != 'trace')} (default stack).",
                 show_default=False),
]
TraceOpt = Annotated[
    Path | None, typer.Option("--trace", help="Replay a trace (*_norm.csv or Azure 2023 CSV) instead of a preset.", dir_okay=False)
]


def simulate(
    stack: StackOpt = None,
    stack_file: StackFileOpt = None,
    model: Annotated[str | None, typer.Option("--model", help="Model to simulate (default the first).")] = None,
    scenario: ScenarioOpt = None,
    trace: TraceOpt = None,
    compress: Annotated[float, typer.Option("--compress", help="Divide trace arrival times by this factor.")] = 1.0,
    policies: Annotated[str | None, typer.Option("--policies", help="Comma-separated subset of the scenario's policies.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Random seed (same seed, same results).")] = 0,
    duration_s: Annotated[float | None, typer.Option("--duration-s", help="Simulated seconds (default per scenario).")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the results as JSON here.", dir_okay=False)] = None,
    plot: Annotated[Path | None, typer.Option("--plot", help="Write replicas/queue/TTFT PNGs into this directory.", file_okay=False)] = None,
    replay: Annotated[str, typer.Option("--replay", help="Bucketed traces: batch (each bucket at once) or spread (uniform within it, seeded).")] = "spread",
    spot_rate: Annotated[float | None, typer.Option("--spot-interruptions-per-hour", help="Spot interruptions per node-hour (default: the catalogue figure for spot pools, 0 otherwise).")] = None,
    list_scenarios: Annotated[bool, typer.Option("--list", help="Print every scenario name and exit.")] = False,
    list_plan: Annotated[bool, typer.Option("--plan-scenarios", help="Print the scenarios the plan quotes, in order, and exit.")] = False,
) -> None:
    """Simulate the three autoscaling layers on a scenario or a trace; print the policy comparison."""
    if list_scenarios or list_plan:
        print("\n".join(plan_scenarios() if list_plan else scenario_names()))
        return
    problems = []
    if replay not in ("batch", "spread"):
        problems.append(f"--replay must be batch or spread, got {replay!r}")
    if spot_rate is not None and spot_rate < 0:
        problems.append(f"--spot-interruptions-per-hour must be >= 0, got {spot_rate:g}")
    if trace is not None and scenario is not None:
        problems.append("pass either --scenario or --trace, not both")
    if compress <= 0:
        problems.append(f"--compress must be > 0, got {compress:g}")
    if duration_s is not None and duration_s <= 0:
        problems.append(f"--duration-s must be > 0, got {duration_s:g}")
    if problems:
        fail(problems)
    spec = spec_from_options(stack, stack_file)
    chosen = [p.strip() for p in policies.split(",") if p.strip()] if policies else None
    try:
        tr = TraceTraffic(path=trace, compress=compress, replay=replay) if trace is not None else None
        sc = build_scenario(
            scenario or "stack", spec, model=model, duration_s=duration_s, trace=tr, spot_interruptions_per_node_hour=spot_rate,
        )
        runner = Runner(sc, seed=seed, policies=chosen)
        result = _run(runner)
    except (ScenarioError, TraceError, SizingError) as exc:
        fail([str(exc)])
    console.print(result_table(result))
    console.print(traffic_line(result), highlight=False)
    console.print(f"[bold]{result.score_formula}[/]", highlight=False)
    console.print(result.score_explanation, highlight=False, style="dim")
    for f in result.findings:
        console.print(f"- {f}", highlight=False)
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(result.model_dump(mode="json"), indent=2) + "\n")
        console.print(f"wrote {json_out}")
    if plot is not None:
        from gpuscale.sim.plots import write_plots

        for p in write_plots(result, plot):
            console.print(f"wrote {p}")


def _run(runner: Runner) -> ScenarioResult:
    names = [v.name for v in runner.variants]
    with Progress(
        TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"), TimeElapsedColumn(),
        console=console, transient=True, disable=not console.is_terminal,
    ) as progress:
        tasks: dict[str, TaskID] = {n: progress.add_task(n, total=1.0) for n in names}
        return runner.run(lambda name, frac: progress.update(tasks[name], completed=frac))


def _num(x: float | None, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def traffic_line(result: ScenarioResult) -> str:
    t = result.traffic
    line = f"traffic: {t.kind}, {t.requests:,} request{'s' if t.requests != 1 else ''}"
    if t.granularity_s is not None:
        line += f", arrivals in {t.granularity_s:g} s buckets replayed {t.replay}"
    if t.prefix_ids:
        line += ", with prefix ids"
    lb = ", ".join(f"{p.attainment:.0%}: {p.gpu_hours:,.1f}" for p in result.lower_bound[-4:])
    return line + f". Lower bound on GPU-hours by attainment: {lb}."


def result_table(result: ScenarioResult) -> Table:
    slo = result.slo
    t = Table(
        title=(
            f"{result.stack}/{result.model}: {result.scenario}, {result.duration_s / 60:.0f} min of arrivals + drain, seed "
            f"{result.seed} (SLO TTFT p99 {slo.ttft_p99_s:g} s, ITL p99 {slo.itl_p99_s * 1000:g} ms, timeout "
            f"{slo.request_timeout_s:g} s)"
        ),
        caption=result.description,
    )
    cols = ("policy", "on time all / servable", "misses queue/cold/evict/lost/rej/infeas", "TTFT p50", "TTFT p99",
            "ITL p99", "GPU-h", "x lower bound", "idle GPU-min prov/load/gang/empty", "cost $", "score")
    for c in cols:
        t.add_column(c, justify="left" if c == "policy" else "right")
    for r in result.results:
        idle, m = r.idle_gpu_minutes, r.misses
        lb = r.gpu_hours_vs_lower_bound
        t.add_row(
            r.name, f"{r.slo_attainment:.1%} / {r.slo_attainment_servable:.1%}",
            f"{m.queueing:,}/{m.cold_start:,}/{m.eviction:,}/{m.lost_in_flight:,}/{m.rejected:,}/{m.infeasible:,}",
            _num(r.ttft_p50_s, ".2f"), _num(r.ttft_p99_s, ".2f"),
            _num(r.itl_p99_s * 1000 if r.itl_p99_s is not None else None, ".0f") + (" ms" if r.itl_p99_s is not None else ""),
            f"{r.gpu_hours:.1f}", _num(lb, ".2f"),
            f"{idle.provisioning:.0f}/{idle.loading:.0f}/{idle.gang_wait:.0f}/{idle.empty:.0f}",
            f"{r.cost_usd:,.0f}", f"{r.score:.1f}",
        )
    return t
