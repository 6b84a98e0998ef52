"""The platform's alerts: a GPU pool at its limit, a queue at its bound with pods pending, a GPU node draining past
its drift window, and GPU health (XID, uncorrectable ECC).

The pool and queue ceilings are ``sizing.gpu_bounds`` (the one function behind ``max_replicas`` and the cross-layer
check), so an alert fires at exactly the bound sizing derived the replica ceilings from.
"""

from __future__ import annotations

import math

from gpuscale.alerts import exporter_metrics as m
from gpuscale.alerts.rule import AlertRule, camel, doctor_runbook, plan_runbook
from gpuscale.manifests import autoscaling
from gpuscale.manifests.vllm import workload_name
from gpuscale.sizing import GpuBound, PlatformSizing, gpu_bounds
from gpuscale.spec.base import duration_seconds
from gpuscale.spec.platform import PlatformSpec


def _slowest_node_s(sizing: PlatformSizing, bound: GpuBound) -> float:
    """The slowest node launch among the bound's models: how long a pod may wait for a node before a limit, not the
    launch, is what holds it."""
    return max(sizing.model(model).cold_start.node_s for model, _ in bound.roles)


def pool_gpu_usage(pool: str) -> str:
    """The GPUs a NodePool's nodes hold, as Karpenter counts them against the pool's ``nvidia.com/gpu`` limit."""
    return f'{m.KARPENTER_NODEPOOL_USAGE}{{nodepool="{pool}",resource_type="{m.KARPENTER_GPU_RESOURCE_TYPE}"}}'


def pool_gpu_nodes(pool: str) -> str:
    """The NodePool's GPU nodes (one ``karpenter_nodes_allocatable`` series per node and resource)."""
    return (f'count(max by (node_name) ({m.KARPENTER_NODE_ALLOCATABLE}{{nodepool="{pool}",'
            f'resource_type="{m.KARPENTER_GPU_RESOURCE_TYPE}"}}))')


def pool_full_gpus(spec: PlatformSpec, bound: GpuBound) -> tuple[float, int]:
    """GPUs above which Karpenter launches no further node (the limit less the smallest node's GPUs), and that node's."""
    pool = next(p for p in spec.topology.gpu_pools if p.name == bound.name)
    smallest = min(it.gpus_per_node for it in pool.instances)
    return bound.gpus - smallest, smallest


def queue_allocated_gpus(queue: str) -> str:
    """The GPUs KAI has allocated to a queue's workloads (the queue controller's gauge)."""
    return f'{m.KAI_QUEUE_ALLOCATED_GPUS}{{{m.KAI_QUEUE_LABEL}="{queue}"}}'


def pool_at_limit(spec: PlatformSpec, sizing: PlatformSizing, bound: GpuBound) -> AlertRule:
    pool = next(p for p in spec.topology.gpu_pools if p.name == bound.name)
    # Karpenter launches a node only while usage + the node's GPUs stays within the limit
    full, smallest = pool_full_gpus(spec, bound)
    wait = _slowest_node_s(sizing, bound)
    usage = pool_gpu_usage(pool.name)
    return AlertRule(
        alert=f"GpuPool{camel(pool.name)}AtGpuLimit",
        expr=f"{usage} > {full:.6g}",
        for_s=math.ceil(wait), severity="warning", labels={"nodepool": pool.name},
        summary=f"GPU pool {pool.name}: no further node fits its gpu_limit ({pool.gpu_limit:g} GPUs)",
        description=(f"The NodePool holds more than {full:g} GPUs (gpu_limit {pool.gpu_limit:g} less its smallest node's "
                     f"{smallest}) for {wait:.0f} s (its slowest node launch): Karpenter launches no node for a "
                     "Pending replica."),
        runbook=doctor_runbook("nodes"),
        thresholds={"topology.gpu_pools.gpu_limit": pool.gpu_limit, "instance.gpus_per_node": smallest,
                    "cold_start.node_s": wait},
    )


def queue_at_bound(spec: PlatformSpec, sizing: PlatformSizing, bound: GpuBound) -> AlertRule:
    """The queue's GPUs at its quota (non-preemptible roles below it) or limit, while a pod of a role below it waits."""
    pods_by_ns: dict[str, list[str]] = {}
    for model_name, role in bound.roles:
        ns = next(x for x in spec.models if x.name == model_name).serving.namespace
        pods_by_ns.setdefault(ns, []).append(workload_name(model_name, role))
    pending = " or ".join(
        f'{m.KSM_POD_PHASE}{{namespace="{ns}",phase="Pending",pod=~"({"|".join(sorted(w))})-.+"}} == 1'
        for ns, w in sorted(pods_by_ns.items())
    )
    wait = _slowest_node_s(sizing, bound)
    what = "gpu_quota" if bound.kind == "gpu_quota" else "gpu_limit"
    allocated = queue_allocated_gpus(bound.name)
    return AlertRule(
        alert=f"Queue{camel(bound.name)}At{camel(what)}WithPendingPods",
        expr=f"{allocated} >= {bound.gpus:.6g} and on() (count({pending}) > 0)",
        for_s=math.ceil(wait), severity="warning", labels={"queue": bound.name},
        summary=f"KAI queue {bound.name} is at its {what} ({bound.gpus:g} GPUs) while its pods are Pending",
        description=(f"{bound.label}; a pod of {', '.join(f'{a}/{b}' for a, b in bound.roles)} has been Pending for "
                     f"{wait:.0f} s (the slowest node launch): KAI, not Karpenter, holds it."),
        runbook=doctor_runbook("scheduling"),
        thresholds={f"teams.{what}": bound.gpus, "cold_start.node_s": wait},
    )


def drain_past_window(spec: PlatformSpec) -> list[AlertRule]:
    """A node of a GPU pool tainted ``karpenter.sh/disrupted`` longer than the pool's drift window: a PDB (the roles'
    ready floors) keeps its pods, and the replacement waits for the next window's freeze to lift."""
    rules = []
    for pool in spec.topology.gpu_pools:
        if pool.drift_window is None:
            continue
        window_s = duration_seconds(pool.drift_window.duration)
        gpu_nodes = (f'label_replace(max by (node_name) ({m.KARPENTER_NODE_ALLOCATABLE}{{nodepool="{pool.name}",'
                     f'resource_type="{m.KARPENTER_GPU_RESOURCE_TYPE}"}}), "node", "$1", "node_name", "(.+)")')
        rules.append(AlertRule(
            alert=f"GpuPool{camel(pool.name)}NodeDrainingPastDriftWindow",
            expr=f'max by (node) ({m.KSM_NODE_TAINT}{{key="{m.KARPENTER_DISRUPTED_TAINT}"}}) and on(node) {gpu_nodes}',
            for_s=math.ceil(window_s), severity="warning", labels={"nodepool": pool.name},
            summary=f"GPU pool {pool.name}: a node has been draining longer than the drift window ({pool.drift_window.duration})",
            description=("Karpenter tainted the node for disruption and its pods have not moved: a role at its "
                         "PodDisruptionBudget floor has no spare replica to let one go."),
            runbook=plan_runbook("nodes", "Scale the role up by one (or wait for the next window); kubectl get pdb -A"),
            thresholds={"topology.gpu_pools.drift_window.duration_s": window_s},
        ))
    return rules


ECC_WINDOW_S = 600
"""Window over which a new uncorrectable ECC error keeps the alert firing: long enough for Alertmanager to group and
notify, short enough to clear once the node is replaced."""


def gpu_health() -> list[AlertRule]:
    """A GPU error is an alert, never an autoscaling input (``gpuscale.manifests.dcgm``)."""
    return [
        AlertRule(
            alert="GpuXidError",
            expr=f"{m.DCGM_XID} > 0",
            for_s=0, severity="critical",
            summary="A GPU raised an XID error",
            description=("DCGM_FI_DEV_XID_ERRORS holds the GPU's last XID (its labels name the node, the GPU and the pod "
                         "on it). Pods stay Running while they fail requests: cordon and drain the node."),
            runbook=plan_runbook("nodes", "kubectl cordon <Hostname>; kubectl drain it; Karpenter replaces the node"),
            thresholds={},
        ),
        AlertRule(
            alert="GpuUncorrectableEccError",
            expr=f"increase({m.DCGM_ECC_UNCORRECTABLE}[{ECC_WINDOW_S}s]) > 0",
            for_s=0, severity="critical",
            summary="A GPU counted an uncorrectable (double-bit) ECC error",
            description="The GPU's memory returned corrupted data; results of its pods are suspect: drain the node.",
            runbook=plan_runbook("nodes", "kubectl cordon <Hostname>; kubectl drain it; Karpenter replaces the node"),
            thresholds={},
        ),
    ]


def custom_metrics_api(spec: PlatformSpec) -> list[AlertRule]:
    """The API server's aggregator marks prometheus-adapter's APIService unavailable: every HPA of backend ``hpa``
    fails to read its metrics at once (each also raises its own ``AutoscalerInputFailing``)."""
    if not autoscaling.needs_prometheus_adapter(spec):
        return []
    failures = autoscaling.FALLBACK_FAILURE_THRESHOLD
    return [AlertRule(
        alert="CustomMetricsApiUnavailable",
        expr=f'max({m.AGGREGATOR_UNAVAILABLE}{{name="{m.CUSTOM_METRICS_APISERVICE}"}}) == 1',
        for_s=failures * m.HPA_SYNC_PERIOD_S, severity="critical", labels={"apiservice": m.CUSTOM_METRICS_APISERVICE},
        summary=f"The custom metrics API ({m.CUSTOM_METRICS_APISERVICE}, prometheus-adapter) is unavailable",
        description=(f"For {failures * m.HPA_SYNC_PERIOD_S} s ({failures} HPA syncs) the API server has marked the "
                     "APIService unavailable: no HPA of backend hpa can read its metrics and each holds its count."),
        runbook=plan_runbook("replicas", f"kubectl get apiservice {m.CUSTOM_METRICS_APISERVICE} -o yaml; the "
                             "prometheus-adapter pods' logs"),
        thresholds={"autoscaling.FALLBACK_FAILURE_THRESHOLD": failures,
                    "exporter_metrics.HPA_SYNC_PERIOD_S": m.HPA_SYNC_PERIOD_S},
    )]


def platform_rules(spec: PlatformSpec, sizing: PlatformSizing) -> list[AlertRule]:
    bounds = gpu_bounds(spec)
    return [
        *custom_metrics_api(spec),
        *(pool_at_limit(spec, sizing, b) for b in bounds if b.kind == "pool_gpu_limit"),
        *(queue_at_bound(spec, sizing, b) for b in bounds if b.kind != "pool_gpu_limit"),
        *drain_past_window(spec),
        *gpu_health(),
    ]
