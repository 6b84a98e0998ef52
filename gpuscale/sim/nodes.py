"""Layer 1: GPU nodes, how long they take to arrive, what a replica waits through, and who removes them.

Latency chain (perf-model.md section 4): decision (Karpenter batches pending pods for 1-10 s; Cluster Autoscaler
scans every 10 s, simulates for 5-30 s and goes through an ASG, 0-60 s more), launch to node Ready (the spec's
``node_ready_s`` for the provisioner it names; the user's figures 45-60 s Karpenter vs 90-120 s Cluster
Autoscaler otherwise), Ready to ``nvidia.com/gpu`` allocatable (``gpu_ready_s``), then per pod: image pull on a
fresh node, weight load, engine init (sizing's ``cold_start``), each jittered uniformly by +-15%.

Removal: Karpenter ``WhenEmpty`` deletes a node once it has had no pod change for ``consolidateAfter``;
``WhenEmptyOrUnderutilized`` also deletes a node whose pods fit on the other nodes, evicting them (their
in-flight requests are lost and each evicted replica reloads its model). Cluster Autoscaler's scale-down is the
same repacking at its defaults (utilisation below 50% for 10 min, not within 10 min of a scale-up).

Every removal goes through one verb, ``NodeLayer.disrupt(node, reason, grace_s)``: the node is cordoned, its replicas
are evicted (replacements are created at once and placed elsewhere), in-flight requests get ``grace_s`` to finish,
then the node goes. Consolidation disrupts with no grace; a spot interruption with the two-minute notice. A drift
rollout is the same verb applied node by node under the NodePool's disruption budget.

Start-up times: sizing's cold start stage by stage (``gpuscale.first_answer``): the image pull for the pool's
``image_pull`` choice and the node's bandwidth, the weights from their source at its throughput (or from the node's
NVMe cache when an earlier replica there downloaded them, ``weights_cache: node-nvme``), the engine start for the
model's size and ``engine_start`` choice.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Generic, Literal, Protocol, TypeVar, overload

from pydantic import Field

from gpuscale.first_answer import ColdStart
from gpuscale.headroom import KARPENTER_BATCH_IDLE_S, KARPENTER_BATCH_MAX_S
from gpuscale.sim.states import NodeState
from gpuscale.spec.base import Spec
from gpuscale.spec.topology import GpuNodePoolSpec, ProvisioningSpec

KARPENTER_DECISION_S = (KARPENTER_BATCH_IDLE_S, KARPENTER_BATCH_MAX_S)
"""Karpenter's batch window, ``(BATCH_IDLE_DURATION, BATCH_MAX_DURATION)``: the provisioner runs a pass
``idle`` after the last new pending pod, at most ``max`` after the first (``gpuscale.headroom``; ``NodeLayer.demand``)."""
KARPENTER_READY_S = (45.0, 60.0)
"""The user's Karpenter figure, used when the spec describes Cluster Autoscaler."""
CA_SCAN_INTERVAL_S = 10.0
"""Cluster Autoscaler ``scan-interval``."""
CA_DECISION_S = (5.0, 30.0)
"""Cluster Autoscaler simulation latency on a small cluster (CA FAQ: <= 30 s, 5 s average)."""
CA_ASG_S = (0.0, 60.0)
"""ASG indirection before the instance launches (perf-model.md 4.1)."""
CA_READY_S = (90.0, 120.0)
"""The user's Cluster Autoscaler figure, used when the spec describes Karpenter."""
CA_UNNEEDED_S = 600.0
"""``scale-down-unneeded-time`` and ``scale-down-delay-after-add`` defaults."""
CA_UTILISATION = 0.5
"""``scale-down-utilization-threshold`` (by requests)."""
KARPENTER_DISRUPTION_POLL_S = 10.0
"""How often the disruption controller looks for candidates."""
STARTUP_JITTER = 0.15
SPOT_NOTICE_S = 120.0
"""EC2 spot interruption notice (aws.amazon.com/ec2/spot: two minutes); Karpenter drains the node on it."""
SPOT_INTERRUPTIONS_PER_NODE_HOUR = 0.2 / 730.0
"""Default interruption rate of a spot GPU node: the EC2 Spot Instance Advisor's most frequent bucket (">20%" of
instances interrupted per month; perf-model.md 1.1 finds no authoritative GPU figure), as a rate per node-hour."""
class ProvisionerSpec(Spec):
    """How a node autoscaler turns pending pods into a schedulable GPU node."""

    kind: Literal["karpenter", "cluster-autoscaler"]
    decision_s: tuple[float, float]
    """Pending pod seen -> launch call: Cluster Autoscaler uniform (min, max); Karpenter its batch window (idle after
    the last new pending pod, max after the first: ``NodeLayer.demand``)."""
    scan_interval_s: float = Field(default=0.0, ge=0)
    """Periodic scan (Cluster Autoscaler); 0 reacts to pending pods at once (Karpenter's watch)."""
    launch_extra_s: tuple[float, float] = (0.0, 0.0)
    """Extra launch indirection (ASG), uniform."""
    node_ready_s: tuple[float, float]
    """Launch -> node Ready, uniform."""
    gpu_ready_s: tuple[float, float]
    """Node Ready -> GPUs allocatable, uniform."""

    def sample_launch_delay(self, rng: random.Random) -> float:
        return rng.uniform(*self.decision_s) + rng.uniform(*self.launch_extra_s)

    def sample_boot(self, rng: random.Random) -> float:
        return rng.uniform(*self.node_ready_s) + rng.uniform(*self.gpu_ready_s)

    @property
    def worst_case_s(self) -> float:
        """Longest pending-pod -> schedulable-GPU latency this provisioner draws."""
        return self.scan_interval_s + self.decision_s[1] + self.launch_extra_s[1] + self.node_ready_s[1] + self.gpu_ready_s[1]


class StartupSpec(Spec):
    """What a replica's pod waits through once bound: image pull (fresh node only), weights, engine init."""

    image_pull_s: float = Field(ge=0)
    weights_s: float = Field(ge=0)
    """Weights from their source (S3 or the hub) at the spec's throughput."""
    local_weights_s: float | None = Field(default=None, ge=0)
    """Weights from the node's NVMe cache when an earlier replica there downloaded them; None when nothing is kept on
    the node (S3 streams straight to the GPU, a per-pod download goes with its pod)."""
    engine_init_s: float = Field(ge=0)
    jitter: float = Field(default=STARTUP_JITTER, ge=0, lt=1)
    """Each part is drawn uniformly within +-jitter of its nominal value."""

    def sample(self, rng: random.Random, nominal: float) -> float:
        return nominal * rng.uniform(1.0 - self.jitter, 1.0 + self.jitter)

    @property
    def worst_case_s(self) -> float:
        return (self.image_pull_s + self.weights_s + self.engine_init_s) * (1.0 + self.jitter)

    @property
    def best_load_s(self) -> float:
        """Shortest a replica can take from bound to serving (image cached, weights local when they can be)."""
        weights = self.local_weights_s if self.local_weights_s is not None else self.weights_s
        return (weights + self.engine_init_s) * (1.0 - self.jitter)


class SpotSpec(Spec):
    """Spot interruptions of the pool's nodes: a Poisson process per node, drained on the notice."""

    interruptions_per_node_hour: float = Field(ge=0)
    notice_s: float = Field(default=SPOT_NOTICE_S, ge=0)


class DriftRollout(Spec):
    """Every GPU node drifts at ``at_s`` (an AMI bump, a NodePool or EC2NodeClass edit) and Karpenter replaces them.

    Karpenter v1.14.1 pre-spins a replacement node and only then drains a drifted one (``disruption/drift.go``). With no
    ``terminationGracePeriod`` (gpuscale's GPU NodePools), a node is a candidate only while every PDB on it allows the
    eviction, and its pods get their own grace to finish. With one (``force_after_s``), drift ignores PDBs and
    ``do-not-disrupt`` (``NewCandidate``): the pods keep serving until it elapses and are then deleted with their
    requests in flight."""

    at_s: float = Field(ge=0)
    budget_nodes: int = Field(default=1, ge=1)
    """Nodes replaced at once (the NodePool's disruption budget)."""
    force_after_s: float | None = Field(default=None, gt=0)
    """The NodePool's ``terminationGracePeriod``; None: PDBs hold."""
    drain_grace_s: float = Field(default=0.0, ge=0)
    """Pod ``terminationGracePeriodSeconds``: in-flight requests' time to finish on a graceful eviction."""
    ready_floor: dict[str, int] = {}
    """Per role, the PDB's ready floor (replicas that must stay ready)."""
    poll_s: float = Field(default=KARPENTER_DISRUPTION_POLL_S, gt=0)


class ConsolidationSpec(Spec):
    """Who removes GPU nodes, and when."""

    policy: Literal["WhenEmpty", "WhenEmptyOrUnderutilized", "cluster-autoscaler", "none"]
    consolidate_after_s: float = Field(ge=0)
    """Quiet time (no pod added or removed) before a node is a candidate; CA: unneeded time."""
    utilisation_threshold: float = Field(default=1.0, gt=0, le=1)
    """Underutilised means requested GPUs / node GPUs below this (CA 0.5; Karpenter: any node whose pods fit elsewhere)."""
    budget_nodes: int = Field(default=1, ge=1)
    """Nodes disrupted per poll (the NodePool's disruption budget)."""
    poll_s: float = Field(default=KARPENTER_DISRUPTION_POLL_S, gt=0)
    delay_after_add_s: float = Field(default=0.0, ge=0)
    """No scale-down this long after a node was added (CA ``scale-down-delay-after-add``)."""

    @property
    def evicts(self) -> bool:
        return self.policy in ("WhenEmptyOrUnderutilized", "cluster-autoscaler")


def karpenter(prov: ProvisioningSpec) -> ProvisionerSpec:
    ready = prov.node_ready_s if prov.node_provisioner == "karpenter" else KARPENTER_READY_S
    return ProvisionerSpec(
        kind="karpenter", decision_s=KARPENTER_DECISION_S, node_ready_s=ready,
        gpu_ready_s=(prov.gpu_ready_s * (1 - STARTUP_JITTER), prov.gpu_ready_s * (1 + STARTUP_JITTER)),
    )


def cluster_autoscaler(prov: ProvisioningSpec) -> ProvisionerSpec:
    ready = prov.node_ready_s if prov.node_provisioner == "cluster-autoscaler" else CA_READY_S
    return ProvisionerSpec(
        kind="cluster-autoscaler", decision_s=CA_DECISION_S, scan_interval_s=CA_SCAN_INTERVAL_S,
        launch_extra_s=CA_ASG_S, node_ready_s=ready,
        gpu_ready_s=(prov.gpu_ready_s * (1 - STARTUP_JITTER), prov.gpu_ready_s * (1 + STARTUP_JITTER)),
    )


def provisioner_of(prov: ProvisioningSpec) -> ProvisionerSpec:
    """The provisioner the spec describes."""
    return karpenter(prov) if prov.node_provisioner == "karpenter" else cluster_autoscaler(prov)


def startup_of(cold: ColdStart) -> StartupSpec:
    """What a bound pod waits through, from sizing's cold start (the same stages the plan and the components read)."""
    return StartupSpec(
        image_pull_s=cold.image_pull_s, weights_s=cold.weights_s, local_weights_s=cold.weights_cached_s,
        engine_init_s=cold.engine_init_s,
    )


def consolidation_of(pool: GpuNodePoolSpec) -> ConsolidationSpec:
    """The NodePool's disruption settings as the simulator runs them."""
    budget = next((int(b.nodes) for b in pool.disruption_budgets if b.schedule is None and b.nodes.isdigit()), 1)
    return ConsolidationSpec(
        policy="WhenEmpty" if pool.consolidation_policy == "WhenEmpty" else "WhenEmptyOrUnderutilized",
        consolidate_after_s=pool.consolidate_after_s, budget_nodes=max(budget, 1),
    )


def when_empty(after_s: float) -> ConsolidationSpec:
    return ConsolidationSpec(policy="WhenEmpty", consolidate_after_s=after_s)


def when_empty_or_underutilized(after_s: float = 0.0) -> ConsolidationSpec:
    """Karpenter's default disruption (``consolidateAfter: 0s``)."""
    return ConsolidationSpec(policy="WhenEmptyOrUnderutilized", consolidate_after_s=after_s)


def cluster_autoscaler_scale_down() -> ConsolidationSpec:
    return ConsolidationSpec(
        policy="cluster-autoscaler", consolidate_after_s=CA_UNNEEDED_S, utilisation_threshold=CA_UTILISATION,
        delay_after_add_s=CA_UNNEEDED_S,
    )


T = TypeVar("T")


class StateWatch(Protocol):
    """Told just before a node, pod or replica changes anything that decides what its GPUs are doing (the GPU-time
    ledger integrates up to that instant, then recounts; ``accounting.GpuLedger``)."""

    def will_change(self) -> None: ...


class _Unwatched:
    def will_change(self) -> None:
        return None


UNWATCHED: StateWatch = _Unwatched()
"""For nodes and replicas nothing accounts for (unit tests, the placement functions)."""


class Watched(Generic[T]):
    """An attribute that tells its owner's ``watch`` before every write: declare ``state = Watched[NodeState]()`` and
    the owner gets a ``_state`` slot and a ``watch`` attribute."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._slot = f"_{name}"

    @overload
    def __get__(self, obj: None, _objtype: type | None = None) -> Watched[T]: ...
    @overload
    def __get__(self, obj: object, _objtype: type | None = None) -> T: ...

    def __get__(self, obj: object | None, _objtype: type | None = None) -> Watched[T] | T:
        if obj is None:
            return self
        value: T = getattr(obj, self._slot)
        return value

    def __set__(self, obj: object, value: T) -> None:
        obj.watch.will_change()  # type: ignore[attr-defined]
        setattr(obj, self._slot, value)


class Node:
    """One GPU node of the pool (mutable simulation state). ``state`` and ``free`` tell the watch before they change."""

    __slots__ = (
        "_free", "_state", "cordoned", "foreign", "gpus", "last_change", "nid", "pods", "prewarmed", "pull_done_at",
        "ready_at", "requested_at", "spare", "watch", "weights_cached",
    )
    state = Watched[NodeState]()
    free = Watched[int]()
    """GPUs no pod holds."""

    def __init__(self, nid: int, gpus: int, requested_at: float, *, foreign: int = 0, watch: StateWatch = UNWATCHED) -> None:
        self.watch = watch
        self.nid = nid
        self.gpus = gpus
        self.foreign = foreign
        """GPUs held by other tenants' pods: never ours, never freed."""
        self.free = gpus - foreign  # a new node's GPUs are the model's from now on
        self.state = NodeState.PROVISIONING
        self.cordoned = False
        """Being disrupted: nothing new is placed on it."""
        self.weights_cached = False
        """A replica finished loading here with weights on local disk."""
        self.requested_at = requested_at
        self.ready_at: float | None = None
        self.pull_done_at: float | None = None
        """When the vLLM image finished (or will finish) pulling on this node; None before the first pull."""
        self.pods = 0
        self.last_change = requested_at
        self.prewarmed = False
        """Launched for a placeholder pod, which pulls the vLLM image as soon as the node is Ready."""
        self.spare = False
        """Launched for the headroom's virtual pods, not for a pending pod (no pod waited for it)."""

    @property
    def used(self) -> int:
        return self.gpus - self.foreign - self.free


def consolidation_candidate(
    nodes: list[Node], t: float, spec: ConsolidationSpec, last_scale_up_t: float, pods_fit_elsewhere: Callable[[Node], bool],
) -> tuple[Node, bool] | None:
    """The node the disruption controller removes now, and whether it must evict pods to do so.

    Empty nodes go first; an eviction candidate is the node with the fewest pods (cheapest disruption).
    """
    if spec.policy == "none" or t - last_scale_up_t < spec.delay_after_add_s:
        return None
    quiet = [
        n for n in nodes
        if n.state == NodeState.READY and not n.cordoned and n.foreign == 0 and t - n.last_change >= spec.consolidate_after_s
    ]
    empty = [n for n in quiet if n.pods == 0]
    if empty:
        return min(empty, key=lambda n: (n.last_change, n.nid)), False
    if not spec.evicts:
        return None
    under = [n for n in quiet if n.used / n.gpus < spec.utilisation_threshold and pods_fit_elsewhere(n)]
    if not under:
        return None
    return min(under, key=lambda n: (n.pods, -n.free, n.nid)), True
