"""The base model every spec inherits: frozen, strict, documented."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict


class Spec(BaseModel):
    """Frozen, ``extra="forbid"`` base: an unknown key is an error, never silently dropped."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def _dns_label(value: str) -> str:
    if len(value) > 40 or not _DNS_LABEL.match(value):
        raise ValueError(
            f"{value!r} is not a valid name: use 1-40 lowercase letters, digits and '-', "
            "starting with a letter (it becomes part of Kubernetes object names)"
        )
    return value


Name = Annotated[str, AfterValidator(_dns_label)]
"""A short DNS-label name; it is embedded in Kubernetes and AWS resource names."""

_DURATION = re.compile(r"^(([0-9]+(s|m|h))+|Never)$")
_DURATION_PART = re.compile(r"([0-9]+)(s|m|h)")


def _karpenter_duration(value: str) -> str:
    if parse_duration(value) is None:
        raise ValueError(f"{value!r} is not a duration: write e.g. '30s', '15m', '1h', '1h30m' or 'Never'")
    return value


KarpenterDuration = Annotated[str, AfterValidator(_karpenter_duration)]
"""A Karpenter duration string (``^(([0-9]+(s|m|h))+|Never)$``)."""


def parse_duration(value: str) -> float | None:
    """Seconds in a Karpenter duration (``1h30m``; ``Never`` is infinite), ``None`` if ``value`` is not one."""
    if value == "Never":
        return float("inf")
    if not _DURATION.fullmatch(value):
        return None
    scale = {"s": 1, "m": 60, "h": 3600}
    return float(sum(int(n) * scale[u] for n, u in _DURATION_PART.findall(value)))


def duration_seconds(value: str) -> float:
    """Seconds in a validated Karpenter duration; ``Never`` is infinite."""
    seconds = parse_duration(value)
    if seconds is None:
        raise ValueError(f"{value!r} is not a duration: write e.g. '30s', '15m', '1h', '1h30m' or 'Never'")
    return seconds
