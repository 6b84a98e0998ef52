"""``gpuscale diff``: compare two synth outputs (it reads files only: no Pulumi, no simulator)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gpuscale.cli.common import check_outputs, say, write_text
from gpuscale.synth.diff import MARKDOWN_LIMIT, diff_synth_dirs, render_markdown, render_text

EXIT_DIFFERENT = 1
"""The synths differ (0: equal; 2: not a synth directory)."""
DIFF_EXIT_CODES = (
    "Exit codes: 0 the synths are equal; 1 they differ; 2 invalid input (a directory that is not a synth output, "
    "or an unusable --out), nothing written."
)


def diff(
    base: Annotated[Path, typer.Argument(help="Synth output of the base (e.g. the target branch).", show_default=False)],
    head: Annotated[Path, typer.Argument(help="Synth output of the head (e.g. the pull request).", show_default=False)],
    markdown: Annotated[bool, typer.Option("--markdown", help="Markdown for a PR comment, summarised to fit.")] = False,
    out: Annotated[
        Path | None, typer.Option("--out", help="Write here instead of stdout.", dir_okay=False, show_default=False)
    ] = None,
    max_chars: Annotated[
        int, typer.Option("--max-chars", min=1000, help="Length bound of --markdown output (GitHub allows 65,536).")
    ] = MARKDOWN_LIMIT,
) -> None:
    """Added, removed and changed resources between two synths, GPU-node and autoscaling changes first."""
    check_outputs((out, "--out", False))
    d = diff_synth_dirs(base, head)  # a directory that is not a synth is a Refusal: exit 2 (cli.main.Command)
    text = render_markdown(d, limit=max_chars) if markdown else render_text(d)
    if out is None:
        typer.echo(text, nl=False)
    else:
        write_text(out, text, "--out")
        say(f"wrote {out}", stderr=True)
    raise typer.Exit(EXIT_DIFFERENT if d.different else 0)

