"""The ``gpuscale`` command line."""

from gpuscale.cli.main import app, main

__all__ = ["app", "main"]
