"""The pod-template fields that route one model role to KAI: scheduler, queue, priority, gang, topology.

The serving layer calls ``kai_pod_wiring`` for each role and merges the result into its workload.
"""

from __future__ import annotations

from typing import Any

from gpuscale import labels
from gpuscale.sizing import ReplicaShape
from gpuscale.spec.base import Spec
from gpuscale.spec.model import ModelDeployment, Role
from gpuscale.spec.platform import PlatformSpec

TOPOLOGY_NAME = "gpuscale"
"""Name of the cluster's KAI Topology object."""


class KaiPodWiring(Spec):
    """What a workload needs so KAI schedules it correctly."""

    scheduler_name: str
    """Pod ``spec.schedulerName``."""
    queue: str
    """Leaf queue the pods are charged to."""
    priority_class_name: str
    """Pod ``spec.priorityClassName``: ``inference`` (non-preemptible) or ``train`` (preemptible)."""
    gang_min_member: int
    """Pods of one replica that must be placed together or not at all."""
    pod_labels: dict[str, str]
    """Labels for the pod template."""
    pod_annotations: dict[str, str]
    """Annotations for the pod template (topology placement)."""
    workload_labels: dict[str, str]
    """Labels for the Deployment/LeaderWorkerSet object (KAI's podgrouper reads the queue from the owner too)."""
    affinity: dict[str, Any] | None = None
    """Preferred pod affinity that keeps a prefill/decode pair close."""


def kai_pod_wiring(spec: PlatformSpec, model: ModelDeployment, role: Role, shape: ReplicaShape) -> KaiPodWiring:
    chain = spec.queue_chain(model.queue)
    leaf = chain[-1]
    queue_labels = {labels.KAI_QUEUE_LABEL: leaf.name}
    annotations = {labels.KAI_TOPOLOGY_ANNOTATION: TOPOLOGY_NAME}
    if shape.multi_node:
        # pipeline stages on different nodes: one zone at least, as close in the network as KAI can find
        annotations[labels.KAI_TOPOLOGY_REQUIRED_ANNOTATION] = labels.ZONE_LABEL
        finer = [lv.node_label for lv in spec.topology.levels if lv.node_label not in (labels.ZONE_LABEL, labels.HOSTNAME_LABEL)]
        if finer:
            annotations[labels.KAI_TOPOLOGY_PREFERRED_ANNOTATION] = finer[-1]
    else:
        # the tensor-parallel group lives in one pod, so one node: one NVLink domain on NVSwitch parts
        annotations[labels.KAI_TOPOLOGY_REQUIRED_ANNOTATION] = labels.HOSTNAME_LABEL
    affinity = None
    if role in ("prefill", "decode"):
        other = "decode" if role == "prefill" else "prefill"
        affinity = {
            "podAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [{
                    "weight": 50,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": {labels.MODEL_LABEL: model.name, labels.ROLE_LABEL: other}},
                        "topologyKey": labels.ZONE_LABEL,
                    },
                }]
            }
        }
    return KaiPodWiring(
        scheduler_name=labels.KAI_SCHEDULER_NAME,
        queue=leaf.name,
        priority_class_name=labels.KAI_TRAIN_PRIORITY_CLASS if leaf.preemptible else labels.KAI_INFERENCE_PRIORITY_CLASS,
        gang_min_member=shape.pods,
        pod_labels=queue_labels,
        pod_annotations=annotations,
        workload_labels=queue_labels,
        affinity=affinity,
    )
