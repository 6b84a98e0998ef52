"""Entry point: every subcommand registers here, with the help conventions every command shares."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from typing import Annotated, Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup

from gpuscale.cli import plan as _plan
from gpuscale.cli import policy as _policy
from gpuscale.cli import schedule as _schedule
from gpuscale.cli import simulate as _simulate
from gpuscale.cli import synth as _synth
from gpuscale.cli import tune as _tune
from gpuscale.cli import validate as _validate
from gpuscale.cli import versions as _versions
from gpuscale.cli import workload as _workload
from gpuscale.cli.common import EXIT_CODES_HELP, say


def _plain_flags(params: list[Any]) -> list[Any]:
    # a flag takes no value: no type label in the help (typer would show <bool>)
    for p in params:
        if getattr(p, "is_flag", False) and p.metavar is None:
            p.metavar = ""
    return params


class Command(TyperCommand):
    """Help of one command: flags without a type label; usage names arguments as ``BASE HEAD``."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _plain_flags(super().get_params(ctx))

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for p in self.get_params(ctx):
            if isinstance(p, TyperArgument):
                name = (p.metavar or p.name or "").upper()
                pieces.append(name if p.required else f"[{name}]")
            else:
                pieces.extend(p.get_usage_pieces(ctx))
        return pieces


class Group(TyperGroup):
    """The top-level help: flags without a type label."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _plain_flags(super().get_params(ctx))


app = typer.Typer(
    name="gpuscale",
    help="GPU autoscaling for LLM inference on EKS: validate, synth, diff, simulate, tune, plan, schedule.",
    epilog="Every command takes --stack NAME (stacks/Pulumi.NAME.yaml) or --stack-file PATH. " + EXIT_CODES_HELP,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    cls=Group,
)


def _version(value: bool) -> None:
    if value:
        try:
            say(f"gpuscale {package_version('gpuscale')}")
        except PackageNotFoundError:  # running from a source tree that was never installed
            say("gpuscale (not installed: no version metadata)")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", help="Print the version and exit.", callback=_version, is_eager=True)
    ] = False,
) -> None:
    """GPU autoscaling for LLM inference on EKS: validate, synth, diff, simulate, tune, plan, schedule."""


app.command("validate", cls=Command, epilog=EXIT_CODES_HELP)(_validate.validate)
app.command("schema", cls=Command, epilog=EXIT_CODES_HELP)(_validate.schema)
app.command("synth", cls=Command, epilog=_synth.SYNTH_EXIT_CODES)(_synth.synth)
app.command("diff", cls=Command, epilog=_synth.DIFF_EXIT_CODES)(_synth.diff)
app.command("simulate", cls=Command, epilog=EXIT_CODES_HELP)(_simulate.simulate)
app.command("plan", cls=Command, epilog=EXIT_CODES_HELP)(_plan.plan)
app.command("workload", cls=Command, epilog=EXIT_CODES_HELP)(_workload.workload)
app.command("tune", cls=Command, epilog=_tune.TUNE_EXIT_CODES)(_tune.tune_command)
app.command("versions", cls=Command, epilog=EXIT_CODES_HELP)(_versions.versions_command)
app.command("policy-path", cls=Command)(_policy.policy_path)
app.command("schedule", cls=Command, epilog=_schedule.SCHEDULE_EXIT_CODES)(_schedule.schedule)


def main() -> None:
    app()
