"""What every actor of one run may read: the frozen run context, and the event log they write to.

``RunContext`` is the run's inputs, resolved once (the variant's cold start, the seed's common random numbers); no
actor changes it. Actors reach each other only through the small protocols each declares for what it consumes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Protocol

from gpuscale.sim.inputs import SimSetup, Variant
from gpuscale.sim.nodes import StartupSpec
from gpuscale.sim.traffic import Arrivals


@dataclass(frozen=True)
class RunContext:
    """One variant's run of one scenario."""

    setup: SimSetup
    variant: Variant
    arrivals: Arrivals
    seed: int

    @property
    def startup(self) -> StartupSpec:
        """The cold start of this variant (its cold-start choices), else the set-up's."""
        return self.variant.startup if self.variant.startup is not None else self.setup.startup

    def draws(self, key: str) -> random.Random:
        """Common random numbers keyed by what is drawn (the n-th node's image pull, the n-th replica's k-th load):
        every variant that launches that node or starts that replica draws the same latency."""
        return random.Random(f"{self.seed}/{key}")


class Log(Protocol):
    """The run's event log (``accounting.EventLog``)."""

    def log(self, kind: str, detail: str) -> None: ...
