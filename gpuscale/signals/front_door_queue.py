"""The front door's queue: requests the llm-d router holds for the model (``gpuscale.manifests.front_door``).

Not a vLLM signal: the door's EPP runs while the model is at zero, so its queue is the one signal that can wake it.
Every role of a model behind a door gets it, with activation above 0 (one held request wakes the role) and the
held requests one replica serves in time as its threshold.
"""

from __future__ import annotations

from typing import Literal

from gpuscale.signals import promql
from gpuscale.signals.base import Signal, SignalPurpose, total
from gpuscale.signals.promql import Expr, Matcher


class FrontDoorQueue(Signal):
    kind: Literal["front_door_queue"] = "front_door_queue"
    purpose: SignalPurpose = "burst"
    name: str
    """The trigger's name (``front_door.TRIGGER_NAME``)."""

    @property
    def label(self) -> str:
        return f"{self.metric} (held by the front door)"

    @property
    def trigger_name(self) -> str:
        return self.name

    def expr(self, sel: tuple[Matcher, ...]) -> Expr:
        return total(promql.Series(self.metric, sel))
