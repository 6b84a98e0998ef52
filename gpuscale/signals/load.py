"""Load of an aggregated replica: its prefill and decode work summed (both share its GPUs)."""

from __future__ import annotations

from typing import Literal

from gpuscale.signals import promql
from gpuscale.signals.base import CostedSignal, SignalCoefficients, SignalSizing, total
from gpuscale.signals.decode_load import decode_work
from gpuscale.signals.prefill_load import prefill_work
from gpuscale.signals.promql import Expr, Matcher


def aggregated_work(sel: tuple[Matcher, ...], c: SignalCoefficients) -> Expr:
    """Replicas' worth of an aggregated role's work: its prefill work weighed by what it takes from decoding
    (``SignalCoefficients.prefill_stall``: a step carrying a prefill chunk holds every decoding sequence), plus its
    decode work."""
    return prefill_work(sel, c) * promql.Number(c.prefill_stall) + decode_work(sel, c)


class Load(CostedSignal):
    """Prefill + decode seconds per second (the ``aggregated`` role's load signal, backend keda)."""

    kind: Literal["load"] = "load"
    metric: Literal["vllm:prompt_tokens_total"] = "vllm:prompt_tokens_total"

    @property
    def label(self) -> str:
        return "prefill + decode s/s"

    def expr(self, sel: tuple[Matcher, ...]) -> Expr:
        return total(aggregated_work(sel, self.coefficients))

    @classmethod
    def sized(cls, n: SignalSizing) -> Load:
        return cls(
            target=n.utilisation, coefficients=n.coefficients,
            why=(
                f"replicas' worth of work: the prefill and decode work of the replica's own requests summed (both share its "
                f"GPUs), each weighed by what a token costs at its prompt or context length, the prefill also by the "
                f"decode steps it holds (x{n.coefficients.prefill_stall:.2f}), at {n.percent} of a replica"
            ),
        )
