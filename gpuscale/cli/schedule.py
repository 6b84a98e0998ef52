"""``gpuscale schedule``: the real KAI Scheduler over what a stack emits, before anything is deployed."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.table import Table

from gpuscale.cli.common import StackFileOpt, StackOpt, checked_sizing, console, err_console, fail, spec_from_options
from gpuscale.schedule.binary import BuildError, GoUnavailableError, go_executable
from gpuscale.schedule.replay import ReplayError
from gpuscale.schedule.report import ScheduleReport, shorten
from gpuscale.schedule.snapshot import SnapshotError
from gpuscale.schedule.stack import schedule_level
from gpuscale.synth.render import ProgramUnavailableError, synth_spec

EXIT_MUST_BIND = 1
"""A role's warm minimum does not bind (2 stays "invalid input or no verdict")."""


def schedule(
    stack: StackOpt = None,
    stack_file: StackFileOpt = None,
    replicas: Annotated[
        Literal["warm", "peak", "max"],
        typer.Option("--replicas", help="Replicas per role: warm (autoscaler minimum), peak (at peak traffic) or max."),
    ] = "peak",
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write the report here.", dir_okay=False)] = None,
) -> None:
    """Schedule every role's pods at a replica count with the real KAI Scheduler (v0.17.0) on the nodes the pools
    can launch; print what binds, what stays pending and KAI's reasons.

    Exits 0 when every role's warm minimum binds, 1 when one does not, 2 on bad input or when no verdict can be
    had (Go missing, build failed).
    """
    spec = spec_from_options(stack, stack_file)
    sizing = checked_sizing(spec)
    try:
        go_executable()  # say what to install before minutes of synth and build
    except GoUnavailableError as exc:
        fail([str(exc)], source="gpuscale schedule")
    try:
        result = synth_spec(spec, stack=stack)
    except ProgramUnavailableError as exc:
        fail([str(exc)])
    except ValueError as exc:  # what validation and the cross-layer checks above let through (SpecProblems, ...)
        fail(str(exc).splitlines())
    objects = [obj for _, obj in result.kubernetes_objects()]
    try:
        scheduled = schedule_level(spec, sizing, objects, result.charts(), replicas)
    except (GoUnavailableError, BuildError, ReplayError, SnapshotError) as exc:
        fail([str(exc)], source="gpuscale schedule")
    report = scheduled.report
    _print(report, stack or spec.environment.name, replicas)
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        doc = {"replicas": replicas, "ok": report.ok, **asdict(report)}
        json_out.write_text(json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")
    raise typer.Exit(0 if report.ok else EXIT_MUST_BIND)


def _print(report: ScheduleReport, name: str, level: str) -> None:
    pools = ", ".join(f"{p}: {n} x {it}" for p, (it, n) in sorted(report.nodes_per_pool.items()))
    console.print(f"schedule [bold]{name}[/] at {level} replicas: KAI Scheduler {report.kai_version}, "
                  f"{report.sessions} session(s), nodes {pools or 'none'}", highlight=False)
    roles = Table("model/role", "queue", "bound / requested", "warm min", "GPUs bound", "status", box=None)
    for r in report.roles:
        status = "[green]ok[/]" if r.pending == 0 else ("[yellow]pending[/]" if r.ok else "[red]WARM MINIMUM PENDING[/]")
        roles.add_row(f"{r.model}/{r.role}", r.queue, f"{r.bound} / {r.requested}", str(r.warm_minimum),
                      str(r.gpus_bound), status)
    console.print(roles)
    queues = Table("queue", "parent", "GPUs bound", "quota", "limit", "preemptible", box=None)
    for q in report.queues:
        queues.add_row(q.name, q.parent or "-", str(q.gpus_bound), f"{q.gpu_quota:g}",
                       "unlimited" if q.gpu_limit is None else f"{q.gpu_limit:g}", "yes" if q.preemptible else "no")
    console.print(queues)
    for r in report.roles:
        if r.pending:
            console.print(f"{r.model}/{r.role}: {r.pending} replica(s) pending; KAI says:", highlight=False)
            for reason in r.reasons:
                console.print(f"  - {shorten(reason)}", highlight=False, markup=False, soft_wrap=True)
    for e in report.evictions:
        console.print(f"evicted {e.namespace}/{e.pod} from {e.node} ({e.action}): {e.message}", highlight=False,
                      markup=False, soft_wrap=True)
    for note in report.notes:
        err_console.print(f"note: {note}", highlight=False, markup=False, soft_wrap=True)
