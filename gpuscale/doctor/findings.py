"""What the doctor says about one pending GPU pod: the layer that holds it, why, the objects that prove it and how to
confirm it live. ``Report`` is the ``--json`` document."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

Layer = Literal["karpenter", "kube-scheduler", "kai", "device-plugin"]
LAYERS: tuple[Layer, ...] = ("karpenter", "kube-scheduler", "kai", "device-plugin")

EVIDENCE_CHARS = 400
"""Longest controller message quoted in one evidence line (KAI's detailed fit errors list every node)."""


def quote(message: str) -> str:
    """A controller's message on one line, cut to ``EVIDENCE_CHARS``."""
    flat = " ".join(message.split())
    return flat if len(flat) <= EVIDENCE_CHARS else flat[: EVIDENCE_CHARS - 3] + "..."


class Finding(BaseModel):
    """One cause (or one normal wait) of one pod."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pod: str
    """``<namespace>/<name>``."""
    layer: Layer
    cause: str
    evidence: list[str]
    """``<Kind>/<name>: <field or event reason>: <what it says>`` (namespaced names as ``<namespace>/<name>``)."""
    confirm_with: list[str]
    """Prometheus queries (metric names as the pinned exporters publish them) and kubectl commands."""


class Report(BaseModel):
    """Every pending GPU pod: held (``stuck``) or waiting normally (``in_progress``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    stuck: list[Finding]
    in_progress: list[Finding]

    @property
    def exit_code(self) -> int:
        return 1 if self.stuck else 0
