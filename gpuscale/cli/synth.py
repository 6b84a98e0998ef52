"""``gpuscale synth`` (offline render of a stack) and ``gpuscale diff`` (compare two renders)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from gpuscale.cli.common import StackFileOpt, StackOpt, console, err_console, fail, fail_problems, spec_from_options
from gpuscale.policy.rules import check_resources
from gpuscale.problems import Problems
from gpuscale.stackfile import format_errors
from gpuscale.synth.diff import MARKDOWN_LIMIT, NotASynthDirError, diff_synth_dirs, render_markdown, render_text
from gpuscale.synth.render import MANIFESTS_DIR, ProgramUnavailableError, SynthResult, synth_spec

EXIT_DIFFERENT = 1
"""``gpuscale diff``: the synths differ (0: equal; 2: not a synth directory)."""
EXIT_ERROR = 1
"""``gpuscale synth``: the platform program is missing (2 stays "invalid input")."""

OutOpt = Annotated[
    Path | None,
    typer.Option("--out", help="Output directory (default synth-out/<environment name>); a previous synth there is replaced.",
                 file_okay=False),
]


def synth(stack: StackOpt = None, stack_file: StackFileOpt = None, out: OutOpt = None) -> None:
    """Render what the stack would create, offline: resources.json, manifests/ and charts.yaml."""
    spec = spec_from_options(stack, stack_file)
    try:
        result = synth_spec(spec, stack=stack)
    except ProgramUnavailableError as exc:
        err_console.print(f"[bold red]error[/]: {exc}", highlight=False)
        raise typer.Exit(EXIT_ERROR) from None
    except Problems as exc:
        fail_problems(exc)
    except ValidationError as exc:
        fail(format_errors(exc))
    target = out if out is not None else Path("synth-out") / spec.environment.name
    written = result.write(target)
    _report(result, target, len(written), prod=spec.environment.stage == "prod")


def _report(result: SynthResult, target: Path, files: int, *, prod: bool) -> None:
    objects = result.kubernetes_objects()
    console.print(
        f"synth [bold]{result.stack}[/]: {len(result.resources)} resources, {len(objects)} Kubernetes objects, "
        f"{len(result.charts())} Helm charts -> {target} ({files} files; manifests in {target / MANIFESTS_DIR})",
        highlight=False,
    )
    for w in result.warnings:
        err_console.print(f"[yellow]warning[/]: {w}", highlight=False, markup=False, soft_wrap=True)
    rows = [(r["type"], r["inputs"] if isinstance(r["inputs"], dict) else {}) for r in result.resources]
    # the policy pack's rules, offline: what `pulumi preview --policy-pack policy` would report
    for i, rule, msg in check_resources(rows, prod=prod):
        err_console.print(f"policy {rule}: {result.resources[i]['key']}: {msg}", highlight=False, markup=False,
                          soft_wrap=True)


def diff(
    base: Annotated[Path, typer.Argument(help="Synth output of the base (e.g. the target branch).")],
    head: Annotated[Path, typer.Argument(help="Synth output of the head (e.g. the pull request).")],
    markdown: Annotated[bool, typer.Option("--markdown", help="Markdown for a PR comment, summarised to fit.")] = False,
    out: Annotated[Path | None, typer.Option("--out", help="Write here instead of stdout.", dir_okay=False)] = None,
    max_chars: Annotated[
        int, typer.Option("--max-chars", min=1000, help="Length bound of --markdown output (GitHub allows 65,536).")
    ] = MARKDOWN_LIMIT,
) -> None:
    """Added, removed and changed resources between two synths, GPU-node and autoscaling changes first.

    Exits 0 when equal, 1 when different, 2 when a directory is not a synth output.
    """
    try:
        d = diff_synth_dirs(base, head)
    except NotASynthDirError as exc:
        fail([str(exc)])
    text = render_markdown(d, limit=max_chars) if markdown else render_text(d)
    if out is None:
        typer.echo(text, nl=False)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
        err_console.print(f"wrote {out}", highlight=False)
    raise typer.Exit(EXIT_DIFFERENT if d.different else 0)

