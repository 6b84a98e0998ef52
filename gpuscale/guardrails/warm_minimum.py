"""Warm minimums: how many replicas each role keeps however quiet it gets, by the SLO's criticality.

A critical role keeps ``CRITICAL_MIN_REPLICAS`` (2): a node drift, a spot reclaim or a node failure takes one replica
at a time, and the next one needs a cold start (node + image + weights + engine, minutes), so with one replica
every such event is an outage. A standard role keeps one; a best-effort role may scale to zero.
"""

from __future__ import annotations

import math
from typing import Literal

Criticality = Literal["critical", "standard", "best_effort"]

CRITICAL_MIN_REPLICAS = 2
"""The fewest replicas a role of a critical SLO may run, and its default warm minimum."""
DEFAULT_MIN_REPLICAS: dict[Criticality, int] = {"critical": CRITICAL_MIN_REPLICAS, "standard": 1, "best_effort": 0}
"""The warm minimum a role gets when ``min_replicas`` is unset."""


def warm_minimum(criticality: Criticality, min_replicas: int | None) -> int:
    """The role's warm minimum: the stated one (an explicit 0 stays 0), else the criticality's default."""
    return DEFAULT_MIN_REPLICAS[criticality] if min_replicas is None else min_replicas


def keeps_warm_minimum(criticality: Criticality, min_replicas: int) -> bool:
    """Whether a role's effective warm minimum keeps the rule (only a critical SLO has a floor above zero)."""
    return criticality != "critical" or min_replicas >= CRITICAL_MIN_REPLICAS


def serving_replicas(criticality: Criticality) -> int:
    """Replicas of a component on a model's request path that never scales to zero (the front door's picker): the
    criticality's warm minimum, at least one. A critical path keeps a second one for the same reason its roles do."""
    return max(1, DEFAULT_MIN_REPLICAS[criticality])


KEDA_DEFAULT_MIN_REPLICA_COUNT = 0
"""What a ScaledObject without ``minReplicaCount`` holds (KEDA v2.20.2 ``keda.sh_scaledobjects.yaml``: ``minReplicaCount``
>= 0, default 0; ``research/upstream-facts.md`` section 3)."""

def autoscaler_breach(what: str, criticality: str, min_replicas: int | float) -> str | None:
    """Why an emitted autoscaler (``what``: its kind and name) of a role breaks the rule, or None. ``criticality`` is
    its ``gpuscale.io/criticality`` label (anything but ``critical`` has no floor above zero)."""
    if criticality != "critical" or keeps_warm_minimum("critical", math.floor(min_replicas)):
        return None
    return (
        f"{what}: {min_replicas:g} minimum replicas on a critical SLO ({criticality} label); a node drift, spot "
        "reclaim or node failure takes one replica at a time and the next one needs a cold start (minutes): keep at "
        f"least {CRITICAL_MIN_REPLICAS} so one keeps serving"
    )


def critical_minimum_breach(role: str, criticality: Criticality, min_replicas: int | None) -> str | None:
    """Why a role's warm minimum breaks the rule, or None (an unset minimum takes the default, which keeps it)."""
    if keeps_warm_minimum(criticality, warm_minimum(criticality, min_replicas)):
        return None
    return (
        f"autoscaling.{role}.min_replicas: {min_replicas} on a critical SLO: a node drift, spot reclaim or node failure "
        "takes one replica at a time, and the next one needs a cold start (node + image + weights + engine, minutes); "
        f"keep min_replicas >= {CRITICAL_MIN_REPLICAS} (the default for critical) so one keeps serving, or lower "
        "slo.criticality"
    )
