"""Cross-layer consistency checks, run on the objects the layers would emit, before any resource is created.

The spec validators check each layer's inputs; these check that the *outputs* fit together: what the serving
layer asks of the scheduler and the nodes is what the queue tree and the NodePools can give.
"""

from __future__ import annotations

from typing import Any

from gpuscale import labels
from gpuscale.manifests import karpenter, vllm
from gpuscale.problems import Problem
from gpuscale.sizing import PlatformSizing, queue_gpu_budget
from gpuscale.spec.platform import PlatformSpec


def _tolerates(tolerations: list[dict[str, Any]], taint: dict[str, str]) -> bool:
    for t in tolerations:
        if t.get("key") != taint["key"] or t.get("effect", taint["effect"]) != taint["effect"]:
            continue
        if t.get("operator") == "Exists" or t.get("value") == taint.get("value"):
            return True
    return False


def _pod_specs(body: dict[str, Any]) -> list[dict[str, Any]]:
    if body["kind"] == "Deployment":
        return [body["spec"]["template"]["spec"]]
    tmpl = body["spec"]["leaderWorkerTemplate"]
    return [t["spec"] for t in (tmpl.get("leaderTemplate"), tmpl["workerTemplate"]) if t]


def _gpus(pod: dict[str, Any]) -> int:
    return sum(int(c.get("resources", {}).get("limits", {}).get(labels.GPU_RESOURCE, 0)) for c in pod["containers"])


def check_platform(spec: PlatformSpec, sizing: PlatformSizing) -> list[Problem]:
    """Every disagreement between layers, with the numbers and the YAML path to change; [] when they fit."""
    problems: list[Problem] = []
    leaves = set(spec.leaf_queue_names())
    for i, model in enumerate(spec.models):
        at = f"models[{i}]"
        ms = sizing.model(model.name)
        pool = spec.topology.pool(model.node_pool)
        taint = karpenter.gpu_taint()
        pool_labels = karpenter.gpu_node_labels(pool)
        budget = queue_gpu_budget(spec, model.queue)
        args = vllm.ServingSettings.from_platform(spec, sizing, model.name)
        for role in model.serving.roles:
            where = f"{model.name}/{role}"
            rs = ms.role(role)
            gpus = rs.max_replicas * ms.shape.gpus
            max_at = f"{at}.autoscaling.{role}.max_replicas"
            kind = "gpu_quota (non-preemptible: runs in quota only)" if budget.kind == "gpu_quota" else "gpu_limit"
            if gpus > budget.gpus:
                problems.append(Problem(max_at,
                    f"{where}: max_replicas {rs.max_replicas} x {ms.shape.gpus} GPUs = {gpus} GPUs exceeds queue "
                    f"{budget.queue} {kind} {budget.gpus:g}; replicas above {int(budget.gpus // ms.shape.gpus)} would "
                    "stay Pending"
                ))
            if gpus > pool.gpu_limit:
                problems.append(Problem(max_at,
                    f"{where}: max_replicas {rs.max_replicas} x {ms.shape.gpus} GPUs = {gpus} GPUs exceeds node pool "
                    f"{pool.name} gpu_limit {pool.gpu_limit}; Karpenter stops launching at the limit"
                ))
            body = vllm.workload_body(args, role)
            for pod in _pod_specs(body):
                if not _tolerates(pod.get("tolerations", []), taint):
                    problems.append(Problem(f"{at}.node_pool", f"{where}: pods do not tolerate node pool {pool.name}'s taint {taint['key']}={taint['value']}:{taint['effect']}"))
                selector = pod.get("nodeSelector", {})
                mismatched = {k: v for k, v in selector.items() if pool_labels.get(k, v) != v or k not in pool_labels}
                if mismatched:
                    problems.append(Problem(
                        f"{at}.node_pool", f"{where}: pod nodeSelector {mismatched} matches no label of node pool {pool.name} ({pool_labels})",
                    ))
                per_pod = _gpus(pod)
                biggest = max(it.gpus_per_node for it in pool.instances)
                if per_pod > biggest:
                    problems.append(Problem(f"{at}.node_pool",
                        f"{where}: a pod requests {per_pod} GPUs but the largest instance type of node pool {pool.name} "
                        f"has {biggest}; the pod can never be scheduled"
                    ))
                if pod.get("schedulerName") != labels.KAI_SCHEDULER_NAME:
                    problems.append(Problem(at, f"{where}: pods are not scheduled by KAI (schedulerName {pod.get('schedulerName')!r})"))
            queue_label = body["spec"]["template"]["metadata"]["labels"].get(labels.KAI_QUEUE_LABEL) if body["kind"] == "Deployment" \
                else body["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"].get(labels.KAI_QUEUE_LABEL)
            if queue_label not in leaves:
                problems.append(Problem(f"{at}.queue", f"{where}: pods carry queue {queue_label!r}, which is not a leaf queue ({sorted(leaves)})"))
            if ms.shape.pods > 1:
                # a gang spans nodes of one zone (required placement); the pool must be able to hold it whole
                per_node = max(it.gpus_per_node for it in pool.instances)
                nodes_possible = pool.gpu_limit // per_node
                if ms.shape.nodes > nodes_possible:
                    problems.append(Problem(f"{at}.node_pool",
                        f"{where}: one replica spans {ms.shape.nodes} nodes but node pool {pool.name} may hold only "
                        f"{nodes_possible} ({pool.gpu_limit} GPUs / {per_node} per node)"
                    ))
                size = body["spec"]["leaderWorkerTemplate"]["size"] if body["kind"] == "LeaderWorkerSet" else 1
                if size != ms.shape.pods:
                    problems.append(Problem(at, f"{where}: gang size {size} differs from the {ms.shape.pods} pods of one replica"))
    return problems
