"""``gpuscale tune``: search a model's autoscaling parameters by simulation against a trace and write them back."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from gpuscale.cli.common import (
    EXIT_INVALID,
    ProgressLines,
    StackFileOpt,
    StackOpt,
    check_outputs,
    console,
    err_console,
    fail,
    fail_problems,
    positive_finite,
    say,
    source_of,
    spec_from_options,
    warn,
    write_bytes,
)
from gpuscale.cli.simulate import Replay, non_negative_finite
from gpuscale.cli.workload import TraceArg
from gpuscale.sim.metrics import PolicyResult
from gpuscale.sim.scenarios.base import pick_model
from gpuscale.sim.traffic import TraceTraffic
from gpuscale.stackfile import StackConfigError, read_stack_bytes, stack_file_path
from gpuscale.tune.evaluate import gpu_hours_vs_bound, score
from gpuscale.tune.params import RoleParams
from gpuscale.tune.tuner import DEFAULT_MAX_EVALS, TuneOutcome, decisions, is_fixed_allocation, tune
from gpuscale.tune.writeback import WritebackError, check_text, updated

TUNE_EXIT_CODES = (
    "Exit codes: 0 tuned (or nothing to change); 2 invalid input (stack file, option, path or trace), or the stack's "
    "limits cannot carry the trace (the message says what to raise); 130 interrupted while writing; nothing written on "
    "2 or 130."
)


def tune_command(
    trace: TraceArg,
    stack: StackOpt = None,
    stack_file: StackFileOpt = None,
    compress: Annotated[
        float, typer.Option("--compress", help="Divide trace arrival times by this factor (> 0).", callback=positive_finite)
    ] = 1.0,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Random seed (same seed, same search and result).")] = 0,
    model: Annotated[
        str | None, typer.Option("--model", help="Model to tune (default the first).", show_default=False)
    ] = None,
    replay: Annotated[
        Replay, typer.Option("--replay", help="Bucketed traces: batch (each bucket at once) or spread (uniform within it, seeded).")
    ] = Replay.spread,
    max_evals: Annotated[
        int, typer.Option("--max-evals", min=1, max=1000, help="Simulations the search may run (bounds its time).")
    ] = DEFAULT_MAX_EVALS,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the tuned values; write nothing.")] = False,
    holdout: Annotated[
        float | None,
        typer.Option("--holdout", min=0.05, max=0.95, help="Fit on the first part of the trace and score the tuned and "
                     "untuned policies on this share of its end, which the search never sees (e.g. 0.5).",
                     show_default=False),
    ] = None,
    warmup_s: Annotated[
        float,
        typer.Option("--warmup-s", help="Start each scored part after S seconds of the traffic before it (the "
                     "fit part: its own first S seconds), replayed but not scored.", callback=non_negative_finite),
    ] = 0.0,
) -> None:
    """Tune a model's autoscaling (target utilisation, burst mode, SLO guard, warm minimum, maximum, scale-down window,
    warm-up windows, consolidate_after) by simulating the trace, within the stack's quotas and pool limits; write the
    chosen values into the stack file, keeping its comments and layout.

    Prints before/after (attainment over all and servable requests, misses by cause, GPU-hours, cost, score, against the ceiling and the lower bound). When even the ceiling misses the SLO's goodput target, says which limits to raise and by how much, and writes nothing.
    """
    if stack is not None and stack_file is not None:
        fail(["pass either --stack or --stack-file, not both"])
    if stack is None and stack_file is None:
        fail(["pass --stack NAME or --stack-file PATH (the file the tuned values are written into)"])
    target = stack_file if stack_file is not None else _stack_path(stack)
    if not dry_run:
        check_outputs((target, "--stack-file" if stack_file is not None else "--stack", False))
    spec = spec_from_options(stack, stack_file)
    # a ScenarioError, TraceError or SizingError is a Refusal: the command ends with it, exit 2 (cli.main.Command)
    name = pick_model(spec, model).name
    tr = TraceTraffic(path=trace, compress=compress, replay=replay.value)
    cmd = f"gpuscale tune --trace {trace.name} --compress {compress:g} --seed {seed}" + (
        f" --model {name}" if model is not None else "") + (f" --replay {replay.value}" if replay != Replay.spread else "") + (
        f" --holdout {holdout:g}" if holdout is not None else "") + (f" --warmup-s {warmup_s:g}" if warmup_s > 0 else "")
    with ProgressLines(f"tuning {name} on {trace.name} x{compress:g}", max_evals) as progress:
        outcome = tune(spec, name, tr, seed=seed, max_evals=max_evals, tuned_on=cmd, progress=progress.update,
                       phase=progress.phase, heartbeat=progress.within, holdout=holdout, warmup_s=warmup_s)
    _report(outcome, trace.name, compress)
    _report_held_out(outcome, trace.name, compress)
    if not outcome.limits.carries:
        err_console.print(Text.assemble(("error", "bold red"), f": {source_of(stack, stack_file)}: the limits cannot carry the trace"))
        err_console.print(Text(f"  {outcome.limits.message(name)}"), soft_wrap=True)
        say("nothing written", stderr=True)
        raise typer.Exit(EXIT_INVALID)
    assert outcome.search is not None and outcome.after is not None
    _changes(outcome)
    if dry_run:
        say("--dry-run: nothing written")
        return
    if outcome.search.best == outcome.start:
        say(f"the stack's own values are the best found; {target} unchanged")
        return
    try:
        written = updated(read_stack_bytes(target), name, outcome.search.best, keda=model_of_backend(outcome) == "keda",
                          tuned_on=cmd, source=str(target))
        check_text(written.data, target)
    except StackConfigError as exc:
        fail_problems(exc, str(target))
    except WritebackError as exc:
        fail([f"cannot write the tuned values: {exc}"], str(target))
    for line in written.warnings:
        warn(line)
    write_bytes(target, written.data, "--stack-file" if stack_file is not None else "--stack")
    say(f"wrote the tuned values into {target}")


def _stack_path(stack: str | None) -> Path:
    assert stack is not None
    try:
        return stack_file_path(stack)
    except StackConfigError as exc:
        fail(exc.problems)


def model_of_backend(outcome: TuneOutcome) -> str:
    assert outcome.tuned is not None
    return next(m for m in outcome.tuned.models if m.name == outcome.model).autoscaling.backend


def _row(t: Table, name: str, r: PolicyResult, ref: float, ceiling: PolicyResult) -> None:
    m = r.misses
    lb = gpu_hours_vs_bound(r)
    gap = (r.slo_attainment_servable - ceiling.slo_attainment_servable) * 100
    t.add_row(
        name, f"{r.slo_attainment:.1%} / {r.slo_attainment_servable:.1%}", f"{gap:+.1f}",
        f"{m.queueing:,}/{m.cold_start:,}/{m.eviction:,}/{m.lost_in_flight:,}/{m.rejected:,}/{m.infeasible:,}",
        f"{r.gpu_hours:.2f}", "-" if lb == float("inf") else f"{lb:.2f}", f"{r.cost_usd:,.0f}", f"{score(r, ref):.1f}",
    )


def _table(title: str, runs: list[tuple[str, PolicyResult]], ceiling: PolicyResult) -> None:
    ref = min(r.gpu_hours for n, r in runs if n != "ceiling")
    t = Table(title=Text(title))
    for c in ("policy", "on time all / servable", "pts vs ceiling", "misses queue/cold/evict/lost/rej/infeas", "GPU-h",
              "x lower bound", "cost $", "score"):
        t.add_column(c, justify="left" if c == "policy" else "right")
    for name, r in runs:
        _row(t, name, r, ref, ceiling)
    console.print(t)


def _report(o: TuneOutcome, trace: str, compress: float) -> None:
    runs = [("before (stack as written)", o.before)] + ([("after (tuned)", o.after)] if o.after is not None else [])
    runs += [("duty-cycle HPA", o.duty), ("ceiling", o.ceiling)]
    _table(
        f"{o.model} on {trace} x{compress:g}: {o.profile.requests:,} requests; goal: servable attainment within "
        f"{o.goal.slack * 100:.2f} points of the ceiling's {o.goal.ceiling_servable:.1%}", runs, o.ceiling,
    )
    evals = o.search.evaluations if o.search is not None else 0
    say(
        f"{o.simulations} simulations ({evals} in the search) in {o.elapsed_s:.0f} s"
        + (f"; goal {'met' if o.goal.met(o.after) else 'not met'} after tuning" if o.after is not None else "")
    )


def _decisions_line(name: str, r: PolicyResult) -> str:
    n = decisions(r)
    if is_fixed_allocation(r):
        return f"{name}: no scaling decision in the scored window: a fixed allocation, not autoscaling"
    return f"{name}: {n:,} scaling decision{'s' if n != 1 else ''} in the scored window"


def _report_held_out(o: TuneOutcome, trace: str, compress: float) -> None:
    """The decision counts, and with ``--holdout`` both policies on the part the search never saw."""
    if o.after is not None:
        say(_decisions_line("tuned", o.after) + ("" if o.held_out is None else " (fit part)"))
    h = o.held_out
    if h is None:
        return
    runs = [("before (stack as written)", h.before), ("after (tuned on the fit part)", h.after), ("duty-cycle HPA", h.duty),
            ("ceiling", h.ceiling)]
    _table(
        f"held out: the last {h.fraction:.0%} of {trace} x{compress:g} (from {h.start_s:,.0f} s), never seen by the search; "
        f"goal: within {h.goal.slack * 100:.2f} points of the ceiling's {h.goal.ceiling_servable:.1%}", runs, h.ceiling,
    )
    say(_decisions_line("tuned, held out", h.after) + f"; goal {'met' if h.goal.met(h.after) else 'not met'} on the held-out part")


def _changes(o: TuneOutcome) -> None:
    assert o.search is not None
    best = o.search.best
    t = Table(title=Text("tuned values"))
    for c in ("role", "parameter", "before", "after"):
        t.add_column(c)
    for role, p in best.roles.items():
        before = o.start.roles[role]
        for field in RoleParams.model_fields:
            a, b = getattr(before, field), getattr(p, field)
            if field == "warm_schedule":
                a, b = _windows(a), _windows(b)
            t.add_row(role, field, str(a), str(b) + ("" if a == b else "  *"))
    t.add_row("pool", "consolidate_after", o.start.consolidate_after, best.consolidate_after)
    console.print(t)


def _windows(ws: list[object]) -> str:
    return "; ".join(f"{w.start} .. {w.end}: {w.replicas}" for w in ws) or "none"  # type: ignore[attr-defined]
