"""typer's CliRunner with the click command built once: typer rebuilds it on every ``invoke`` (~0.1 s), which the
corpus and the fuzz test, with hundreds of invocations, cannot afford."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import typer
from typer.testing import CliRunner

from gpuscale.cli import app


class FastRunner(CliRunner):
    def __init__(self) -> None:
        super().__init__()
        self._command = typer.main.get_command(app)

    def invoke(self, app_: Any = None, args: str | Sequence[str] | None = None, **kwargs: Any) -> Any:  # type: ignore[override]
        return super(CliRunner, self).invoke(self._command, args, **kwargs)
