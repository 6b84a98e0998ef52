"""What only KEDA can do: scale to zero, pause, hold warm schedules, read the SLO guard's latency ratio.

An HPA cannot scale to zero: ``HPAScaleToZero`` is an alpha feature gate, off on EKS, so the API server refuses
``minReplicas: 0`` (kubernetes ``pkg/apis/autoscaling/validation`` at the supported minors). It has no pause switch
(KEDA's ``autoscaling.keda.sh/paused``), no schedule (each warm window is a KEDA ``cron`` trigger) and
prometheus-adapter serves per-pod metrics only, not the latency ratio the SLO guard reads (a ``metricType: Value``
trigger). The spec refuses these before anything is built, the autoscaler builders call the same rule on what they
are handed, and the policy pack applies the ``minReplicas`` part to any HPA.
"""

from __future__ import annotations

from typing import Literal

Backend = Literal["keda", "hpa"]
HPA_MIN_REPLICAS = 1
"""The fewest replicas an HPA may hold (``minReplicas`` >= 1 without the alpha ``HPAScaleToZero`` gate)."""


def hpa_breaches(
    role: str, *, backend: str, min_replicas: int, implicit_zero: bool = False, paused: bool = False,
    slo_guard: bool = False, warm_schedule: bool = False,
) -> list[tuple[str, str]]:
    """``(field under the model's autoscaling, message)`` for each KEDA-only feature asked of an HPA; [] for KEDA.

    ``implicit_zero``: the minimum is 0 because a best-effort SLO defaults it so (the message says which).
    """
    if backend != "hpa":
        return []
    out: list[tuple[str, str]] = []
    if paused:
        out.append(("paused", (
            "autoscaling.paused: true needs backend: keda (autoscaling.keda.sh/paused); an HPA has no pause switch "
            "and keeps scaling. Use backend: keda, or set min_replicas = max_replicas to pin the count"
        )))
    if slo_guard:
        out.append((f"{role}.slo_guard", (
            f"autoscaling.{role}.slo_guard: true needs backend: keda; prometheus-adapter serves per-pod metrics only, "
            "not the latency ratio the guard reads (a metricType: Value trigger). Use backend: keda or drop slo_guard"
        )))
    if warm_schedule:
        out.append((f"{role}.warm_schedule", (
            f"autoscaling.{role}.warm_schedule needs backend: keda (each window is a KEDA cron trigger); an HPA has "
            "no schedule. Use backend: keda or raise min_replicas instead"
        )))
    if min_replicas < HPA_MIN_REPLICAS:
        source = "defaults to 0 for a best_effort SLO" if implicit_zero else f"is {min_replicas}"
        out.append((f"{role}.min_replicas", hpa_min_replicas_message(f"autoscaling.{role}.min_replicas {source}")))
    return out


def hpa_min_replicas_message(subject: str) -> str:
    """Why an HPA cannot hold fewer than one replica, after ``subject`` (what asks for it)."""
    return (
        f"{subject} but an HPA cannot scale to zero (HPAScaleToZero is an alpha feature gate, off on EKS, so the API "
        f"server refuses minReplicas 0). Use backend: keda (scale to zero with an activation threshold) or set "
        f"min_replicas: {HPA_MIN_REPLICAS}"
    )
