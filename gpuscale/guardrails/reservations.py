"""Capacity reservations with dates: what Karpenter v1.14.1 does at a Capacity Block's end, and the two refusals.

Karpenter v1.14.1 selects reservations by id (EC2NodeClass ``capacityReservationSelectorTerms``) and learns each one's
type and end date from EC2, not from the NodeClass:

- it launches only into reservations EC2 reports ``active`` (``pkg/providers/capacityreservation/types.go``, the
  ``state`` filter of DescribeCapacityReservations), so a block selected before its start is simply not used until it
  starts;
- a ``capacity-block`` reservation turns ``expiring`` ``DRAIN_LEAD_S`` (40 minutes) before its end
  (``pkg/apis/v1/ec2nodeclass_status.go`` ``capacityReservationExpirationPeriod``), and the
  ``capacityreservation.expiration`` controller then deletes every NodeClaim in it, draining the nodes ahead of EC2,
  which reclaims the instances from ``EC2_RECLAIM_LEAD_S`` (30 minutes) before the end
  (``pkg/controllers/capacityreservation/expiration/controller.go``: "40 minutes before the capacity-block's end time,
  10 minutes before EC2 begins reclaiming");
- ODCRs have no such window: an instance whose ODCR expires keeps running and Karpenter relabels it
  ``karpenter.sh/capacity-type: on-demand`` (``website/content/en/docs/tasks/odcrs.md``, "Expiration").

Both need the ``ReservedCapacity`` feature gate, on by default in v1.14.1 (``charts/karpenter/values.yaml``
``settings.featureGates.reservedCapacity: true``), and a NodePool that allows ``karpenter.sh/capacity-type: reserved``.

So a block is usable from its start until ``drain_at`` (end - 40 min). The refusals, both at the block's ``end_utc``:

1. **ends before the peak is over**: the spec gives peak load as hours per day (``workload.peak_hours_per_day``), not
   as a time of day, so a block is refused when its usable window (start to ``drain_at``) is shorter than the longest
   daily peak of the models on the pool: its nodes are drained before one peak has run its course.
2. **the warm minimum depends on it past its end**: a pool that may launch only ``reserved`` capacity and whose
   reservations are all Capacity Blocks can launch nothing after the last block's ``drain_at``; a model on it whose
   warm minimum is above zero (it must run at every hour) then has no node to run on. A pool with an ODCR, or with
   ``on-demand``/``spot`` beside ``reserved``, falls back and is not refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Literal

ReservationType = Literal["odcr", "capacity-block"]
"""``odcr``: an On-Demand Capacity Reservation (no end Karpenter acts on); ``capacity-block``: an EC2 Capacity Block
for ML (fixed start and end; Karpenter's ``karpenter.k8s.aws/capacity-reservation-type: capacity-block``)."""

DRAIN_LEAD_S = 40 * 60
"""Karpenter v1.14.1 drains a Capacity Block's nodes this long before its end (``capacityReservationExpirationPeriod``)."""
EC2_RECLAIM_LEAD_S = 30 * 60
"""EC2 starts reclaiming a Capacity Block's instances this long before its end (10 minutes after Karpenter's drain)."""


def drain_at(end: datetime) -> datetime:
    """When Karpenter starts deleting the nodes of a Capacity Block ending at ``end``."""
    return end - timedelta(seconds=DRAIN_LEAD_S)


def reclaim_at(end: datetime) -> datetime:
    """When EC2 starts reclaiming the instances of a Capacity Block ending at ``end``."""
    return end - timedelta(seconds=EC2_RECLAIM_LEAD_S)


def usable_hours(start: datetime, end: datetime) -> float:
    """Hours a Capacity Block's nodes can serve: from its start to Karpenter's drain."""
    return (drain_at(end) - start).total_seconds() / 3600.0


def short_block_breach(pool: str, block: str, start: datetime, end: datetime, peaks: Sequence[tuple[str, float]]) -> str | None:
    """Why a Capacity Block of ``pool`` ends before the peak it carries is over, or None. ``peaks`` are the
    ``(model, peak_hours_per_day)`` of the models on the pool."""
    if not peaks:
        return None
    model, peak_h = max(peaks, key=lambda p: p[1])
    usable = usable_hours(start, end)
    if usable >= peak_h:
        return None
    return (
        f"GPU pool {pool}: Capacity Block {block} serves {usable:.2f} h (from {start:%Y-%m-%dT%H:%MZ} until Karpenter drains "
        f"its nodes {DRAIN_LEAD_S // 60} min before its end at {end:%Y-%m-%dT%H:%MZ}), less than the {peak_h:g} h daily "
        f"peak of {model}: its nodes go before one peak is over. Buy a block that ends at least {peak_h:g} h "
        f"+ {DRAIN_LEAD_S // 60} min after its start, or serve that peak on on-demand capacity"
    )


def warm_minimum_outlives_breach(pool: str, block: str, end: datetime, warm: Sequence[tuple[str, str, int]]) -> str | None:
    """Why the warm minimum of a reserved-only, blocks-only pool depends on its last block past its end, or None.
    ``warm`` is ``(model, role, warm minimum)`` of each role on the pool; ``block`` is the last block to end."""
    kept = [(m, r, n) for m, r, n in warm if n > 0]
    if not kept:
        return None
    roles = ", ".join(f"{m} {r} (min {n})" for m, r, n in kept)
    return (
        f"GPU pool {pool} may only launch reserved capacity and all its reservations are Capacity Blocks: after "
        f"{drain_at(end):%Y-%m-%dT%H:%MZ}, when Karpenter drains the last one ({block}, ends {end:%Y-%m-%dT%H:%MZ}), it can "
        f"launch no node, yet {roles} must keep warm replicas at every hour. Add on-demand to capacity_types (the pool "
        "falls back to it when the block ends), add an ODCR, or set those roles' min_replicas: 0"
    )


# ---------------------------------------------------------------- what a reservation bills
#
# As AWS documents it (EC2 User Guide):
# - an ODCR "is charged at the equivalent On-Demand rate whether you run instances in reserved capacity or not ... When
#   you run an instance that matches the attributes of a reservation, you just pay for the instance and nothing for the
#   reservation", billed per second while it is provisioned ("Capacity Reservation pricing and billing");
# - a Capacity Block's reservation fee "is charged up front at the time you schedule the reservation" for the whole
#   block, at the rate of its offering at purchase (EC2 Capacity Blocks pricing page; the offering's ``UpfrontFee``);
#   instances running in it add only the operating system fee, which is not modelled.
# So either way the reserved instances are paid for the whole window, used or not, and a node launched into one costs
# nothing more: only nodes beyond the reserved instances are billed at the pool's own rate.


def instance_hour_rate(kind: ReservationType, given: float | None, on_demand_usd_per_hour: float) -> float | None:
    """What one reserved instance bills per hour: an ODCR the instance's On-Demand rate (or ``given``, e.g. under a
    Savings Plan), a Capacity Block the rate it was bought at (``given``; None when not stated)."""
    if given is not None:
        return given
    return on_demand_usd_per_hour if kind == "odcr" else None


def block_price_missing(kind: ReservationType, count: int | None, given: float | None) -> str | None:
    """Why a Capacity Block with an instance count cannot be billed, or None."""
    if kind != "capacity-block" or count is None or given is not None:
        return None
    return ("a capacity-block with instance_count bills its reservation fee up front at the rate of its offering at "
            "purchase, which EC2 lists per block, not per instance type: set usd_per_instance_hour (the offering's "
            "UpfrontFee / instances / hours)")


def oversized_breach(pool: str, block: str, count: int, gpus_per_instance: int, gpu_limit: int) -> str | None:
    """Why a reservation holds more instances than the pool's GPU limit lets Karpenter launch, or None: the rest is
    billed and can never run."""
    gpus = count * gpus_per_instance
    if gpus <= gpu_limit:
        return None
    usable = gpu_limit // gpus_per_instance
    return (f"GPU pool {pool}: reservation {block} holds {count} instances ({gpus} GPUs), above the pool's gpu_limit "
            f"{gpu_limit}: Karpenter launches at most {usable} of them and the other {count - usable} are billed unused. "
            f"Raise gpu_limit to at least {gpus} or reserve at most {usable} instances")


def block_hours(start: datetime, end: datetime) -> float:
    """Hours a Capacity Block bills: its whole window, start to end (not just until the drain)."""
    return (end - start).total_seconds() / 3600.0


# ---------------------------------------------------------------- a reservation two models share
#
# A reservation belongs to the pool (its EC2NodeClass selects it), not to a model: it bills once, however many models
# launch into it. The plan and ``validate`` charge it to the pool, once. The simulator runs one model at a time, so each
# run gets a share of the pool's reserved instances and exactly that share of the bill (the shares add up to the
# reservation, so the models' simulated bills add up to one bill). The share follows what the reservation was bought
# for, the GPUs each model needs at its peak: Karpenter launches into a reservation whoever's pod is pending first, so
# any fixed split is a model's choice; this one never gives a model reserved instances it cannot use at its peak while
# another's peak needs them.


def split_instances(count: int, demands: Sequence[tuple[str, float]]) -> dict[str, int]:
    """``count`` reserved instances split over ``(model, GPUs at peak)`` in proportion to the GPUs, by largest
    remainder (ties to the earlier model); equal shares when no model needs any GPU."""
    if not demands:
        return {}
    total = sum(max(d, 0.0) for _, d in demands)
    weights = [max(d, 0.0) / total if total > 0 else 1.0 / len(demands) for _, d in demands]
    exact = [count * w for w in weights]
    out = [int(x) for x in exact]
    order = sorted(range(len(demands)), key=lambda i: (-(exact[i] - out[i]), i))
    for i in order[: count - sum(out)]:
        out[i] += 1
    return {name: n for (name, _), n in zip(demands, out, strict=True)}
