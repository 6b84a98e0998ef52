"""The one error model: every refusal of bad input, whichever stage finds it (spec validation, sizing, cross-layer
checks, the components, the CLI), carries the YAML path of the value to change.

A ``Problem`` names the path (relative to the ``gpuscale:`` config namespace, e.g. ``models[0].queue``) and says what
is wrong and what would be valid. ``Problems`` carries them with the file (or stack) they come from, so every message
reads ``<file>: gpuscale:<path>: <message>``. A spec validator raises them with paths relative to its own model
(``raise at("gpu_limit", "...")``); pydantic hands the exception back and ``stackfile.format_errors`` puts each path
below the model's own.

``Refusal`` is the family: the CLI turns any of them into exit code 2 with the message and no traceback, and the
Pulumi program (``gpuscale.program``) turns any of them into ``pulumi.RunError``, which the Python language host
prints as the message alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

NAMESPACE = "gpuscale"
"""Pulumi config namespace of every stack key."""


class Refusal(ValueError):
    """Bad input, refused: the message says what to change and what would be valid (never a bug of gpuscale's).

    Every stage's own error is a subclass (``SizingError``, ``TraceError``, ``ScenarioError``, the schedule's errors,
    ...), so a command needs no ``except`` list of its own: ``gpuscale.cli.main.Command`` catches the family."""

    source: str = "gpuscale"
    """What the refusal is of, as the CLI's ``error: <source>: invalid input`` line names it."""

    def lines(self) -> list[str]:
        """The refusal's lines, as the CLI prints them below its ``error:`` line."""
        return [str(self)]


@dataclass(frozen=True)
class Problem:
    """One thing to fix: where (YAML path under ``gpuscale:``; empty for the file or command as a whole) and why."""

    path: str
    message: str

    def line(self) -> str:
        return f"{NAMESPACE}:{self.path}: {self.message}" if self.path else self.message

    def under(self, prefix: str) -> Problem:
        """The same problem with its path below ``prefix`` (``models[0]`` + ``queue`` -> ``models[0].queue``)."""
        if not prefix:
            return self
        path = prefix if not self.path else f"{prefix}{'' if self.path.startswith('[') else '.'}{self.path}"
        return Problem(path, self.message)


class Problems(Refusal):
    """One or more problems, refused together; ``source`` is the stack file (or ``stack <name>``) they belong to.
    Each problem is a ``Problem`` or a ``(path, message)`` pair."""

    def __init__(self, problems: Iterable[Problem | tuple[str, str]], source: str = "") -> None:
        self.problems = [p if isinstance(p, Problem) else Problem(*p) for p in problems]
        self.source = source
        super().__init__(self.render())

    def lines(self) -> list[str]:
        return [p.line() for p in self.problems]

    def render(self) -> str:
        head = f"{self.source}: invalid input" if self.source else "invalid input"
        return head + "".join(f"\n  {line}" for line in self.lines())



def at(path: str, message: str) -> Problems:
    """One problem at ``path`` (relative to the model whose validator raises it): ``raise at("gpu_limit", "...")``."""
    return Problems([(path, message)])
