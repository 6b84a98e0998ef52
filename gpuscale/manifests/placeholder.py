"""A role's spare GPU nodes as low-priority placeholder pods under KAI (``headroom.mode: placeholder-pods``), for a
Karpenter without the CapacityBuffer gate.

Per model a ``PriorityClass`` (value ``headroom.PLACEHOLDER_PRIORITY``, below every class KAI's chart installs;
``preemptionPolicy: Never``) and, per role whose sized headroom pays, a Deployment ``<model>-<role>-placeholder`` of
N x pods-per-replica pods, each the size of one serving pod (its GPU, EFA, CPU and memory requests, node pool selector
and GPU toleration), so Karpenter launches the same nodes for them it would for the role. What KAI v0.17.0 does with
them is in ``gpuscale.headroom``'s docstring; in short:

- they are in the model's own leaf queue and ``preemptible``: KAI's quota check for the non-preemptible serving pods
  counts only non-preemptible allocation, so they never take a serving replica's quota, and the preempt action lets a
  serving pod of the same queue and higher priority evict them;
- the serving pods carry preemption delay 0 (``headroom.serving_preemption_delay_s``), so that eviction is immediate;
  the placeholders carry a one-year delay, so they never evict anyone while pending;
- their container is the pinned vLLM image running ``sleep infinity``: the image is pulled on the spare node before a
  serving pod lands there (a CapacityBuffer's virtual pods pull nothing). ``terminationGracePeriodSeconds: 0``: PID 1
  ``sleep`` ignores SIGTERM, and the GPUs must be free at once for the preemptor.

They carry none of the serving selector labels (``gpuscale.io/model``/``role``), so no Service, PDB, PodMonitor,
autoscaler query or P/D affinity term ever matches them.
"""

from __future__ import annotations

from typing import Any

from gpuscale import headroom as headroom_mod
from gpuscale import labels
from gpuscale.headroom import HeadroomSizing
from gpuscale.manifests import vllm
from gpuscale.manifests.vllm import ServingSettings
from gpuscale.spec.model import Role

HEADROOM_FOR_LABEL = "gpuscale.io/headroom-for"
"""Label of a placeholder pod: the serving workload whose spare nodes it holds (its selector)."""
COMPONENT = "headroom-placeholder"


def deployment_name(model: str, role: Role) -> str:
    return f"{vllm.workload_name(model, role)}-placeholder"


def priority_class_name(namespace: str, model: str) -> str:
    """Cluster-scoped, so named by namespace and model: two models of one name in two namespaces do not share it."""
    return f"gpuscale-placeholder-{namespace}-{model}"


def emits(headroom: HeadroomSizing | None) -> bool:
    """Whether a role's sized headroom is emitted as placeholder pods."""
    return headroom is not None and headroom.mode == "placeholder-pods" and headroom.emitted


def priority_class_body(args: ServingSettings) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": priority_class_name(args.namespace, args.model.name),
                     "labels": vllm.common_labels(args.model.name, COMPONENT)},
        "value": headroom_mod.PLACEHOLDER_PRIORITY,
        "globalDefault": False,
        "preemptionPolicy": "Never",
        "description": f"gpuscale headroom placeholders of {args.model.name}: evicted by its serving pods at once",
    }


def _labels(args: ServingSettings, role: Role) -> dict[str, str]:
    wiring = args.wiring[role]
    return {
        **vllm.common_labels(args.model.name, COMPONENT),
        "app.kubernetes.io/name": "gpuscale-placeholder",
        HEADROOM_FOR_LABEL: vllm.workload_name(args.model.name, role),
        labels.KAI_QUEUE_LABEL: wiring.queue,
        labels.KAI_PREEMPTIBILITY_LABEL: "preemptible",
    }


def _container(args: ServingSettings) -> dict[str, Any]:
    return {
        "name": "placeholder",
        "image": args.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["sleep", "infinity"],
        "resources": vllm.resources(args),
        "securityContext": vllm.container_security_context(efa=args.efa_devices > 0),
    }


def deployment_body(args: ServingSettings, role: Role, headroom: HeadroomSizing) -> dict[str, Any]:
    """The placeholders of ``role``: ``headroom.pods`` pods of one serving pod's size."""
    wiring = args.wiring[role]
    pod_labels = _labels(args, role)
    annotations = {labels.KAI_PREEMPTION_DELAY_ANNOTATION: headroom_mod.PLACEHOLDER_PREEMPTION_DELAY}
    spec: dict[str, Any] = {
        "schedulerName": wiring.scheduler_name,
        "priorityClassName": priority_class_name(args.namespace, args.model.name),
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "nodeSelector": {labels.NODE_POOL_LABEL: args.model.node_pool},
        "tolerations": [vllm.gpu_toleration()],
        "terminationGracePeriodSeconds": 0,
        "containers": [_container(args)],
    }
    selector = {HEADROOM_FOR_LABEL: vllm.workload_name(args.model.name, role), "app.kubernetes.io/component": COMPONENT}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": deployment_name(args.model.name, role), "namespace": args.namespace,
                     "labels": pod_labels, "annotations": dict(annotations)},
        "spec": {
            "replicas": headroom.pods,
            "selector": {"matchLabels": selector},
            "template": {"metadata": {"labels": pod_labels, "annotations": annotations}, "spec": spec},
        },
    }


def placeholder_bodies(args: ServingSettings) -> list[dict[str, Any]]:
    """The model's PriorityClass and one Deployment per role whose headroom is paying placeholder pods; none else."""
    roles = [(r.role, r.headroom) for r in args.sizing.roles if emits(r.headroom)]
    if not roles:
        return []
    return [priority_class_body(args)] + [deployment_body(args, role, h) for role, h in roles if h is not None]
