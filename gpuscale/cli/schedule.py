"""``gpuscale schedule``: the real KAI Scheduler over what a stack emits, before anything is deployed."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.table import Table
from rich.text import Text

from gpuscale.cli.common import (
    StackFileOpt,
    StackOpt,
    check_outputs,
    checked_sizing,
    console,
    fail,
    fail_problems,
    say,
    source_of,
    spec_from_options,
    step,
    write_text,
)
from gpuscale.problems import Problems
from gpuscale.schedule.binary import check_cache_dir, go_executable, go_version
from gpuscale.schedule.report import ScheduleReport, shorten
from gpuscale.schedule.stack import schedule_level

EXIT_MUST_BIND = 1
"""A role's warm minimum does not bind (2 stays "invalid input or no verdict")."""
SCHEDULE_EXIT_CODES = (
    "Exit codes: 0 every role's warm minimum binds; 1 one does not (KAI's reasons are printed); 2 invalid input "
    "(stack file, option or --json path) or no verdict (Go missing, the build failed), nothing written."
)


def schedule(
    stack: StackOpt = None,
    stack_file: StackFileOpt = None,
    replicas: Annotated[
        Literal["warm", "peak", "max"],
        typer.Option("--replicas", help="Replicas per role: warm (the autoscaler's minimum), peak (at peak traffic) "
                     "or max (the autoscaler's ceiling)."),
    ] = "peak",
    json_out: Annotated[
        Path | None,
        typer.Option("--json", help="Also write the report (per role and queue, KAI's full messages) here.",
                     dir_okay=False, show_default=False),
    ] = None,
) -> None:
    """Schedule every role's pods at a replica count with the real KAI Scheduler (v0.17.0) on the nodes the GPU
    pools can launch; print what binds, what stays Pending and KAI's reasons.

    Needs Go 1.26+; the first run builds the scheduler (minutes), later runs reuse it.
    """
    check_outputs((json_out, "--json", False))
    spec = spec_from_options(stack, stack_file)
    source = source_of(stack, stack_file)
    sizing = checked_sizing(spec, source)
    # say what to install or change before the synth and the build (a ScheduleRefusal: exit 2, cli.main.Command)
    check_cache_dir()
    go_version(go_executable())
    from gpuscale.cli.synth import print_warnings
    from gpuscale.synth.render import ProgramUnavailableError, synth_spec

    name = stack or spec.environment.name
    try:
        with step(f"synthesizing {name} (Pulumi program under mocks)", f"synthesized {name}"):
            result = synth_spec(spec, stack=stack)
    except ProgramUnavailableError as exc:
        fail([str(exc)], "gpuscale schedule")
    except Problems as exc:
        fail_problems(exc, source)
    print_warnings(result)
    objects = [obj for _, obj in result.kubernetes_objects()]
    with step(f"scheduling {name} at {replicas} replicas with the KAI Scheduler (its first build takes minutes)",
              "scheduled"):
        scheduled = schedule_level(spec, sizing, objects, result.charts(), replicas)
    report = scheduled.report
    _print(report, name, replicas)
    if json_out is not None:
        doc = {"replicas": replicas, "ok": report.ok, **asdict(report)}
        write_text(json_out, json.dumps(doc, indent=2, default=str) + "\n", "--json")
    raise typer.Exit(0 if report.ok else EXIT_MUST_BIND)


def _status(pending: int, ok: bool) -> Text:
    if pending == 0:
        return Text("ok", style="green")
    return Text("pending", style="yellow") if ok else Text("WARM MINIMUM PENDING", style="bold red")


def _print(report: ScheduleReport, name: str, level: str) -> None:
    pools = ", ".join(f"{p}: {n} x {it}" for p, (it, n) in sorted(report.nodes_per_pool.items()))
    say(f"schedule {name} at {level} replicas: KAI Scheduler {report.kai_version}, {report.sessions} session(s), "
        f"nodes {pools or 'none'}")
    roles = Table("model/role", "queue", "bound / requested", "warm min", "GPUs bound", "status", box=None)
    for r in report.roles:
        roles.add_row(f"{r.model}/{r.role}", r.queue, f"{r.bound} / {r.requested}", str(r.warm_minimum),
                      str(r.gpus_bound), _status(r.pending, r.ok))
    console.print(roles)
    queues = Table("queue", "parent", "GPUs bound", "quota", "limit", "preemptible", box=None)
    for q in report.queues:
        queues.add_row(q.name, q.parent or "-", str(q.gpus_bound), f"{q.gpu_quota:g}",
                       "unlimited" if q.gpu_limit is None else f"{q.gpu_limit:g}", "yes" if q.preemptible else "no")
    console.print(queues)
    for r in report.roles:
        if r.pending:
            say(f"{r.model}/{r.role}: {r.pending} replica(s) pending; KAI says:")
            for reason in r.reasons:
                say(f"  - {shorten(reason)}")
    for e in report.evictions:
        say(f"evicted {e.namespace}/{e.pod} from {e.node} ({e.action}): {e.message}")
    for note in report.notes:
        say(f"note: {note}", stderr=True)
