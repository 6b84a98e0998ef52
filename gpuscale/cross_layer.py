"""Cross-layer consistency checks, run on the objects the layers would emit, before any resource is created.

The spec validators check each layer's inputs; these check that the *outputs* fit together: what the serving
layer asks of the scheduler and the nodes is what the queue tree and the NodePools can give.
"""

from __future__ import annotations

from typing import Any

from gpuscale import labels
from gpuscale.manifests import karpenter, vllm
from gpuscale.problems import Problem
from gpuscale.sizing import GpuBound, PlatformSizing, RoleKey, bound_usage, gpu_bounds
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


def _ceilings(spec: PlatformSpec, sizing: PlatformSizing) -> list[Problem]:
    """Replica ceilings against every bound they share (``sizing.gpu_bounds``, the function sizing derives them with):
    the sum over every role and model of a leaf queue, of each ancestor and of each pool must fit its quota or limit."""
    problems: list[Problem] = []
    gpus_of: dict[RoleKey, int] = {}
    terms: dict[RoleKey, str] = {}
    index = {m.name: i for i, m in enumerate(spec.models)}
    for ms in sizing.models:
        for r in ms.roles:
            gpus_of[(ms.model, r.role)] = r.max_replicas * ms.shape.gpus
            terms[(ms.model, r.role)] = f"{ms.model}/{r.role} {r.max_replicas} x {ms.shape.gpus}"
    for bound in gpu_bounds(spec):
        used = bound_usage(bound, gpus_of)
        if used <= bound.gpus:
            continue
        explicit = [k for k in bound.roles if spec.models[index[k[0]]].autoscaling.role(k[1]).max_replicas is not None]
        key = max(explicit, key=lambda k: gpus_of[k]) if explicit else bound.roles[0]  # the largest explicit ceiling
        problems.append(Problem(
            f"models[{index[key[0]]}].autoscaling.{key[1]}.max_replicas" if explicit else _bound_path(spec, bound),
            f"max_replicas {' + '.join(terms[k] for k in bound.roles)} = {used} GPUs exceed {bound.label}; "
            + ("replicas above it stay Pending while Karpenter buys nodes for them"
               if bound.kind != "pool_gpu_limit" else "Karpenter stops launching at the limit")
            + ". Lower max_replicas (or leave them unset: sizing shares the bound by peak demand), or raise the bound",
        ))
    return problems


def _bound_path(spec: PlatformSpec, bound: GpuBound) -> str:
    if bound.kind == "pool_gpu_limit":
        return f"topology.gpu_pools[{[p.name for p in spec.topology.gpu_pools].index(bound.name)}].gpu_limit"
    path, siblings = "", spec.teams
    for q in spec.queue_chain(bound.name):
        i = next(j for j, s in enumerate(siblings) if s.name == q.name)
        path, siblings = (f"teams[{i}]" if not path else f"{path}.children[{i}]"), q.children
    return f"{path}.{bound.kind}"


def check_platform(spec: PlatformSpec, sizing: PlatformSizing) -> list[Problem]:
    """Every disagreement between layers, with the numbers and the YAML path to change; [] when they fit."""
    problems: list[Problem] = _ceilings(spec, sizing)
    leaves = set(spec.leaf_queue_names())
    for i, model in enumerate(spec.models):
        at = f"models[{i}]"
        ms = sizing.model(model.name)
        pool = spec.topology.pool(model.node_pool)
        taint = karpenter.gpu_taint()
        pool_labels = karpenter.gpu_node_labels(pool)
        args = vllm.ServingSettings.from_platform(spec, sizing, model.name)
        for role in model.serving.roles:
            where = f"{model.name}/{role}"
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
