"""Options and error handling every command shares: ``--stack``/``--stack-file``, exit 2 on bad input."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console

from gpuscale import checks
from gpuscale.problems import Problem, Problems
from gpuscale.sizing import PlatformSizing
from gpuscale.spec.platform import PlatformSpec
from gpuscale.stackfile import load_stack

# Wide tables when piped (CI logs, PR comments); the terminal's width otherwise.
console = Console(width=None if sys.stdout.isatty() else 200)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 200)

EXIT_INVALID = 2

StackOpt = Annotated[str | None, typer.Option("--stack", help="Stack name: reads stacks/Pulumi.NAME.yaml.")]
StackFileOpt = Annotated[
    Path | None, typer.Option("--stack-file", help="Any Pulumi stack file with gpuscale:* config.", dir_okay=False)
]


def fail(problems: list[Problem] | list[str], source: str = "gpuscale") -> NoReturn:
    """Print one line per problem and exit 2, never a traceback."""
    err_console.print(f"[bold red]error[/]: {source}: invalid input", highlight=False)
    for p in problems:
        err_console.print(f"  {p.line() if isinstance(p, Problem) else p}", highlight=False, markup=False, soft_wrap=True)
    raise typer.Exit(EXIT_INVALID)


def fail_problems(exc: Problems, source: str = "gpuscale") -> NoReturn:
    fail(exc.problems, exc.source or source)


def checked_sizing(spec: PlatformSpec, source: str = "gpuscale") -> PlatformSizing:
    """Sizing of a feasible spec whose layers agree; exit 2 with the paths and numbers otherwise."""
    try:
        return checks.checked_sizing(spec)
    except Problems as exc:
        fail_problems(exc, source)


def spec_from_options(stack: str | None, stack_file: Path | None) -> PlatformSpec:
    if stack is not None and stack_file is not None:
        fail(["pass either --stack or --stack-file, not both"])
    try:
        return load_stack(stack, stack_file)
    except Problems as exc:
        fail_problems(exc)
