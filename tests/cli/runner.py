"""typer's CliRunner with the click command built once: typer rebuilds it on every ``invoke`` (~0.1 s), which the
corpus and the fuzz test, with hundreds of invocations, cannot afford."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import typer
import typer.testing
from typer.testing import CliRunner

from gpuscale.cli import app


class FastRunner(CliRunner):
    def __init__(self) -> None:
        super().__init__()
        self._command = typer.main.get_command(app)

    def invoke(self, app_: Any = app, args: str | Sequence[str] | None = None, **kwargs: Any) -> Any:  # type: ignore[override]
        # typer.testing builds the command through this module-level name; hand it the one built above
        build = typer.testing._get_command
        typer.testing._get_command = lambda _app: self._command
        try:
            return super().invoke(app_, args, **kwargs)
        finally:
            typer.testing._get_command = build
