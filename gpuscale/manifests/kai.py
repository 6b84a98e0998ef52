"""Pure builders for KAI Scheduler (v0.17.0): Queue tree, Topology, Helm values, and the PodGroup KAI will create.

Schemas: ``scheduling.run.ai/v2`` Queue, ``kai.scheduler/v1alpha1`` Topology, ``scheduling.run.ai/v2alpha2`` PodGroup
(``../shared/crds/kai-scheduler/``). Facts: ``research/upstream-facts.md`` section 2.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpuscale import labels
from gpuscale.manifests.kai_wiring import TOPOLOGY_NAME, kai_pod_wiring, topology_name
from gpuscale.sizing import ReplicaShape
from gpuscale.spec.model import ModelDeployment, Role
from gpuscale.spec.platform import PlatformSpec
from gpuscale.spec.teams import UNLIMITED, QueueSpec
from gpuscale.spec.topology import TopologyLevel

KAI_NAMESPACE = "kai-scheduler"
"""Namespace of the KAI release (upstream's install command); workloads must never run in it."""
QUEUE_API_VERSION = "scheduling.run.ai/v2"
TOPOLOGY_API_VERSION = "kai.scheduler/v1alpha1"
PODGROUP_API_VERSION = "scheduling.run.ai/v2alpha2"
MILLICORES_PER_CORE = 1000
MB_PER_GIB = 1024**3 / 10**6
"""KAI counts queue memory in MB (10^6 bytes); the spec speaks GiB."""
QUEUE_WORKLOAD_CLASS_LABEL = "gpuscale.io/workload-class"
"""Queue label: whether the queue's workloads are ``preemptible`` or ``non-preemptible`` (a Queue has no such field)."""
LWS_LEADER_SUBGROUP = "leader"
LWS_WORKERS_SUBGROUP = "workers"


def _num(value: float) -> float | int:
    """Whole numbers as ints, so manifests read ``quota: 48`` rather than ``48.0``."""
    return int(value) if float(value).is_integer() else value


def _share(quota: float | None, limit: float | None, weight: float, scale: float = 1.0) -> dict[str, float | int]:
    """One ``resources.<r>`` entry; None means unlimited (-1), always written out because KAI's unset means 0."""
    return {
        "quota": _num(round(quota * scale, 3)) if quota is not None else _num(UNLIMITED),
        "limit": _num(round(limit * scale, 3)) if limit is not None else _num(UNLIMITED),
        "overQuotaWeight": _num(weight),
    }


def queue_body(queue: QueueSpec, parent: QueueSpec | None) -> dict[str, Any]:
    """The ``Queue`` of one node of the team tree."""
    spec: dict[str, Any] = {"displayName": queue.display_name or queue.name}
    if parent is not None:
        spec["parentQueue"] = parent.name
    spec["priority"] = queue.priority
    spec["resources"] = {
        "gpu": _share(queue.gpu_quota, None if queue.gpu_limit == UNLIMITED else queue.gpu_limit, queue.over_quota_weight),
        "cpu": _share(queue.cpu_quota_cores, queue.cpu_limit_cores, queue.over_quota_weight, MILLICORES_PER_CORE),
        "memory": _share(queue.memory_quota_gib, queue.memory_limit_gib, queue.over_quota_weight, MB_PER_GIB),
    }
    return {
        "apiVersion": QUEUE_API_VERSION,
        "kind": "Queue",
        "metadata": {
            "name": queue.name,
            "labels": {
                labels.MANAGED_BY_LABEL: labels.MANAGED_BY,
                QUEUE_WORKLOAD_CLASS_LABEL: "preemptible" if queue.preemptible else "non-preemptible",
            },
        },
        "spec": spec,
    }


def queue_bodies(teams: Sequence[QueueSpec]) -> list[dict[str, Any]]:
    """One ``Queue`` per node of the team tree (``spec.teams``), parents before children (KAI's webhook needs the
    parent to exist)."""
    return [queue_body(q, parent) for top in teams for q, parent in top.walk()]


def topology_body(levels: Sequence[TopologyLevel], name: str = TOPOLOGY_NAME) -> dict[str, Any]:
    """A ``Topology``: the levels, coarsest first, named for its level set (``kai_wiring.topology_name``; ``gpuscale``
    holds every level of ``spec.topology.levels``)."""
    body_levels: list[dict[str, str]] = []
    for lv in levels:
        level = {"nodeLabel": lv.node_label}
        if lv.alias:
            level["alias"] = lv.alias
        body_levels.append(level)
    return {
        "apiVersion": TOPOLOGY_API_VERSION,
        "kind": "Topology",
        "metadata": {"name": name, "labels": {labels.MANAGED_BY_LABEL: labels.MANAGED_BY}},
        "spec": {"levels": body_levels},
    }


def topology_bodies(spec: PlatformSpec) -> list[dict[str, Any]]:
    """One ``Topology`` per distinct level set among the GPU pools (``gpuscale`` first when a pool carries every level):
    a pool's nodes must carry every level of the Topology its workloads name (``TopologySpec.pool_levels``)."""
    bodies = {
        body["metadata"]["name"]: body
        for body in (topology_body(spec.topology.pool_levels(p.name), topology_name(spec, p.name)) for p in spec.topology.gpu_pools)
    }
    return [bodies[name] for name in sorted(bodies, key=lambda n: (n != TOPOLOGY_NAME, n))]


def kai_chart_values(*, prometheus_url: str | None) -> dict[str, Any]:
    """Helm values of the pinned KAI chart: only what differs from upstream's defaults, plus what we rely on.

    ``prometheus_url``: a Prometheus run by prometheus-operator (KAI then creates ServiceMonitors for its components);
    ``None`` leaves KAI's metrics unwired.
    """
    values: dict[str, Any] = {
        # node-scale-adjuster: pending fractional-GPU demand becomes pods Karpenter can see and provision for
        "global": {"clusterAutoscaling": True},
        # fill nodes before opening new ones, so idle GPU nodes empty out and WhenEmpty consolidation can remove them
        "scheduler": {"placementStrategy": "binpack"},
        "podgrouper": {"queueLabelKey": labels.KAI_QUEUE_LABEL},
        # train (50), build-preemptible (75), build (100), inference (125): the wiring uses inference and train
        "defaultPriorityClasses": {"enabled": True},
        # the QueueTree component creates every queue; an unlimited default queue would let unlabelled pods bypass quotas
        "defaultQueue": {"createDefaultQueue": False},
        "prometheus": {"enabled": prometheus_url is not None},
    }
    if prometheus_url is not None:
        # external Prometheus: KAI creates ServiceMonitors for its components instead of deploying its own Prometheus
        values["prometheus"]["externalPrometheusUrl"] = prometheus_url
    return values


def kai_prometheus_url(spec: PlatformSpec) -> str | None:
    """The Prometheus KAI reports to: the platform's, when gpuscale installs prometheus-operator with it."""
    obs = spec.observability
    return obs.prometheus_url if obs.install_prometheus_stack else None


def go_duration(seconds: int) -> str:
    """``time.Duration.String()`` of whole seconds (``1m30s``, ``1h0m0s``): how a ``metav1.Duration`` such as
    ``PodGroup.spec.preemptionDelay`` reads back from the API server."""
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


def expected_podgroup(
    spec: PlatformSpec, model: ModelDeployment, role: Role, shape: ReplicaShape, *,
    workload_name: str | None = None, group_index: int = 0,
) -> dict[str, Any]:
    """The PodGroup KAI's podgrouper creates for one replica of ``model``'s ``role``; gpuscale never emits it.

    Multi-pod replica (LeaderWorkerSet): one PodGroup per LWS group, minMember = pods, subgroups ``leader`` (1) and
    ``workers`` (pods - 1). Single-pod replica (Deployment): one PodGroup per pod, minMember 1. Upstream names carry
    the owner's UID (``pg-<lws>-<uid>-group-<i>``, ``pg-<pod>-<uid>``); this one leaves the UID out.
    """
    wiring = kai_pod_wiring(spec, model, role, shape)
    workload = workload_name or f"{model.name}-{role}"
    name = f"pg-{workload}-group-{group_index}" if shape.multi_node else f"pg-{workload}-pod"
    pg_spec: dict[str, Any] = {
        "minMember": wiring.gang_min_member if shape.multi_node else 1,
        "queue": wiring.queue,
        "priorityClassName": wiring.priority_class_name,
        "preemptibility": wiring.preemptibility,
        # the podgrouper parses the workload's kai.scheduler/preemption-delay into the spec (default_grouper.go)
        "preemptionDelay": go_duration(wiring.preemption_delay_s),
    }
    if wiring.topology_required_level or wiring.topology_preferred_level:
        constraint = {"topology": wiring.topology or TOPOLOGY_NAME}
        if wiring.topology_required_level:
            constraint["requiredTopologyLevel"] = wiring.topology_required_level
        if wiring.topology_preferred_level:
            constraint["preferredTopologyLevel"] = wiring.topology_preferred_level
        pg_spec["topologyConstraint"] = constraint
    if shape.multi_node:
        pg_spec["subGroups"] = [
            {"name": LWS_LEADER_SUBGROUP, "minMember": 1},
            {"name": LWS_WORKERS_SUBGROUP, "minMember": shape.pods - 1},
        ]
    return {
        "apiVersion": PODGROUP_API_VERSION,
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": model.serving.namespace,
            # the podgrouper copies the owner's labels and annotations
            "labels": {**wiring.workload_labels, labels.MODEL_LABEL: model.name, labels.ROLE_LABEL: role},
            "annotations": dict(wiring.workload_annotations),
        },
        "spec": pg_spec,
    }
