"""One problem type for every refusal, whichever stage finds it: spec validation, sizing, cross-layer checks, the CLI.

A problem names the YAML path of the value to change (relative to the ``gpuscale:`` config namespace, e.g.
``models[0].queue``) and says what is wrong and what would be valid. ``Problems`` carries them with the file (or stack)
they come from, so every message reads ``<file>: gpuscale:<path>: <message>``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

NAMESPACE = "gpuscale"
"""Pulumi config namespace of every stack key."""


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


class Problems(ValueError):
    """One or more problems, refused together; ``source`` is the stack file (or ``stack <name>``) they belong to."""

    def __init__(self, problems: Iterable[Problem], source: str = "") -> None:
        self.problems = list(problems)
        self.source = source
        super().__init__(self.render())

    def lines(self) -> list[str]:
        return [p.line() for p in self.problems]

    def render(self) -> str:
        head = f"{self.source}: invalid input" if self.source else "invalid input"
        return head + "".join(f"\n  {line}" for line in self.lines())

    def from_source(self, source: str) -> Problems:
        """The same problems attributed to ``source`` (kept when already set)."""
        return self if self.source else type(self)(self.problems, source)


def problems_at(pairs: Iterable[tuple[str, str]]) -> list[Problem]:
    return [Problem(path, message) for path, message in pairs]
