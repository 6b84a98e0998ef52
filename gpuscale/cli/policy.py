"""``gpuscale policy-path``: where the CrossGuard policy pack of this installation lives."""

from __future__ import annotations

import typer

from gpuscale.policy import pack_dir


def policy_path() -> None:
    """Print the policy pack's directory: pulumi preview --policy-pack "$(gpuscale policy-path)"."""
    typer.echo(str(pack_dir()))
