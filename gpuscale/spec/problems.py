"""Cross-field problems that carry the YAML path they belong to."""

from __future__ import annotations


class SpecProblems(ValueError):
    """One or more problems found by a cross-field check, each as (path, message).

    Paths are relative to the ``gpuscale:`` config namespace, e.g. ``models[0].queue``.
    """

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{path}: {msg}" for path, msg in problems))
