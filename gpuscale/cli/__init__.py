"""The ``gpuscale`` command line (the ``cli`` extra: ``pip install 'gpuscale[cli]'``).

``pip install gpuscale`` gives the spec, sizing, builders and components; the CLI, simulator and plan need typer, rich,
numpy, matplotlib and jinja2, which only the extra installs. Without them the command says so instead of failing.
"""

from __future__ import annotations

import sys

CLI_EXTRA_MODULES = ("typer", "rich", "numpy", "matplotlib", "jinja2")
"""Imported by the CLI, the simulator and the plan; installed by the ``cli`` extra."""


def main() -> None:
    try:
        from gpuscale.cli.main import main as run
    except ModuleNotFoundError as exc:
        if exc.name not in CLI_EXTRA_MODULES:
            raise
        sys.stderr.write(
            f"error: the gpuscale command needs the '{exc.name}' package, which the cli extra installs: "
            "pip install 'gpuscale[cli]'\n"
        )
        raise SystemExit(2) from None
    run()


def __getattr__(name: str) -> object:
    if name == "app":  # the typer application, for tests and embedding; loads the extra's modules on first use
        from gpuscale.cli.main import app

        return app
    raise AttributeError(name)


__all__ = ["CLI_EXTRA_MODULES", "app", "main"]
