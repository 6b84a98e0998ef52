"""Cross-layer consistency checks, run on the objects the layers would emit, before any resource is created.

The spec validators check each layer's inputs; these check that the *outputs* fit together: what the serving
layer asks of the scheduler and the nodes is what the queue tree and the NodePools can give.
"""

from __future__ import annotations

import math
from typing import Any

from gpuscale import labels
from gpuscale.manifests import karpenter, vllm
from gpuscale.sizing import PlatformSizing
from gpuscale.spec.platform import PlatformSpec
from gpuscale.spec.teams import UNLIMITED


class CrossLayerError(ValueError):
    """The layers disagree; one message per problem, each with the numbers."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("cross-layer checks failed:\n" + "\n".join(f"  {p}" for p in problems))


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


def check_platform(spec: PlatformSpec, sizing: PlatformSizing) -> list[str]:
    """Every disagreement between layers, as sentences with numbers; [] when they fit."""
    problems: list[str] = []
    leaves = set(spec.leaf_queue_names())
    for model in spec.models:
        ms = sizing.model(model.name)
        pool = spec.topology.pool(model.node_pool)
        taint = karpenter.gpu_taint()
        pool_labels = karpenter.gpu_node_labels(pool)
        chain = spec.queue_chain(model.queue)
        leaf = chain[-1]
        args = vllm.VllmServiceArgs.from_platform(spec, sizing, model.name)
        for role in model.serving.roles:
            where = f"{model.name}/{role}"
            rs = ms.role(role)
            gpus = rs.max_replicas * ms.shape.gpus
            # quota for non-preemptible (in-quota only) workloads, else the tightest limit on the path
            budget = leaf.gpu_quota if not leaf.preemptible else min(
                (q.gpu_limit for q in chain if q.gpu_limit != UNLIMITED), default=math.inf)
            kind = "gpu_quota (non-preemptible: runs in quota only)" if not leaf.preemptible else "gpu_limit"
            if gpus > budget:
                problems.append(
                    f"{where}: max_replicas {rs.max_replicas} x {ms.shape.gpus} GPUs = {gpus} GPUs exceeds queue "
                    f"{leaf.name} {kind} {budget:g}; replicas above {int(budget // ms.shape.gpus)} would stay Pending"
                )
            if gpus > pool.gpu_limit:
                problems.append(
                    f"{where}: max_replicas {rs.max_replicas} x {ms.shape.gpus} GPUs = {gpus} GPUs exceeds node pool "
                    f"{pool.name} gpu_limit {pool.gpu_limit}; Karpenter stops launching at the limit"
                )
            body = vllm.workload_body(args, role)
            for pod in _pod_specs(body):
                if not _tolerates(pod.get("tolerations", []), taint):
                    problems.append(f"{where}: pods do not tolerate node pool {pool.name}'s taint {taint['key']}={taint['value']}:{taint['effect']}")
                selector = pod.get("nodeSelector", {})
                mismatched = {k: v for k, v in selector.items() if pool_labels.get(k, v) != v or k not in pool_labels}
                if mismatched:
                    problems.append(f"{where}: pod nodeSelector {mismatched} matches no label of node pool {pool.name} ({pool_labels})")
                per_pod = _gpus(pod)
                biggest = max(it.gpus_per_node for it in pool.instances)
                if per_pod > biggest:
                    problems.append(
                        f"{where}: a pod requests {per_pod} GPUs but the largest instance type of node pool {pool.name} "
                        f"has {biggest}; the pod can never be scheduled"
                    )
                if pod.get("schedulerName") != labels.KAI_SCHEDULER_NAME:
                    problems.append(f"{where}: pods are not scheduled by KAI (schedulerName {pod.get('schedulerName')!r})")
            queue_label = body["spec"]["template"]["metadata"]["labels"].get(labels.KAI_QUEUE_LABEL) if body["kind"] == "Deployment" \
                else body["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"].get(labels.KAI_QUEUE_LABEL)
            if queue_label not in leaves:
                problems.append(f"{where}: pods carry queue {queue_label!r}, which is not a leaf queue ({sorted(leaves)})")
            if ms.shape.pods > 1:
                # a gang spans nodes of one zone (required placement); the pool must be able to hold it whole
                per_node = max(it.gpus_per_node for it in pool.instances)
                nodes_possible = pool.gpu_limit // per_node
                if ms.shape.nodes > nodes_possible:
                    problems.append(
                        f"{where}: one replica spans {ms.shape.nodes} nodes but node pool {pool.name} may hold only "
                        f"{nodes_possible} ({pool.gpu_limit} GPUs / {per_node} per node)"
                    )
                size = body["spec"]["leaderWorkerTemplate"]["size"] if body["kind"] == "LeaderWorkerSet" else 1
                if size != ms.shape.pods:
                    problems.append(f"{where}: gang size {size} differs from the {ms.shape.pods} pods of one replica")
    return problems
