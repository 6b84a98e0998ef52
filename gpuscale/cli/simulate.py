"""``gpuscale simulate``: run a scenario (or a trace) against the autoscaling policies and compare them."""

from __future__ import annotations

import enum
import json
import math
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from gpuscale.cli.common import (
    StackFileOpt,
    StackOpt,
    check_outputs,
    console,
    fail,
    positive_finite,
    say,
    spec_from_options,
    write_text,
)
from gpuscale.sim.best_fixed import BEST_FIXED
from gpuscale.sim.metrics import ScenarioResult
from gpuscale.sim.runner import Runner
from gpuscale.sim.scenarios import ScenarioError, build_scenario, plan_runs, plan_scenarios, scenario_names
from gpuscale.sim.traffic import TraceTraffic
from gpuscale.sizing import SizingError

POLICIES_HELP = (
    "Comma-separated subset of the scenario's policies (default all; an unknown name is refused with the scenario's "
    "list). `gpuscale simulate --list --stack NAME` prints every scenario with its policies for that stack."
)
MAX_DURATION_S = 7 * 86_400


class Replay(enum.StrEnum):
    batch = "batch"
    spread = "spread"


def non_negative_finite(value: float | None) -> float | None:
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise typer.BadParameter(f"must be a finite number >= 0, got {value:g}")
    return value
"""Longest simulation (a week); longer runs hold every request of the week in memory."""

ScenarioOpt = Annotated[
    str | None,
    typer.Option("--scenario", help=f"Scenario: {', '.join(n for n in scenario_names() if n != 'trace')} (default stack; "
                 "not with --trace).", show_default=False),
]
TraceOpt = Annotated[
    Path | None,
    typer.Option("--trace", help="Replay a trace (*_norm.csv or Azure 2023 CSV) instead of a preset.", dir_okay=False,
                 show_default=False),
]


def simulate(
    stack: StackOpt = None,
    stack_file: StackFileOpt = None,
    model: Annotated[
        str | None, typer.Option("--model", help="Model to simulate (default the first).", show_default=False)
    ] = None,
    scenario: ScenarioOpt = None,
    trace: TraceOpt = None,
    compress: Annotated[
        float, typer.Option("--compress", help="Divide trace arrival times by this factor (> 0).", callback=positive_finite)
    ] = 1.0,
    policies: Annotated[str | None, typer.Option("--policies", help=POLICIES_HELP, show_default=False)] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Random seed (same seed, same results).")] = 0,
    duration_s: Annotated[
        float | None,
        typer.Option("--duration-s", help=f"Simulated seconds, at most {MAX_DURATION_S:,} (default per scenario).",
                     callback=positive_finite, show_default=False),
    ] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write the results as JSON here.", dir_okay=False, show_default=False)
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option("--plot", help="Write replicas/queue/TTFT PNGs into this directory.", file_okay=False,
                     show_default=False),
    ] = None,
    replay: Annotated[
        Replay, typer.Option("--replay", help="Bucketed traces: batch (each bucket at once) or spread (uniform within it, seeded).")
    ] = Replay.spread,
    warmup_s: Annotated[
        float,
        typer.Option("--warmup-s", help="Replay the first S seconds of the same traffic before the scored window, not "
                     "scored, so every policy enters it warm (at most the run's duration; 0: start cold).",
                     callback=non_negative_finite),
    ] = 0.0,
    spot_rate: Annotated[
        float | None,
        typer.Option("--spot-interruptions-per-hour", help="Spot interruptions per node-hour (default: the catalogue figure "
                     "for spot pools, 0 otherwise).", show_default=False, callback=non_negative_finite),
    ] = None,
    list_scenarios: Annotated[
        bool, typer.Option("--list", help="Print every scenario and exit; with --stack/--stack-file, each with its policies.")
    ] = False,
    list_plan: Annotated[
        bool,
        typer.Option("--plan-scenarios", help="Print the scenarios the plan quotes, in order, and exit; with "
                     "--stack/--stack-file, one line per run the plan quotes: scenario, model, JSON file stem."),
    ] = False,
) -> None:
    """Simulate the three autoscaling layers on a scenario or a trace; print the policy comparison."""
    if list_plan:
        if stack is None and stack_file is None:
            print("\n".join(plan_scenarios()))
            return
        spec = spec_from_options(stack, stack_file)
        print("\n".join(f"{sc} {m} {stem}" for sc in plan_scenarios() for m, stem in plan_runs(spec, sc)))
        return
    if list_scenarios:
        _list(stack, stack_file, model)
        return
    problems = _option_problems(scenario, trace, duration_s, policies)
    if problems:
        fail(problems)
    check_outputs((json_out, "--json", False), (plot, "--plot", True))
    spec = spec_from_options(stack, stack_file)
    chosen = [p.strip() for p in policies.split(",") if p.strip()] if policies else None
    # a ScenarioError, TraceError or SizingError is a Refusal: the command ends with it, exit 2 (cli.main.Command)
    tr = TraceTraffic(path=trace, compress=compress, replay=replay.value) if trace is not None else None
    sc = build_scenario(
        scenario or "stack", spec, model=model, duration_s=duration_s, trace=tr, spot_interruptions_per_node_hour=spot_rate,
    )
    result = _run(Runner(sc, seed=seed, policies=chosen, warmup_s=warmup_s, best_fixed=True))
    _report(result, json_out, plot)


def _option_problems(scenario: str | None, trace: Path | None, duration_s: float | None,
                     policies: str | None) -> list[str]:
    """Options that contradict each other or name nothing, all at once."""
    problems = []
    if trace is not None and scenario is not None:
        problems.append("pass either --scenario or --trace, not both")
    if duration_s is not None and duration_s > MAX_DURATION_S:
        problems.append(f"--duration-s {duration_s:g} is more than a week ({MAX_DURATION_S:,} s)")
    if policies is not None and not [p for p in policies.split(",") if p.strip()]:
        problems.append(f"--policies {policies!r} names no policy; {POLICIES_HELP}")
    return problems


def _report(result: ScenarioResult, json_out: Path | None, plot: Path | None) -> None:
    """The comparison table and findings on stdout; the JSON and the plots where they were asked for."""
    console.print(result_table(result))
    say(traffic_line(result))
    say(result.score_formula, style="bold")
    say(result.score_explanation, style="dim")
    for r in result.results:
        if r.lower_bound_note is not None:
            say(f"{r.name}: x lower bound n/a: {r.lower_bound_note}", style="dim")
    for f in result.findings:
        say(f"- {f}")
    if json_out is not None:
        write_text(json_out, json.dumps(result.model_dump(mode="json"), indent=2) + "\n", "--json")
        say(f"wrote {json_out}")
    if plot is not None:
        from gpuscale.sim.plots import write_plots

        try:
            paths = write_plots(result, plot)
        except OSError as exc:
            fail([f"--plot {plot}: cannot write the plots ({exc.strerror or exc})"])
        for p in paths:
            say(f"wrote {p}")


def _run(runner: Runner) -> ScenarioResult:
    names = [v.name for v in runner.variants] + ([BEST_FIXED] if runner.best_fixed else [])
    with Progress(
        TextColumn("{task.description}", markup=False), BarColumn(), TextColumn("{task.percentage:>3.0f}%"), TimeElapsedColumn(),
        console=console, transient=True, disable=not console.is_terminal,
    ) as progress:
        tasks: dict[str, TaskID] = {n: progress.add_task(n, total=1.0) for n in names}
        return runner.run(lambda name, frac: progress.update(tasks[name], completed=frac))


def _num(x: float | None, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def _list(stack: str | None, stack_file: Path | None, model: str | None) -> None:
    if stack is None and stack_file is None:
        print("\n".join(scenario_names()))
        return
    spec = spec_from_options(stack, stack_file)
    for name in scenario_names():
        if name == "trace":
            print("trace: as stack, on the --trace file")
            continue
        try:
            variants = build_scenario(name, spec, model=model, duration_s=600).variants
        except (ScenarioError, SizingError) as exc:
            print(f"{name}: not available for this stack ({exc})")
            continue
        print(f"{name}: {', '.join(v.name for v in variants)}")


def traffic_line(result: ScenarioResult) -> str:
    t = result.traffic
    line = f"traffic: {t.kind}, {t.requests:,} request{'s' if t.requests != 1 else ''}"
    if t.granularity_s is not None:
        line += f", arrivals in {t.granularity_s:g} s buckets replayed {t.replay}"
    elif t.kind == "trace":
        line += ", arrivals replayed exactly (no bucket grid detected)"
    if t.prefix_ids:
        line += ", with prefix ids"
    if t.warmup_s > 0:
        line += f"; warm start: {t.warmup_s:g} s of the same traffic ({t.warmup_requests:,} requests) replayed first, not scored"
    lb = ", ".join(f"{p.attainment:.0%}: {p.gpu_hours:,.1f}" for p in result.lower_bound[-4:])
    return line + f". Lower bound on GPU-hours by attainment: {lb}."


def result_table(result: ScenarioResult) -> Table:
    slo = result.slo
    t = Table(
        title=Text(
            f"{result.stack}/{result.model}: {result.scenario}, {result.duration_s / 60:.0f} min of arrivals + drain, seed "
            f"{result.seed} (SLO TTFT p99 {slo.ttft_p99_s:g} s, ITL p99 {slo.itl_p99_s * 1000:g} ms, timeout "
            f"{slo.request_timeout_s:g} s)"
        ),
        caption=Text(result.description),
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
            f"{r.gpu_hours:.1f}", "n/a" if lb is None else f"{lb:.2f}",
            f"{idle.provisioning:.0f}/{idle.loading:.0f}/{idle.gang_wait:.0f}/{idle.empty:.0f}",
            f"{r.cost_usd:,.0f}", f"{r.score:.1f}",
        )
    return t
