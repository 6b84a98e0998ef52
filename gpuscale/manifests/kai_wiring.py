"""The fields that route one model role to KAI: scheduler, leaf queue, priority, preemptibility, gang, topology.

The serving layer calls ``kai_pod_wiring`` once per role and merges the result into its workload:

- on the Deployment / LeaderWorkerSet object: ``workload_labels`` and ``workload_annotations``;
- on every pod template (LWS: leader and worker): ``scheduler_name``, ``priority_class_name``, ``pod_labels``,
  ``pod_annotations`` and ``affinity``;
- on a LeaderWorkerSet: ``spec.startupPolicy = lws_startup_policy`` (or leave it unset: it is LWS's default).

How KAI v0.17.0 reads them (podgrouper plugins ``defaultgrouper``, ``deployment``, ``leaderworkerset``):

- **queue**: the ``kai.scheduler/queue`` label of the top owner (the Deployment or LWS), else of the pod.
- **priority**: the pod's ``spec.priorityClassName`` (``inference`` 125 = non-preemptible, ``train`` 50).
- **preemptibility**: the ``kai.scheduler/preemptibility`` label (owner or pod); set explicitly so the PodGroup
  does not depend on priority-class defaults.
- **topology**: the PodGroup's ``topologyConstraint`` comes from the ``kai.scheduler/topology*`` annotations of the
  TOP OWNER only; annotations on a pod template are not read for it. They are mirrored on the pod template, where
  they are harmless and visible in ``kubectl describe pod``.
- **preemption delay**: the ``kai.scheduler/preemption-delay`` annotation (a Go duration), owners first, then the pod
  (``defaultgrouper/default_grouper.go`` ``calcPodGroupPreemptionDelay``, which the deployment and leaderworkerset
  groupers call). Every workload carries it: any pending gang may trigger an eviction (an inference pod preempts
  ``train`` pods of its queue; a queue below its quota reclaims GPUs other queues borrowed), and each should first give
  Karpenter the sized node time (``sizing.preemption_delay_s``) to bring a new node. It never slows placement into free
  capacity, and it re-arms after the PodGroup is itself evicted. A model with ``headroom.mode: placeholder-pods``
  carries 0 instead (``headroom.serving_preemption_delay_s``): its placeholders must give their GPUs back at once.
- **gang**: a Deployment gets one PodGroup per pod (minMember 1: a single-pod replica is never split). A LeaderWorkerSet
  gets one PodGroup per group (= one replica), ``<base>-group-<i>``, with minMember = ``leaderWorkerTemplate.size``
  under ``startupPolicy: LeaderCreated``. ``LeaderReady`` would hand the leader to KAI alone first (minMember 1) and
  hold its GPUs while the workers wait: exactly the partial placement gang scheduling exists to prevent.

Topology: a workload names the KAI Topology of its pool's level set (``topology_name``): the spec's levels minus the AWS
network layers the pool's instance types do not carry. KAI v0.17 leaves a node that lacks any level of a Topology out of
its tree, so a Topology with ``network-node-layer-3`` would make g5/g6/p5.4xlarge nodes unschedulable for every workload
naming it. Every tensor-parallel group lives inside one pod (sizing keeps TP <= GPUs per node), so inside one node and
one NVLink domain on every catalogue instance type; KAI's required placement at the node level says so. The pods of a
multi-node replica (pipeline stages) must share a zone (required: EFA and NCCL do not cross zones) and should share the
finest network layer (preferred: ``topology.k8s.aws/network-node-layer-*`` exist only on some instance types, and a
required level would make unlabelled nodes ineligible). A matching required pod affinity on the zone, keyed on the LWS
group, lets Karpenter launch all nodes of one pending gang in the same zone. Prefill and decode pods of one model prefer
each other's network layer and zone (NIXL KV transfer).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from gpuscale import labels
from gpuscale.headroom import serving_preemption_delay_s
from gpuscale.sizing import ReplicaShape, preemption_delay_s, replica_cold_start
from gpuscale.spec.base import Spec
from gpuscale.spec.model import ModelDeployment, Role
from gpuscale.spec.platform import PlatformSpec
from gpuscale.spec.topology import network_layer

TOPOLOGY_NAME = "gpuscale"
"""Name of the KAI Topology with all of the spec's levels; a pool whose nodes lack some network layers gets its own
Topology ``gpuscale-<n>-network-layers`` (``topology_name``)."""

Preemptibility = Literal["preemptible", "non-preemptible"]

PD_NETWORK_AFFINITY_WEIGHT = 80
"""Preferred-affinity weight for a prefill/decode peer under the same (finest) network-layer switch."""
PD_ZONE_AFFINITY_WEIGHT = 50
"""Preferred-affinity weight for a prefill/decode peer in the same zone (cross-zone KV transfer is slow and billed)."""


class KaiPodWiring(Spec):
    """What a workload needs so KAI schedules it correctly."""

    scheduler_name: str
    """Pod ``spec.schedulerName``."""
    queue: str
    """Leaf queue the pods are charged to."""
    priority_class_name: str
    """Pod ``spec.priorityClassName``: ``inference`` (non-preemptible) or ``train`` (preemptible)."""
    gang_min_member: int
    """Pods of one replica that must be placed together or not at all (the LWS group size; 1 for a Deployment)."""
    pod_labels: dict[str, str]
    """Labels for the pod template: queue, preemptibility, model and role (the affinity terms select on the last two)."""
    pod_annotations: dict[str, str]
    """Annotations for the pod template: the topology placement and preemption delay, mirrored from
    ``workload_annotations``."""
    workload_labels: dict[str, str]
    """Labels for the Deployment/LeaderWorkerSet object (the podgrouper reads queue and preemptibility from the owner)."""
    affinity: dict[str, Any] | None = None
    """Pod ``spec.affinity``: the gang's zone co-location (multi-pod) and the preferred prefill/decode proximity."""
    workload_annotations: dict[str, str] = Field(default_factory=dict)
    """Annotations for the Deployment/LeaderWorkerSet object: the topology placement and preemption delay KAI copies
    into the PodGroup."""
    preemption_delay_s: int = 0
    """``PodGroup.spec.preemptionDelay`` in seconds: how long a pending replica waits for a new node before it may
    evict other pods (the model's sized node time)."""
    preemptibility: Preemptibility = "non-preemptible"
    """``PodGroup.spec.preemptibility``: non-preemptible workloads run in their queue's quota only."""
    topology_required_level: str | None = None
    """Node label every pod of one replica must share (KAI required placement); None when unconstrained."""
    topology_preferred_level: str | None = None
    """Node label the pods of one replica should share when possible (KAI preferred placement)."""
    topology: str | None = None
    """The KAI Topology the placement names (``kai.scheduler/topology``); None when unconstrained."""
    lws_startup_policy: Literal["LeaderCreated"] | None = None
    """LeaderWorkerSet ``spec.startupPolicy`` that keeps the whole group one gang; None for single-pod replicas."""


def topology_name(spec: PlatformSpec, pool: str) -> str:
    """The KAI Topology of ``pool``'s level set: ``gpuscale`` when its nodes carry every level of the spec, else
    ``gpuscale-<n>-network-layers`` with ``n`` the AWS network layers kept."""
    levels = spec.topology.pool_levels(pool)
    if len(levels) == len(spec.topology.levels):
        return TOPOLOGY_NAME
    kept = sum(1 for lv in levels if network_layer(lv.node_label) is not None)
    return f"{TOPOLOGY_NAME}-{kept}-network-layers"


def placement_levels(spec: PlatformSpec, shape: ReplicaShape, pool: str) -> tuple[str | None, str | None]:
    """(required, preferred) topology levels for the pods of one replica, among the levels ``pool``'s nodes carry."""
    levels = [lv.node_label for lv in spec.topology.pool_levels(pool)]
    if not shape.multi_node:
        # one pod = one node = one NVLink domain for every catalogue type: required at the node level
        return (labels.HOSTNAME_LABEL if labels.HOSTNAME_LABEL in levels else None), None
    required = labels.ZONE_LABEL if labels.ZONE_LABEL in levels else None
    start = levels.index(required) + 1 if required else 0
    finer = [lv for lv in levels[start:] if lv != labels.HOSTNAME_LABEL]
    return required, (finer[-1] if finer else None)


def finest_network_level(spec: PlatformSpec, pool: str) -> str | None:
    """The AWS network-node-layer label closest to the node among the levels ``pool``'s nodes carry, if any."""
    network = [lv.node_label for lv in spec.topology.pool_levels(pool) if network_layer(lv.node_label) is not None]
    return network[-1] if network else None


def _affinity(spec: PlatformSpec, model: ModelDeployment, role: Role, shape: ReplicaShape) -> dict[str, Any] | None:
    pod_affinity: dict[str, Any] = {}
    if shape.multi_node:
        # Karpenter provisions per pod: without this, the nodes of one pending gang may land in different zones
        # and KAI's zone-required gang never fits. matchLabelKeys scopes the term to this LWS group.
        pod_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = [{
            "labelSelector": {"matchLabels": {labels.MODEL_LABEL: model.name, labels.ROLE_LABEL: role}},
            "matchLabelKeys": [labels.LWS_GROUP_KEY_LABEL],
            "topologyKey": labels.ZONE_LABEL,
        }]
    if role in ("prefill", "decode"):
        other = "decode" if role == "prefill" else "prefill"
        peer = {"matchLabels": {labels.MODEL_LABEL: model.name, labels.ROLE_LABEL: other}}
        keys = [(finest_network_level(spec, model.node_pool), PD_NETWORK_AFFINITY_WEIGHT), (labels.ZONE_LABEL, PD_ZONE_AFFINITY_WEIGHT)]
        pod_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": weight, "podAffinityTerm": {"labelSelector": peer, "topologyKey": key}}
            for key, weight in keys if key is not None
        ]
    return {"podAffinity": pod_affinity} if pod_affinity else None


def kai_pod_wiring(spec: PlatformSpec, model: ModelDeployment, role: Role, shape: ReplicaShape) -> KaiPodWiring:
    """KAI scheduling fields of one role of ``model`` whose replicas have ``shape``."""
    leaf = spec.queue_chain(model.queue)[-1]
    preemptibility: Preemptibility = "preemptible" if leaf.preemptible else "non-preemptible"
    owner_labels = {labels.KAI_QUEUE_LABEL: leaf.name, labels.KAI_PREEMPTIBILITY_LABEL: preemptibility}
    required, preferred = placement_levels(spec, shape, model.node_pool)
    topology: dict[str, str] = {}
    if required or preferred:
        topology[labels.KAI_TOPOLOGY_ANNOTATION] = topology_name(spec, model.node_pool)
    if required:
        topology[labels.KAI_TOPOLOGY_REQUIRED_ANNOTATION] = required
    if preferred:
        topology[labels.KAI_TOPOLOGY_PREFERRED_ANNOTATION] = preferred
    # placeholder headroom waives the delay: a placeholder must give its GPUs back at once (gpuscale.headroom)
    delay_s = serving_preemption_delay_s(model.headroom.mode, preemption_delay_s(replica_cold_start(spec, model, shape)))
    annotations = {**topology, labels.KAI_PREEMPTION_DELAY_ANNOTATION: f"{delay_s}s"}  # a Go duration, as KAI parses it
    return KaiPodWiring(
        scheduler_name=labels.KAI_SCHEDULER_NAME,
        queue=leaf.name,
        priority_class_name=labels.KAI_TRAIN_PRIORITY_CLASS if leaf.preemptible else labels.KAI_INFERENCE_PRIORITY_CLASS,
        gang_min_member=shape.pods,
        pod_labels={**owner_labels, labels.MODEL_LABEL: model.name, labels.ROLE_LABEL: role},
        pod_annotations=dict(annotations),
        workload_labels=owner_labels,
        affinity=_affinity(spec, model, role, shape),
        workload_annotations=annotations,
        preemption_delay_s=delay_s,
        preemptibility=preemptibility,
        topology_required_level=required,
        topology_preferred_level=preferred,
        topology=topology.get(labels.KAI_TOPOLOGY_ANNOTATION),
        lws_startup_policy="LeaderCreated" if shape.multi_node else None,
    )
