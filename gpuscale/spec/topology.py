"""Cluster topology: zones, GPU and CPU node pools, topology levels, node provisioning."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field, field_validator, model_validator

from gpuscale import labels, versions
from gpuscale.guardrails import consolidation, reservations
from gpuscale.problems import Problems, at
from gpuscale.spec.base import (
    CronSchedule,
    KarpenterDuration,
    LabelKey,
    Labels,
    Name,
    Spec,
    duration_seconds,
    parse_duration,
)
from gpuscale.spec.catalogue import CATALOGUE, GpuInstanceType
from gpuscale.spec.cold_start import SOCI_MIN_AL2023_RELEASE, ImagePull, snapshot_id_problem

CapacityType = Literal["on-demand", "spot", "reserved"]
ConsolidationPolicy = Literal["WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"]
DisruptionReason = Literal["Underutilized", "Empty", "Drifted"]
CPU_POOL_NAME = "cpu"
"""Name of the general-purpose Karpenter NodePool and EC2NodeClass (GPU pools may not use it)."""
MAX_CLUSTER_NODES = 5000
"""Largest cluster Kubernetes supports (kubernetes.io "Considerations for large clusters": at most 5,000 nodes); a
NodePool GPU limit above this many of its largest nodes can never be reached."""
MAX_ZONES = 8
"""Zones a new VPC is split into at most (``gpuscale.manifests.network.MAX_ZONES``)."""
_ZONE_SUFFIX = re.compile(r"[a-z]|-[a-z]+-[0-9]+[a-z]")
"""What follows the region in a zone name: ``a`` (``us-east-1a``), or a Local Zone (``us-west-2-lax-1a``)."""
_AMI_ALIAS = re.compile(r"al2023@(latest|v[0-9]{8})|bottlerocket@(latest|v[0-9]+\.[0-9]+\.[0-9]+)")


def zone_problem(zone: str, region: str) -> str | None:
    """Why ``zone`` is not an availability zone (or Local Zone) of ``region``, or None."""
    if zone.startswith(region) and _ZONE_SUFFIX.fullmatch(zone[len(region):]):
        return None
    return f"{zone!r} is not a zone of {region} (environment.aws_region): write e.g. {region}a"


def _seconds_pair(value: object) -> object:
    # YAML and JSON have no tuples: a two-item list is the pair
    return tuple(value) if isinstance(value, list) else value


class DisruptionBudget(Spec):
    """A Karpenter disruption budget: at most ``nodes`` voluntarily disrupted at once (during ``schedule``)."""

    nodes: str = Field(default="1", pattern=r"^((100|[0-9]{1,2})%|[0-9]+)$")
    """Node count or percentage; ``"0"`` freezes voluntary disruption."""
    reasons: list[DisruptionReason] | None = None
    """Disruption reasons the budget applies to; all when unset."""
    schedule: CronSchedule | None = None
    """Cron schedule (UTC, 5 fields or ``@daily``-style) when the budget is active; needs ``duration``."""
    duration: str | None = Field(default=None, pattern=r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$")
    """How long the budget stays active after each ``schedule`` tick."""

    @model_validator(mode="after")
    def _schedule_and_duration(self) -> DisruptionBudget:
        if (self.schedule is None) != (self.duration is None):
            missing = "duration" if self.duration is None else "schedule"
            raise at(missing, "schedule and duration must be set together (a schedule opens the budget for duration)")
        return self


_HH_MM = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"
Weekday = Literal["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
WEEKDAYS: tuple[Weekday, ...] = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_FREEZE_SCHEDULE = re.compile(r"(\d{1,2}) (\d{1,2}) \* \* (\*|sun|mon|tue|wed|thu|fri|sat|[0-6])")
"""The schedules ``DriftWindow.freeze_budget`` writes: minute, hour, every day or one weekday."""


def _weekday_index(day: str) -> int:
    return int(day) if day.isdigit() else WEEKDAYS.index(day)
"""Cron day-of-week order (0 = Sunday)."""


class DriftWindow(Spec):
    """When Karpenter may replace drifted GPU nodes (a new AMI, any EC2NodeClass or NodePool template change).

    Emitted as a NodePool budget ``{nodes: "0", reasons: [Drifted], schedule, duration}`` that freezes drift for the rest
    of the day (or week), so an AMI bump never rolls GPU nodes during traffic. Karpenter pre-spins the replacement node
    before draining a drifted one, and each role's PodDisruptionBudget keeps its ready floor, so a node whose pods hold
    a role at that floor waits for a spare replica.
    """

    start_utc: str = Field(default="02:00", pattern=_HH_MM)
    """Window start, ``HH:MM`` UTC (Karpenter budget schedules are UTC)."""
    duration: KarpenterDuration = "4h"
    """Window length, e.g. ``4h`` or ``1h30m`` (at least 30 minutes, less than a day or a week)."""
    day: Weekday | None = None
    """Only on this weekday (``sat``); every day when unset."""

    @property
    def period_s(self) -> int:
        return 86400 * (7 if self.day else 1)

    @model_validator(mode="after")
    def _fits_period(self) -> DriftWindow:
        seconds = duration_seconds(self.duration)
        if not 1800 <= seconds < self.period_s or seconds % 60:
            raise at(  # the value to change is the duration, not the window as a whole
                "duration",
                f"duration {self.duration}: use whole minutes, at least 30m and less than "
                f"{'a week' if self.day else 'a day'} (the rest of the {'week' if self.day else 'day'} freezes drift)"
            )
        return self

    def freeze_budget(self) -> DisruptionBudget:
        """The budget that blocks drift from the window's end until its next start."""
        hh, mm = (int(x) for x in self.start_utc.split(":"))
        start_min = hh * 60 + mm
        window_min = int(duration_seconds(self.duration) // 60)
        end_min = start_min + window_min
        day = "*"
        if self.day is not None:
            day = WEEKDAYS[(WEEKDAYS.index(self.day) + end_min // 1440) % 7]
        end_min %= 1440
        frozen = self.period_s // 60 - window_min
        hours, minutes = divmod(frozen, 60)
        return DisruptionBudget(
            nodes="0", reasons=["Drifted"], schedule=f"{end_min % 60} {end_min // 60} * * {day}",
            duration=f"{hours}h{minutes}m" if minutes else f"{hours}h",
        )

    def describe(self) -> str:
        return f"{self.day or 'daily'} {self.start_utc} UTC for {self.duration}"

    @classmethod
    def from_freeze_budget(cls, schedule: str, duration: str) -> DriftWindow | None:
        """The window a freeze budget leaves open: the inverse of ``freeze_budget`` (for reading emitted NodePools, as
        ``gpuscale diff`` does), or None when the budget is not a daily or weekly freeze leaving such a window."""
        m = _FREEZE_SCHEDULE.fullmatch(schedule.strip())
        frozen_s = parse_duration(duration)
        if m is None or frozen_s is None or frozen_s == float("inf") or frozen_s % 60:
            return None
        minute, hour, day = int(m.group(1)), int(m.group(2)), m.group(3)
        if minute > 59 or hour > 23:
            return None
        period_s = 86400 if day == "*" else 7 * 86400
        open_s = period_s - int(frozen_s)
        start_s = hour * 3600 + minute * 60 + int(frozen_s)  # the freeze starts where the window ends
        weekday: Weekday | None = None
        if day != "*":
            weekday = WEEKDAYS[(_weekday_index(day) + start_s // 86400) % 7]
        hours, minutes = divmod(open_s // 60, 60)
        try:
            return cls(start_utc=f"{start_s % 86400 // 3600:02d}:{start_s % 3600 // 60:02d}",
                       duration=f"{hours}h{minutes}m" if minutes else f"{hours}h", day=weekday)
        except ValueError:  # a window the spec could not write (shorter than 30 minutes, none at all)
            return None


_RESERVATION_ID = re.compile(r"cr-[0-9a-z]+")
"""EC2NodeClass ``capacityReservationSelectorTerms[].id`` pattern (Karpenter v1.14.1 ``pkg/apis/v1/ec2nodeclass.go``)."""


def _reservation_id(value: str) -> str:
    if not _RESERVATION_ID.fullmatch(value):
        raise ValueError(f"{value!r} is not a capacity reservation id (expected cr- and lowercase letters or digits)")
    return value


def _utc(value: object) -> object:
    # a YAML timestamp arrives as a datetime, the same value through Pulumi's JSON config as a string
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"{value!r} is not an ISO 8601 date and time; write it in UTC, e.g. 2026-12-01T11:30:00Z") from None
    if isinstance(value, datetime) and (value.tzinfo is None or value.utcoffset() != timedelta(0)):
        raise ValueError(f"{value.isoformat()} is not in UTC: write the time with a Z, e.g. 2026-12-01T11:30:00Z")
    return value


UtcDateTime = Annotated[datetime, BeforeValidator(_utc)]
"""An ISO 8601 date and time in UTC (``2026-12-01T11:30:00Z``), from YAML or a JSON string."""


class CapacityReservationSpec(Spec):
    """An EC2 capacity reservation Karpenter may launch the pool's nodes into (selected by id; Karpenter reads its type
    and end from EC2). A Capacity Block states its start and end so gpuscale can check and plan them."""

    id: Annotated[str, AfterValidator(_reservation_id)]
    """The reservation id, ``cr-...``."""
    type: reservations.ReservationType = "odcr"
    """``odcr`` (On-Demand Capacity Reservation) or ``capacity-block`` (EC2 Capacity Block for ML)."""
    start_utc: UtcDateTime | None = None
    """A Capacity Block's start, UTC (``2026-12-01T11:30:00Z``); Karpenter launches into it only once it is active."""
    end_utc: UtcDateTime | None = None
    """A Capacity Block's end, UTC; Karpenter drains its nodes 40 minutes before (``gpuscale.guardrails.reservations``)."""
    instance_type: str | None = None
    """The reservation's instance type (one of the pool's ``instance_types``); default the pool's only one (required
    with ``instance_count`` on a pool of several)."""
    instance_count: int | None = Field(default=None, ge=1, le=MAX_CLUSTER_NODES)
    """Instances reserved: billed for the whole window whether used or not (the simulator and the plan charge them);
    None: not billed by gpuscale (the plan says so)."""
    usd_per_instance_hour: float | None = Field(default=None, gt=0, le=10_000)
    """What one reserved instance bills per hour: default the instance type's On-Demand rate for an ODCR; required
    for a ``capacity-block`` with ``instance_count`` (its offering's upfront fee / instances / hours)."""

    @model_validator(mode="after")
    def _billing(self) -> CapacityReservationSpec:
        missing = reservations.block_price_missing(self.type, self.instance_count, self.usd_per_instance_hour)
        if missing:
            raise at("usd_per_instance_hour", missing)
        if self.usd_per_instance_hour is not None and self.instance_count is None:
            raise at("instance_count", "usd_per_instance_hour bills instances: set instance_count (the instances the "
                     "reservation holds), or remove the price")
        return self

    @model_validator(mode="after")
    def _dates(self) -> CapacityReservationSpec:
        if self.type == "odcr":
            for field in ("start_utc", "end_utc"):
                if getattr(self, field) is not None:
                    raise at(field, f"{field} is only for type: capacity-block; an ODCR has no window Karpenter acts on "
                             "(its instances keep running when it ends). Remove it, or set type: capacity-block")
            return self
        missing = [f for f in ("start_utc", "end_utc") if getattr(self, f) is None]
        if missing:
            raise at(missing[0], f"a capacity-block needs start_utc and end_utc (UTC, as EC2 lists the block) so gpuscale "
                     f"can check its window and plan its end; {' and '.join(missing)} missing")
        assert self.start_utc is not None and self.end_utc is not None
        if self.end_utc <= self.start_utc:
            raise at("end_utc", f"end_utc {self.end_utc:%Y-%m-%dT%H:%MZ} is not after start_utc {self.start_utc:%Y-%m-%dT%H:%MZ}")
        return self


class GpuNodePoolSpec(Spec):
    """A Karpenter NodePool + EC2NodeClass for GPU nodes. Safe disruption is the default."""

    name: Name
    """NodePool name; workloads select it with the ``gpuscale.io/node-pool`` label."""
    instance_types: list[str] = Field(min_length=1)
    """EC2 instance types Karpenter may launch; all must carry the same GPU model."""
    capacity_types: list[CapacityType] = Field(default=["on-demand"], min_length=1)
    """``karpenter.sh/capacity-type`` values allowed."""
    gpu_limit: int = Field(gt=0)
    """NodePool ``limits['nvidia.com/gpu']``: the most GPUs this pool may ever run (the budget); at most 5,000 of its
    largest nodes (the largest cluster Kubernetes supports)."""
    consolidation_policy: ConsolidationPolicy = consolidation.GPU_POOL_CONSOLIDATION_POLICY
    """``WhenEmpty`` only removes nodes with no serving pods; the others evict in-flight inference."""
    consolidate_after: KarpenterDuration = consolidation.MIN_CONSOLIDATE_AFTER
    """Quiet time after the last pod left before an empty node may go: at least 1h and at least the cold start of the
    slowest model on the pool (``gpuscale.guardrails.consolidation`` says why)."""
    acknowledge_underutilized_consolidation_evicts_inference: bool = False
    """Set to accept ``WhenEmptyOrUnderutilized``/``Balanced`` or a ``consolidate_after`` below the floor on this GPU
    pool."""
    expire_after: KarpenterDuration = "Never"
    """Node maximum lifetime; ``Never`` so GPU nodes are never force-recycled mid-day (roll AMIs through drift)."""
    disruption_budgets: list[DisruptionBudget] = Field(default=[DisruptionBudget(nodes="1")], max_length=49)
    """Voluntary-disruption budgets; default one GPU node at a time. The drift window's freeze is added to them."""
    drift_window: DriftWindow | None = DriftWindow()
    """When drifted nodes may be replaced (default daily 02:00 UTC for 4h); ``null`` lets drift roll nodes at any time,
    paced only by ``disruption_budgets``."""
    ami_alias: str = versions.EKS_AL2023_AMI_ALIAS
    """EC2NodeClass AMI alias ``family@version``; ``@latest`` is refused in prod."""
    efa: bool = False
    """Attach EFA interfaces and use them: the EFA device plugin runs on the pool, pods request the instance type's EFA
    devices, and NIXL (P/D KV transfer) runs over libfabric."""
    placement_group: Literal["cluster", "none"] | None = None
    """EC2 placement group Karpenter launches into (EC2NodeClass ``placementGroupSelector``, Karpenter >= v1.11):
    ``cluster`` puts nodes on one low-latency network segment of ONE zone (EFA bandwidth between nodes), so the pool
    gives up zone redundancy; default ``cluster`` on EFA pools, ``none`` otherwise."""
    placement_zone: str | None = None
    """Zone of the cluster placement group (one cannot span zones); default the first of ``topology.zones``."""
    root_volume_gib: int | None = Field(default=None, gt=0)
    """Root EBS volume; default sized for the vLLM image plus the largest model cache on the pool."""
    labels: Labels = {}
    """Extra node labels (valid Kubernetes label keys and values)."""
    capacity_reservation_ids: list[str] = Field(default=[], max_length=30)
    """EC2 On-Demand Capacity Reservations (``cr-...``) Karpenter may launch into: the short form of
    ``capacity_reservations`` entries of type ``odcr`` (kept for existing stack files)."""
    capacity_reservations: list[CapacityReservationSpec] = Field(default=[], max_length=30)
    """EC2 capacity reservations Karpenter may launch into (ODCRs and Capacity Blocks, with their dates); needed for
    ``capacity_types: [reserved]``."""
    image_pull: ImagePull = "registry"
    """How a fresh node gets the vLLM image: ``registry`` (plain pull), ``soci-parallel`` (SOCI parallel pull and
    unpack; AL2023 AMIs from v20250813) or ``snapshot`` (pre-pulled on a Bottlerocket data volume from
    ``image_snapshot_id``). ``gpuscale.spec.cold_start`` has the timings."""
    image_snapshot_id: str | None = None
    """EBS snapshot (``snap-...``) of a Bottlerocket data volume with the pinned vLLM image already pulled; required with
    ``image_pull: snapshot``. Rebuild it whenever the vLLM image pin changes."""

    @field_validator("capacity_reservation_ids")
    @classmethod
    def _reservation_ids(cls, ids: list[str]) -> list[str]:
        bad = [i for i in ids if not _RESERVATION_ID.fullmatch(i)]
        if bad:
            raise ValueError(f"not capacity reservation ids: {bad} (expected cr-...)")
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"capacity reservation ids listed twice: {dupes}")
        return ids

    @property
    def reservations(self) -> list[CapacityReservationSpec]:
        """Every reservation of the pool: ``capacity_reservation_ids`` as ODCRs, then ``capacity_reservations``."""
        return [CapacityReservationSpec(id=i) for i in self.capacity_reservation_ids] + list(self.capacity_reservations)

    @property
    def capacity_blocks(self) -> list[tuple[int, CapacityReservationSpec]]:
        """``(index in capacity_reservations, block)`` of each Capacity Block."""
        return [(k, r) for k, r in enumerate(self.capacity_reservations) if r.type == "capacity-block"]

    @property
    def launches_only_reserved_blocks(self) -> bool:
        """Whether the pool can launch nothing once its Capacity Blocks end: reserved capacity only, and no ODCR."""
        return (set(self.capacity_types) == {"reserved"} and bool(self.reservations)
                and all(r.type == "capacity-block" for r in self.reservations))

    @model_validator(mode="after")
    def _reservation_instances(self) -> GpuNodePoolSpec:
        problems: list[tuple[str, str]] = []
        for k, r in enumerate(self.capacity_reservations):
            where = f"capacity_reservations[{k}]"
            if r.instance_type is not None and r.instance_type not in self.instance_types:
                problems.append((f"{where}.instance_type", f"{r.instance_type!r} is not one of the pool's "
                                 f"instance_types {self.instance_types}: Karpenter launches none of it here"))
                continue
            if r.instance_count is None:
                continue
            if r.instance_type is None and len(self.instance_types) > 1:
                problems.append((f"{where}.instance_type", f"the pool has {len(self.instance_types)} instance types "
                                 f"({', '.join(self.instance_types)}): say which one the reservation holds"))
                continue
            kind = CATALOGUE[r.instance_type or self.instance_types[0]]
            breach = reservations.oversized_breach(self.name, r.id, r.instance_count, kind.gpus_per_node, self.gpu_limit)
            if breach:
                problems.append((f"{where}.instance_count", breach))
        if problems:
            raise Problems(problems)
        return self

    def reserved_instances(self, instance_type: str) -> tuple[int, float]:
        """``(instances, USD per hour)`` the pool's reservations of ``instance_type`` hold and bill, used or not
        (``gpuscale.guardrails.reservations``); reservations without ``instance_count`` are not counted."""
        count, usd = 0, 0.0
        on_demand = CATALOGUE[instance_type].on_demand_usd_per_hour
        for r in self.capacity_reservations:
            if r.instance_count is None or (r.instance_type or self.instance_types[0]) != instance_type:
                continue
            rate = reservations.instance_hour_rate(r.type, r.usd_per_instance_hour, on_demand)
            assert rate is not None  # a block with a count states its price (CapacityReservationSpec._billing)
            count += r.instance_count
            usd += r.instance_count * rate
        return count, usd

    @model_validator(mode="after")
    def _reservations_once(self) -> GpuNodePoolSpec:
        ids = [r.id for r in self.reservations]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise at("capacity_reservations", f"capacity reservations listed twice (in capacity_reservation_ids or "
                     f"capacity_reservations): {dupes}")
        if len(ids) > 30:
            raise at("capacity_reservations", f"{len(ids)} capacity reservations; at most 30 in all")
        return self

    @field_validator("labels")
    @classmethod
    def _node_labels(cls, node_labels: dict[str, str]) -> dict[str, str]:
        # Karpenter's CRD refuses these in NodePool template labels; gpuscale sets the last two itself
        domains = ("karpenter.sh", "karpenter.k8s.aws")
        keys = ("kubernetes.io/hostname", "gpuscale.io/node-pool", "nvidia.com/gpu.present")
        bad = sorted(k for k in node_labels if ("/" in k and k.partition("/")[0].endswith(domains)) or k in keys)
        if bad:
            raise ValueError(
                f"labels {bad}: Karpenter restricts the {' and '.join(domains)} domains and kubernetes.io/hostname, "
                "and gpuscale sets gpuscale.io/node-pool and nvidia.com/gpu.present itself; use your own prefix, "
                "e.g. example.com/team"
            )
        return node_labels

    @field_validator("instance_types")
    @classmethod
    def _known(cls, types: list[str]) -> list[str]:
        unknown = [t for t in types if t not in CATALOGUE]
        if unknown:
            raise ValueError(f"unknown GPU instance type(s) {unknown}; known: {', '.join(sorted(CATALOGUE))}")
        gpus = {CATALOGUE[t].gpu for t in types}
        if len(gpus) > 1:
            raise ValueError(
                f"instance types {types} carry different GPUs ({', '.join(sorted({g.name + ' ' + str(g.memory_gib) + ' GiB' for g in gpus}))}); "
                "sizing needs one GPU model per pool: split them into separate pools"
            )
        return types

    @field_validator("ami_alias")
    @classmethod
    def _alias(cls, alias: str) -> str:
        if not _AMI_ALIAS.fullmatch(alias):
            raise ValueError(f"{alias!r}: use al2023@vYYYYMMDD or bottlerocket@vX.Y.Z (GPU variants are picked by the alias)")
        return alias

    @model_validator(mode="after")
    def _safe_disruption(self) -> GpuNodePoolSpec:
        # the cold start needs sizing, which the spec never imports: here the floor is its fixed hour, and the
        # feasibility checks apply the same rule again with each model's cold start
        found = consolidation.breaches(
            consolidation.SPEC, pool=self.name, policy=self.consolidation_policy, after=self.consolidate_after,
            after_s=self.consolidate_after_s, cold_start_s=None,
            acknowledged=self.acknowledge_underutilized_consolidation_evicts_inference,
        )
        if found:
            raise Problems([(consolidation.SPEC.name(field), message) for field, message in found])
        return self

    @model_validator(mode="after")
    def _capacity(self) -> GpuNodePoolSpec:
        # reserved beside on-demand/spot without ids only falls back (manifests.karpenter warns); alone it launches nothing
        if self.capacity_types == ["reserved"] * len(self.capacity_types) and not self.reservations:
            raise at("capacity_types",
                "capacity_types is only reserved but capacity_reservations (or capacity_reservation_ids) is empty: Karpenter only launches reserved "
                "capacity into the reservations the EC2NodeClass selects, so this pool could never launch a node. List "
                "them (cr-...) or add on-demand"
            )
        most = MAX_CLUSTER_NODES * max(it.gpus_per_node for it in self.instances)
        if self.gpu_limit > most:
            raise at("gpu_limit",
                f"gpu_limit {self.gpu_limit:,} GPUs is more than {MAX_CLUSTER_NODES:,} nodes of "
                f"{max(self.instances, key=lambda it: it.gpus_per_node).name} ({most:,} GPUs), the largest cluster "
                "Kubernetes supports; set the GPUs this pool may really run"
            )
        return self

    @model_validator(mode="after")
    def _image_pull_fits_the_ami(self) -> GpuNodePoolSpec:
        family, _, release = self.ami_alias.partition("@")
        if self.image_pull == "snapshot":
            if family != "bottlerocket":
                raise at("image_pull",
                    f"image_pull: snapshot needs a Bottlerocket AMI ({self.ami_alias} is {family}): only Bottlerocket "
                    "keeps container images on a separate data volume a snapshot can seed. Use ami_alias: "
                    "bottlerocket@vX.Y.Z, or image_pull: soci-parallel on AL2023"
                )
            if self.image_snapshot_id is None:
                raise at("image_snapshot_id",
                    "image_pull: snapshot needs image_snapshot_id: the snap-... of a Bottlerocket data volume with the "
                    "vLLM image pulled"
                )
            problem = snapshot_id_problem(self.image_snapshot_id)
            if problem:
                raise at("image_snapshot_id", problem)
        elif self.image_snapshot_id is not None:
            raise at("image_snapshot_id",
                f"image_snapshot_id is only used with image_pull: snapshot (got {self.image_pull}); set image_pull: "
                "snapshot or drop the id"
            )
        if self.image_pull == "soci-parallel":
            if family != "al2023":
                raise at("image_pull",
                    f"image_pull: soci-parallel is emitted as the AL2023 nodeadm feature gate FastImagePull, and "
                    f"{self.ami_alias} is {family}. Use an al2023@ alias, or image_pull: snapshot on Bottlerocket"
                )
            if release != "latest" and release < SOCI_MIN_AL2023_RELEASE:
                raise at("image_pull",
                    f"image_pull: soci-parallel needs an AL2023 AMI from {SOCI_MIN_AL2023_RELEASE} (nodeadm's SOCI "
                    f"support); {self.ami_alias} is older. Raise ami_alias"
                )
        return self

    @model_validator(mode="after")
    def _efa_supported(self) -> GpuNodePoolSpec:
        if self.efa:
            missing = [t for t in self.instance_types if CATALOGUE[t].efa_interfaces == 0]
            if missing:
                raise at("efa", f"efa: true but {missing} have no EFA interfaces")
        return self

    @model_validator(mode="after")
    def _placement(self) -> GpuNodePoolSpec:
        if self.placement_zone is not None and not self.cluster_placement:
            raise ValueError("placement_zone is only used with placement_group: cluster (set it, or drop placement_zone)")
        return self

    @property
    def cluster_placement(self) -> bool:
        """Whether the pool launches into a cluster placement group (one zone)."""
        return (self.placement_group or ("cluster" if self.efa else "none")) == "cluster"

    @model_validator(mode="after")
    def _not_cpu_pool_name(self) -> GpuNodePoolSpec:
        if self.name == CPU_POOL_NAME:
            raise at("name", f"name {self.name!r} is the general-purpose CPU NodePool's name; choose another")
        return self

    @property
    def instances(self) -> list[GpuInstanceType]:
        return [CATALOGUE[t] for t in self.instance_types]

    @property
    def effective_budgets(self) -> list[DisruptionBudget]:
        """What the NodePool carries: ``disruption_budgets`` plus the drift window's freeze."""
        freeze = [self.drift_window.freeze_budget()] if self.drift_window is not None else []
        return [*self.disruption_budgets, *freeze]

    @property
    def consolidate_after_s(self) -> float:
        return duration_seconds(self.consolidate_after)


class CpuNodePoolSpec(Spec):
    """The general-purpose Karpenter NodePool (routers, controllers, Prometheus)."""

    instance_categories: list[Literal["c", "m", "r"]] = Field(default=["c", "m"], min_length=1)
    """``karpenter.k8s.aws/instance-category`` values."""
    capacity_types: list[Literal["on-demand", "spot"]] = Field(default=["on-demand", "spot"], min_length=1)
    """Capacity types allowed (reserved capacity needs reservation ids, which only GPU pools take)."""
    cpu_limit: int = Field(default=256, gt=0)
    """NodePool ``limits.cpu`` (cores)."""
    consolidation_policy: ConsolidationPolicy = "WhenEmptyOrUnderutilized"
    """CPU nodes may be repacked: nothing on them holds a loaded model."""
    consolidate_after: KarpenterDuration = "5m"
    """Quiet time before consolidation."""


class TopologyLevel(Spec):
    """One level of the KAI Topology, coarsest first."""

    node_label: LabelKey
    """Node label key that names the domain at this level."""
    alias: LabelKey | None = None
    """Short name used in placement annotations."""


def level_problem(levels: list[TopologyLevel]) -> str | None:
    """Why KAI's Topology would refuse these levels (coarsest first), or None (``KaiTopologyArgs`` checks the same)."""
    labels = [lv.node_label for lv in levels]
    if len(set(labels)) != len(labels):
        return f"levels node_label values must be unique: {labels}"
    if "kubernetes.io/hostname" in labels[:-1]:
        return "levels: kubernetes.io/hostname may only be the last (finest) level"
    # KAI's Topology webhook: aliases are unique and never equal to a nodeLabel (placements accept either)
    aliases = [lv.alias for lv in levels if lv.alias is not None]
    dupes = sorted({a for a in aliases if aliases.count(a) > 1})
    if dupes:
        return f"levels: aliases must be unique; repeated: {dupes}"
    clash = sorted(a for a in aliases if a in set(labels))
    if clash:
        return f"levels: alias {clash} equals a node_label; placements would be ambiguous, pick another alias"
    return None


def default_levels() -> list[TopologyLevel]:
    return [
        TopologyLevel(node_label="topology.kubernetes.io/zone", alias="zone"),
        TopologyLevel(node_label="topology.k8s.aws/network-node-layer-1", alias="spine"),
        TopologyLevel(node_label="topology.k8s.aws/network-node-layer-2", alias="block"),
        TopologyLevel(node_label="topology.k8s.aws/network-node-layer-3", alias="rack"),
        TopologyLevel(node_label="kubernetes.io/hostname", alias="node"),
    ]


class ProvisioningSpec(Spec):
    """How fast new GPU capacity arrives; feeds cold-start sizing and the simulator."""

    node_provisioner: Literal["karpenter", "cluster-autoscaler"] = "karpenter"
    """Which node autoscaler the cold-start chain assumes (gpuscale deploys Karpenter)."""
    node_ready_s: Annotated[tuple[float, float], BeforeValidator(_seconds_pair)] = (45.0, 60.0)
    """Pending pod to node Ready, seconds (min, max): Karpenter 45-60 s, Cluster Autoscaler 90-120 s."""
    gpu_ready_s: float = Field(default=30.0, ge=0)
    """Node Ready to ``nvidia.com/gpu`` allocatable (device plugin start), seconds."""
    image_pull_s: float | None = Field(default=None, ge=0, le=86_400)
    """Measured vLLM image pull on a fresh node, seconds; default derived per pool from its ``image_pull`` and the
    instance's bandwidth (``gpuscale.spec.cold_start``)."""
    engine_init_s: float | None = Field(default=None, ge=0, le=86_400)
    """Measured vLLM engine start after the weights (compile + CUDA graphs), seconds; default derived per model from
    its size and ``cold_start.engine_start`` (perf-model.md 4.3: 8B 15-40 s, 70B 60-150 s)."""
    capacity_buffer_gate: bool = False
    """Karpenter's ``CapacityBuffer`` feature gate (alpha, off by default in v1.14.1): the chart value
    ``settings.featureGates.capacityBuffer`` of the Karpenter gpuscale installs, or a statement that the cluster's own
    Karpenter runs with it. Needed by ``models[].headroom.mode: capacity-buffer``."""

    @model_validator(mode="after")
    def _ordered(self) -> ProvisioningSpec:
        lo, hi = self.node_ready_s
        if not 0 < lo <= hi <= 3600:
            raise at("node_ready_s", f"node_ready_s must be [min, max] seconds with 0 < min <= max <= 3600, got {list(self.node_ready_s)}")
        return self


class TopologySpec(Spec):
    """Zones, node pools and the topology KAI places tensor-parallel groups in."""

    zones: list[str] = Field(min_length=1, max_length=MAX_ZONES)
    """Availability zones the cluster spans, in ``environment.aws_region`` (e.g. ``us-east-1a``), each once."""
    gpu_pools: list[GpuNodePoolSpec] = Field(min_length=1)
    """GPU node pools."""
    cpu_pool: CpuNodePoolSpec = CpuNodePoolSpec()
    """General-purpose node pool."""
    levels: list[TopologyLevel] = Field(default_factory=default_levels, min_length=1, max_length=16)
    """KAI topology levels, coarsest first; ``kubernetes.io/hostname`` may only be last."""
    provisioning: ProvisioningSpec = ProvisioningSpec()
    """Node provisioning latency."""

    @field_validator("zones")
    @classmethod
    def _zones(cls, zones: list[str]) -> list[str]:
        dupes = sorted({z for z in zones if zones.count(z) > 1})
        if dupes:
            raise ValueError(f"zones listed twice: {dupes} (each zone gets one subnet pair, named after the zone)")
        return zones

    @model_validator(mode="after")
    def _checks(self) -> TopologySpec:
        names = [p.name for p in self.gpu_pools]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise at("gpu_pools", f"gpu_pools names must be unique; repeated: {dupes}")
        problem = level_problem(self.levels)
        if problem:
            raise at("levels", problem)
        for j, p in enumerate(self.gpu_pools):
            if p.placement_zone is not None and p.placement_zone not in self.zones:
                raise at(f"gpu_pools[{j}].placement_zone",
                         f"gpu pool {p.name}: placement_zone {p.placement_zone} is not in zones {self.zones}")
        return self

    def pool_zones(self, name: str) -> list[str]:
        """Zones pool ``name`` launches in: all of ``zones``, or the one of its cluster placement group."""
        pool = self.pool(name)
        return [pool.placement_zone or self.zones[0]] if pool.cluster_placement else list(self.zones)

    def pool(self, name: str) -> GpuNodePoolSpec:
        for p in self.gpu_pools:
            if p.name == name:
                return p
        raise KeyError(name)

    def pool_levels(self, name: str) -> list[TopologyLevel]:
        """The levels every node of pool ``name`` carries: ``levels`` without the AWS network layers its instance types
        do not get. KAI v0.17 leaves a node missing any level of a Topology out of the topology tree, so a workload
        naming it never lands there (upstream-facts-2.md B2). A pool that mixes types with different layer counts (e.g.
        p5.48xlarge with 3 and p5.4xlarge with none) gets the layers *all* of its types carry, so every node stays
        schedulable; packing under a switch then only covers the common layers."""
        layers = min(it.network_node_layers for it in self.pool(name).instances)
        return [lv for lv in self.levels if (n := network_layer(lv.node_label)) is None or n <= layers]

    def pool_network_layers(self, name: str) -> dict[str, int]:
        """``network_node_layers`` of each instance type of pool ``name`` (shown where a mixed pool loses layers)."""
        return {it.name: it.network_node_layers for it in self.pool(name).instances}



def network_layer(node_label: str) -> int | None:
    """``N`` of a ``topology.k8s.aws/network-node-layer-N`` label; ``None`` for any other label."""
    suffix = node_label.removeprefix(labels.NETWORK_NODE_LAYER_PREFIX)
    return int(suffix) if suffix != node_label and suffix.isdigit() else None
