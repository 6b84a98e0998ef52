"""``gpuscale doctor``: why each GPU pod of a cluster dump stays Pending (Karpenter, kube-scheduler, KAI, the device
plugin), with the objects that prove it and the metrics to confirm it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from gpuscale.cli.common import StackFileOpt, StackOpt, check_outputs, console, fail, say, spec_from_options, write_text
from gpuscale.doctor.cluster import Settings
from gpuscale.doctor.diagnose import diagnose
from gpuscale.doctor.dump import KUBECTL_COMMAND, DumpError, read_dump
from gpuscale.doctor.findings import Finding, Report
from gpuscale.spec.topology import ProvisioningSpec

EXIT_STUCK = 1
DOCTOR_EXIT_CODES = (
    "Exit codes: 0 no GPU pod is stuck (any pending one is waiting normally for a node); 1 a GPU pod is stuck (its "
    "layer and cause are printed); 2 invalid input (the dump, stack file, an option or the --json path), nothing "
    "written."
)


def _settings(stack: str | None, stack_file: Path | None) -> Settings:
    if stack is None and stack_file is None:
        return Settings.from_provisioning(ProvisioningSpec())
    spec = spec_from_options(stack, stack_file)
    return Settings.from_provisioning(spec.topology.provisioning,
                                      frozenset(p.name for p in spec.topology.gpu_pools))


def _table(title: str, findings: list[Finding]) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("pod", "layer", "cause"):
        table.add_column(column, overflow="fold")
    for f in findings:
        table.add_row(Text(f.pod), Text(f.layer), Text(f.cause))
    return table


def _details(findings: list[Finding]) -> None:
    for f in findings:
        say(f"{f.pod} ({f.layer}): {f.cause}")
        for line in f.evidence:
            say(f"  evidence: {line}")
        for line in f.confirm_with:
            say(f"  confirm:  {line}", style="dim")


def print_report(report: Report) -> None:
    """A table per verdict (pod, layer, cause), then each finding's evidence and what confirms it."""
    if report.stuck:
        console.print(_table(f"stuck: {len(report.stuck)} cause(s)", report.stuck))
    if report.in_progress:
        console.print(_table(f"in progress: {len(report.in_progress)} pod(s) waiting normally", report.in_progress))
    if not report.stuck and not report.in_progress:
        say("no GPU pod is Pending")
        return
    _details([*report.stuck, *report.in_progress])
    if not report.stuck:
        say("nothing is stuck: every pending GPU pod is waiting for a node that is on its way")


def doctor(
    dump: Annotated[
        Path,
        typer.Option("--dump", help=f"A cluster dump: the JSON List of `{KUBECTL_COMMAND}`, or a directory of such "
                     "files.", show_default=False),
    ],
    stack: StackOpt = None,
    stack_file: StackFileOpt = None,
    json_out: Annotated[
        Path | None,
        typer.Option("--json", help="Also write the findings as JSON ({\"stuck\": [...], \"in_progress\": [...]}).",
                     dir_okay=False, show_default=False),
    ] = None,
) -> None:
    """Say, for every GPU pod of the dump that is Pending, which layer holds it and why (Karpenter, kube-scheduler,
    KAI or the device plugin), with the objects that prove it and the metrics to confirm it, or that it is waiting
    normally for a node. With a stack, its GPU pools and node timings are what "normal" means.
    """
    check_outputs((json_out, "--json", False))
    settings = _settings(stack, stack_file)
    try:
        cluster = read_dump(dump)
    except DumpError as exc:
        fail([str(exc)], "gpuscale doctor")
    report = diagnose(cluster, settings)
    print_report(report)
    if json_out is not None:
        write_text(json_out, report.model_dump_json(indent=2) + "\n", "--json")
    raise typer.Exit(report.exit_code)
