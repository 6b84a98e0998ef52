"""Cross-field problems raised inside spec validators; they are ``gpuscale.problems.Problems`` with YAML paths."""

from __future__ import annotations

from gpuscale.problems import Problem, Problems


class SpecProblems(Problems):
    """Raised by a model validator; each problem's path is relative to the model that raised it."""

    def __init__(self, problems: list[tuple[str, str]] | list[Problem]) -> None:
        super().__init__(p if isinstance(p, Problem) else Problem(*p) for p in problems)


def at(path: str, message: str) -> SpecProblems:
    """One problem at ``path`` (relative to the model whose validator raises it): ``raise at("gpu_limit", "...")``."""
    return SpecProblems([(path, message)])
