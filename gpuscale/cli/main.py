"""Entry point: every subcommand registers here, with the help conventions every command shares."""

from __future__ import annotations

import functools
import importlib
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from typing import Annotated, Any, NamedTuple

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup

from gpuscale.cli import common
from gpuscale.cli.common import EXIT_CODES_HELP, say
from gpuscale.problems import Refusal


def _plain_flags(params: list[Any]) -> list[Any]:
    # a flag takes no value: no type label in the help (typer would show <bool>)
    for p in params:
        if getattr(p, "is_flag", False) and p.metavar is None:
            p.metavar = ""
    return params


class Command(TyperCommand):
    """Help of one command: flags without a type label; usage names arguments as ``BASE HEAD``. A ``Refusal`` (bad
    input, whichever stage finds it) ends any command with its message and exit code 2, never a traceback."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except Refusal as exc:
            common.fail_refusal(exc)

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


class Subcommand(NamedTuple):
    module: str
    function: str
    epilog: str | None = "EXIT_CODES_HELP"
    """Name of the module attribute holding the command's exit-code help (``EXIT_CODES_HELP``: the shared one of
    ``gpuscale.cli.common``); ``None``: no epilog."""


SUBCOMMANDS: dict[str, Subcommand] = {
    "validate": Subcommand("gpuscale.cli.validate", "validate"),
    "schema": Subcommand("gpuscale.cli.validate", "schema"),
    "synth": Subcommand("gpuscale.cli.synth", "synth", "SYNTH_EXIT_CODES"),
    "diff": Subcommand("gpuscale.cli.diff", "diff", "DIFF_EXIT_CODES"),
    "simulate": Subcommand("gpuscale.cli.simulate", "simulate"),
    "plan": Subcommand("gpuscale.cli.plan", "plan"),
    "workload": Subcommand("gpuscale.cli.workload", "workload"),
    "tune": Subcommand("gpuscale.cli.tune", "tune_command", "TUNE_EXIT_CODES"),
    "versions": Subcommand("gpuscale.cli.versions", "versions_command"),
    "policy-path": Subcommand("gpuscale.cli.policy", "policy_path", None),
    "schedule": Subcommand("gpuscale.cli.schedule", "schedule", "SCHEDULE_EXIT_CODES"),
    "doctor": Subcommand("gpuscale.cli.doctor", "doctor", "DOCTOR_EXIT_CODES"),
    "perf": Subcommand("gpuscale.cli.perf", "perf_command"),
}
"""Every subcommand, in help order. A command's module is imported only when that command runs (or help lists it):
``gpuscale diff`` need not load Pulumi, the simulator or matplotlib, which saves about a second per invocation."""


@functools.cache
def load_subcommand(name: str) -> Any:  # typer's click Command (typer vendors click as a private module)
    sub = SUBCOMMANDS[name]
    module = importlib.import_module(sub.module)
    one = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    epilog = None if sub.epilog is None else getattr(module, sub.epilog, None) or getattr(common, sub.epilog)
    one.command(name, cls=Command, epilog=epilog)(getattr(module, sub.function))
    return typer.main.get_command(one)


class Group(TyperGroup):
    """The top-level help: flags without a type label; subcommands loaded on first use."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _plain_flags(super().get_params(ctx))

    def list_commands(self, ctx: Any) -> list[str]:
        return list(SUBCOMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        return load_subcommand(cmd_name) if cmd_name in SUBCOMMANDS else None


app = typer.Typer(
    name="gpuscale",
    help="GPU autoscaling for LLM inference on EKS: validate, synth, diff, simulate, tune, plan, schedule.",
    epilog="Every command that reads a stack takes --stack NAME (stacks/Pulumi.NAME.yaml) or --stack-file PATH. " + EXIT_CODES_HELP,
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


def main() -> None:
    app()
