"""``gpuscale synth``: the offline render of a stack (``gpuscale diff`` compares two)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.text import Text

from gpuscale.cli.common import (
    StackFileOpt,
    StackOpt,
    check_outputs,
    err_console,
    fail,
    fail_problems,
    say,
    source_of,
    spec_from_options,
    warn,
)
from gpuscale.input_files import SYNTH_FILE_MAX_BYTES, read_text_bounded
from gpuscale.policy.rules import check_resources
from gpuscale.problems import Problems
from gpuscale.stackfile import format_errors
from gpuscale.synth.layout import FORMAT, MANIFESTS_DIR, RESOURCES_FILE
from gpuscale.synth.render import ProgramUnavailableError, SynthResult, synth_spec

EXIT_ERROR = 1
"""``gpuscale synth``: the platform program is missing (2 stays "invalid input")."""
SYNTH_EXIT_CODES = (
    "Exit codes: 0 written; 1 the platform program is not installed; 2 invalid input (stack file, option or --out), "
    "nothing written."
)

OutOpt = Annotated[
    Path | None,
    typer.Option("--out", help="Output directory (default synth-out/<environment name>); a previous synth there is "
                 "replaced, any other non-empty directory is refused.", file_okay=False, show_default=False),
]


def synth(stack: StackOpt = None, stack_file: StackFileOpt = None, out: OutOpt = None) -> None:
    """Render what the stack would create, offline: resources.json, manifests/ and charts.yaml.

    Runs the Pulumi program under mocks (no credentials, no cloud calls); component warnings are printed as
    warning: lines and the policy pack's findings as policy lines, both on stderr.
    """
    check_outputs((out, "--out", True))
    _refuse_foreign_dir(out)
    spec = spec_from_options(stack, stack_file)
    target = out if out is not None else Path("synth-out") / spec.environment.name
    if out is None:
        check_outputs((target, "--out", True))
        _refuse_foreign_dir(target)
    try:
        result = synth_spec(spec, stack=stack)
    except ProgramUnavailableError as exc:
        err_console.print(Text.assemble(("error", "bold red"), f": {exc}"), soft_wrap=True)
        raise typer.Exit(EXIT_ERROR) from None
    except Problems as exc:
        fail_problems(exc, source_of(stack, stack_file))
    except ValidationError as exc:
        fail(format_errors(exc), source_of(stack, stack_file))
    try:
        written = result.write(target)
    except OSError as exc:
        fail([f"--out {target}: cannot write the synth ({exc.strerror or exc})"])
    _report(result, target, len(written), stage=spec.environment.stage)


def _refuse_foreign_dir(out: Path | None) -> None:
    """A previous synth may be replaced; a directory holding something else (``--out .``) never is."""
    if out is None or not out.is_dir() or not any(out.iterdir()):
        return
    marker = out / RESOURCES_FILE
    try:
        is_synth = json.loads(read_text_bounded(marker, SYNTH_FILE_MAX_BYTES, "a synth resources.json")).get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        is_synth = False
    if not is_synth:
        fail([f"--out {out}: a non-empty directory that is not a gpuscale synth output (no {RESOURCES_FILE} with "
              f"format {FORMAT}); synth replaces its {MANIFESTS_DIR}/, so name an empty or new directory"])


def _report(result: SynthResult, target: Path, files: int, *, stage: str) -> None:
    objects = result.kubernetes_objects()
    say(
        f"synth {result.stack}: {len(result.resources)} resources, {len(objects)} Kubernetes objects, "
        f"{len(result.charts())} Helm charts -> {target} ({files} files; manifests in {target / MANIFESTS_DIR})"
    )
    print_warnings(result)
    rows = [(r["type"], r["inputs"] if isinstance(r["inputs"], dict) else {}) for r in result.resources]
    # the policy pack's rules, offline: what `pulumi preview --policy-pack policy` would report
    for i, rule, msg in check_resources(rows, stage=stage):
        say(f"policy {rule}: {result.resources[i]['key']}: {msg}", stderr=True)


def print_warnings(result: SynthResult) -> None:
    """What the components warned about (pulumi.log.warn), as ``warning:`` lines on stderr."""
    for w in result.warnings:
        warn(w)
