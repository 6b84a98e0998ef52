"""Entry point: every subcommand registers here."""

from __future__ import annotations

import typer

from gpuscale.cli import plan as _plan
from gpuscale.cli import simulate as _simulate
from gpuscale.cli import synth as _synth
from gpuscale.cli import validate as _validate
from gpuscale.cli import versions as _versions

app = typer.Typer(
    name="gpuscale",
    help="GPU autoscaling for LLM inference on EKS: validate, synth, diff, simulate, plan.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.command("validate")(_validate.validate)
app.command("schema")(_validate.schema)
# Further commands register below, one line each.
app.command("synth")(_synth.synth)
app.command("diff")(_synth.diff)
app.command("simulate")(_simulate.simulate)
app.command("plan")(_plan.plan)
app.command("versions")(_versions.versions_command)


def main() -> None:
    app()
