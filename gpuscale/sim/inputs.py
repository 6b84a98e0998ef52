"""What one run needs, as frozen specs: the model and cluster set-up (``SimSetup``) and one compared variant."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import Field

from gpuscale import perf
from gpuscale.first_answer import FrontDoorSizing
from gpuscale.sim.nodes import ConsolidationSpec, DriftRollout, ProvisionerSpec, SpotSpec, StartupSpec
from gpuscale.sim.placement import SchedulerSpec
from gpuscale.sim.policies import PolicySpec
from gpuscale.sim.replica import ReplicaModel
from gpuscale.sizing import RoleSizing
from gpuscale.spec.base import Spec
from gpuscale.spec.model import Role

CLOCK_START = datetime(2024, 1, 1, tzinfo=UTC)
"""A Monday, 00:00 UTC: where a run's clock starts unless the scenario says otherwise (traces carry no wall clock)."""


class RoleSetup(Spec):
    """One serving role of the model."""

    role: Role
    initial_replicas: int = Field(ge=0)
    """Ready replicas at t = 0 (placed on warm nodes)."""
    sizing: RoleSizing
    """The sized autoscaler numbers (gpuscale policy, maxima)."""


class InitialNode(Spec):
    """A node present at t = 0 that other tenants partly use (the fragmented cluster of the gang scenario)."""

    foreign_gpus: int = Field(default=0, ge=0)
    """GPUs other workloads hold on it for the whole run."""


class SimSetup(Spec):
    """Everything about the model and cluster a run needs, derived from spec and sizing."""

    stack: str
    model: str
    mode: Literal["aggregated", "disaggregated"]
    replica: ReplicaModel
    pods_per_replica: int = Field(gt=0)
    gpus_per_pod: int = Field(gt=0)
    instance_type: str
    gpus_per_node: int = Field(gt=0)
    usd_per_gpu_hour: float = Field(gt=0)
    network_gbps: float = Field(gt=0)
    """Node network bandwidth (EFA or TCP): prefill -> decode KV transfers share it."""
    pool_gpu_limit: int = Field(gt=0)
    """NodePool ``limits['nvidia.com/gpu']``: the provisioner never exceeds it."""
    reserved_instances: int = Field(default=0, ge=0)
    """Instances of ``instance_type`` the pool's capacity reservations hold (``GpuNodePoolSpec.reserved_instances``):
    the model's first nodes launch into them."""
    reserved_usd_per_hour: float = Field(default=0.0, ge=0)
    """What those reservations bill per hour, used or not (``gpuscale.guardrails.reservations``)."""
    reserved_only: bool = False
    """The pool may launch only ``reserved`` capacity: no node beyond ``reserved_instances`` is ever launched (a
    reservation's offering is unavailable once its instances are used, ``NodeLayer._room``)."""
    ttft_slo_s: float = Field(gt=0)
    itl_slo_s: float = Field(gt=0)
    request_timeout_s: float = Field(gt=0)
    roles: list[RoleSetup] = Field(min_length=1)
    startup: StartupSpec
    spot: SpotSpec | None = None
    """Spot interruptions of the pool's nodes; None for on-demand pools."""
    prefill_routing: Literal["least-load", "cache-aware", "cache-aware-work"] = "least-load"
    """How the router picks a prefill (or aggregated) replica; the P/D router emitted for disaggregated models is
    cache-aware (``gpuscale.manifests.router.PREFILL_POLICY``): ``cache-aware`` is vLLM Router's ``cache_aware`` rule
    as its source computes it (request counts, then prefix match; ``gpuscale.sim.router``), ``cache-aware-work``
    balances prefill work instead, a pick the router does not offer, kept as the alternative it is measured against."""
    decode_routing: Literal["least-load", "power-of-two"] = "least-load"
    backend: Literal["keda", "hpa"] = "keda"
    extra_nodes: list[InitialNode] = Field(default_factory=list)
    duration_s: float = Field(gt=0)
    """Arrivals come in [0, duration_s]; the run then drains until every request is decided."""
    scrape_s: float = Field(default=15.0, gt=0)
    """Prometheus scrape (and DCGM averaging) interval."""
    series_s: float = Field(default=15.0, gt=0)
    """Sampling interval of the reported time series."""
    clock_start: datetime = CLOCK_START
    """Wall-clock time at t = 0, for cron triggers (wake and warm-up schedules)."""
    clock_rate: float = Field(default=1.0, gt=0)
    """Wall-clock seconds per simulated second: a trace compressed K times runs its day K times faster, so its
    schedules (derived in trace time) still line up with its traffic."""

    @property
    def kv_link_bytes_per_s(self) -> float:
        """What a prefill replica's KV transfers achieve together: its share of the line rate
        (``perf.kv_link_bytes_per_s``, the figure sizing's transfer check reads) at ``perf.KV_TRANSFER_EFFICIENCY``."""
        line = perf.kv_link_bytes_per_s(self.network_gbps, self.gpus_per_node, self.replica.gpus)
        return line * perf.KV_TRANSFER_EFFICIENCY


class FrontDoorSim(Spec):
    """The front door of a variant, as sizing configures it (``gpuscale.first_answer.FrontDoorSizing``)."""

    hold_limit_s: float = Field(gt=0)
    """A request held at zero waits at most this long, then is answered 503 (EPP ``defaultRequestTTL``)."""
    queue_bound: int = Field(gt=0)
    """Held requests at most; one more is answered 503 at once (EPP ``maxRequests``)."""
    retry_after_s: float = Field(ge=0)
    """``Retry-After`` of its 503s."""
    poll_s: float = Field(gt=0)
    """Scrape interval of the door's queue (the KEDA poll is the autoscaler's sync)."""

    @classmethod
    def from_sizing(cls, door: FrontDoorSizing) -> FrontDoorSim:
        return cls(hold_limit_s=door.hold_limit_s, queue_bound=door.queue_bound, retry_after_s=door.retry_after_s,
                   poll_s=door.poll_s)


class HeadroomSim(Spec):
    """Spare GPU capacity Karpenter keeps for ``pods`` more pods of the model's size (``gpuscale.headroom``).

    A CapacityBuffer's virtual pods join every provisioning pass (``GetPendingPods`` appends them at v1.14.1) and are
    never bound: Karpenter launches nodes until they fit beside the real pods, the nodes' free GPUs are what the
    model's pods bind to at once, and a node that hosts a virtual pod is never empty-consolidated
    (``Cluster.HasBufferPods``). A pass runs on every pending real pod and at the buffer controller's resync.
    Placeholder pods (``prepull``) are the same capacity held by real low-priority pods, which pull the vLLM image on
    their nodes; a pending replica may take the GPUs they hold only once it has been pending ``preemption_delay_s``
    (KAI's preemption delay is the preemptor's, whatever the victim: ``gpuscale.headroom``). gpuscale emits 0 for a
    model with placeholders (``headroom.serving_preemption_delay_s``); the scenario also runs the node-time delay."""

    pods: int = Field(gt=0)
    """Virtual (or placeholder) pods kept placeable: the sized N replicas x pods per replica."""
    resync_s: float = Field(gt=0)
    """The CapacityBuffer controller's requeue (``headroom.BUFFER_RESYNC_S``): each reconcile triggers a provisioning
    pass, the only pass that refills a spare node a serving pod took (placeholders are refilled by their own pending
    replacement, at once)."""
    prepull: bool = False
    """The spare nodes pull the vLLM image before any serving pod lands (placeholder pods; virtual pods run nothing)."""
    preemption_delay_s: float = Field(default=0.0, ge=0)
    """Placeholder pods only: how long a replica must be pending (since its creation or last eviction) before it may
    evict a placeholder and take its GPUs; free GPUs are taken at once. A CapacityBuffer's virtual pods are never bound,
    so nothing is evicted and no delay applies."""


class Variant(Spec):
    """One policy compared in a scenario: the autoscaler plus the layer-1 and layer-2 settings it runs with."""

    name: str
    description: str
    policy: PolicySpec
    provisioner: ProvisionerSpec
    consolidation: ConsolidationSpec
    drift: DriftRollout | None = None
    """Every GPU node drifts during the run and is replaced (the ``ami-rollout`` scenario)."""
    scheduler: SchedulerSpec
    retry_evicted: bool = False
    """Clients retry requests lost to an eviction or interruption (else they count as lost)."""
    initial_replicas: dict[str, int] | None = None
    """Override the setup's initial replicas per role."""
    sizing: dict[str, RoleSizing] | None = None
    """This variant's autoscaler numbers per role (the model sized another way, e.g. at another target utilisation);
    None: the set-up's."""
    bound: Literal["ceiling"] | None = None
    """Set on the ceiling variant: it is a reference, not a policy to choose."""
    at_zero: Literal["hold", "connection-refused"] = "hold"
    """A request for a role with no ready replica and no front door: held by an ideal gateway until one is ready or the
    client gives up (``hold``), or refused at once because the Service has no endpoint (``connection-refused``, what a
    plain Service does)."""
    front_door: FrontDoorSim | None = None
    """The front door holds requests at zero (and its 503s replace ``at_zero``)."""
    startup: StartupSpec | None = None
    """This variant's cold start (its cold-start choices); ``None``: the set-up's."""
    headroom: HeadroomSim | None = None
    """Spare nodes kept ready ahead of demand, consumed by scale-ups and refilled (``HeadroomSim``)."""
    prewarm: bool = False
    """When the front door first holds a request at zero, a low-priority placeholder of the replica's size asks for
    capacity at once (before KEDA has created the model's pod) and pulls the vLLM image on the new node."""
