"""Pods of a Deployment or LeaderWorkerSet at a replica count, named and labelled as their controllers would.

- Deployment (kube-controller-manager): one ReplicaSet ``<deployment>-<pod-template-hash>`` owned by the Deployment,
  pods ``<replicaset>-<5 chars>`` owned by it, labelled ``pod-template-hash``. Hash and suffix use Kubernetes'
  alphabet (``rand.SafeEncodeString``) but are derived deterministically here, not by Kubernetes' hasher.
- LeaderWorkerSet (LWS v0.10.0, ``pkg/controllers/leaderworkerset_controller.go``, ``pod_controller.go``,
  ``pkg/webhooks/pod_webhook.go``): a leader StatefulSet ``<lws>`` owned by the LWS; leader pods ``<lws>-<i>`` with
  ``worker-index=0``, ``group-index=i``, ``group-key=sha1("<ns>/<leader>")``, ``name``, annotation ``size``; per
  leader a worker StatefulSet ``<leader>`` owned by the leader pod, with pods ``<leader>-<j>`` (j = 1..size-1)
  carrying the leader's group labels, ``worker-index=j`` and annotation ``leader-name``.

The API server's part is applied too: ``spec.priority`` from the PriorityClass (priority admission) and
``matchLabelKeys``/``mismatchLabelKeys`` of pod (anti-)affinity terms merged into their label selectors as ``In``/
``NotIn`` (KEP-3633 ``MatchLabelKeysInPodAffinity``: beta and on by default in 1.31, GA in 1.33).
"""

from __future__ import annotations

import copy
import hashlib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuscale import labels

LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
LWS_REVISION_LABEL = "leaderworkerset.sigs.k8s.io/template-revision-hash"
LWS_SIZE_ANNOTATION = "leaderworkerset.sigs.k8s.io/size"
LWS_REPLICAS_ANNOTATION = "leaderworkerset.sigs.k8s.io/replicas"
LWS_LEADER_NAME_ANNOTATION = "leaderworkerset.sigs.k8s.io/leader-name"
POD_TEMPLATE_HASH_LABEL = "pod-template-hash"
STS_POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
STS_POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
STS_REVISION_LABEL = "controller-revision-hash"
_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
"""``k8s.io/apimachinery/pkg/util/rand`` alphanums: no vowels, no 0/1/3."""
_UID_NAMESPACE = uuid.UUID("9b1f0c1e-7d7a-4f4e-9a51-6c2b7f0e2a11")


def uid(kind: str, namespace: str, name: str) -> str:
    """A stable UID per object, so a snapshot is byte-identical run to run."""
    return str(uuid.uuid5(_UID_NAMESPACE, f"{kind}/{namespace}/{name}"))


def _safe(text: str, length: int) -> str:
    digest = hashlib.sha256(text.encode()).digest()
    return "".join(_SAFE_ALPHABET[b % len(_SAFE_ALPHABET)] for b in digest[:length])


def _owner_ref(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}


@dataclass
class Replica:
    """One replica of a role: its pods (one for a Deployment, ``size`` for an LWS group)."""

    index: int
    pods: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Expansion:
    """A workload at a replica count: the objects that own its pods, and its replicas."""

    owners: list[dict[str, Any]]
    replicas: list[Replica]


def _with_api_server_defaults(pod: dict[str, Any], priorities: Mapping[str, int]) -> dict[str, Any]:
    spec = pod["spec"]
    pc = spec.get("priorityClassName")
    if pc in priorities:
        spec["priority"] = priorities[pc]
    pod_labels = pod["metadata"].get("labels", {})
    for kind in ("podAffinity", "podAntiAffinity"):
        block = (spec.get("affinity") or {}).get(kind) or {}
        terms = list(block.get("requiredDuringSchedulingIgnoredDuringExecution", []))
        terms += [w["podAffinityTerm"] for w in block.get("preferredDuringSchedulingIgnoredDuringExecution", [])]
        for term in terms:
            for keys_field, operator in (("matchLabelKeys", "In"), ("mismatchLabelKeys", "NotIn")):
                for key in term.get(keys_field, []):
                    if key in pod_labels:
                        selector = term.setdefault("labelSelector", {})
                        selector.setdefault("matchExpressions", []).append(
                            {"key": key, "operator": operator, "values": [pod_labels[key]]})
    pod.setdefault("status", {"phase": "Pending"})
    return pod


def _pod(template: Mapping[str, Any], namespace: str, name: str, extra_labels: Mapping[str, str],
         extra_annotations: Mapping[str, str], owner: Mapping[str, Any], priorities: Mapping[str, int]) -> dict[str, Any]:
    meta = template.get("metadata", {})
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid("Pod", namespace, name),
            "labels": {**meta.get("labels", {}), **extra_labels},
            "annotations": {**meta.get("annotations", {}), **extra_annotations},
            "ownerReferences": [_owner_ref(owner)],
        },
        "spec": copy.deepcopy(template["spec"]),
    }
    return _with_api_server_defaults(pod, priorities)


def expand_deployment(deployment: Mapping[str, Any], replicas: int, priorities: Mapping[str, int]) -> Expansion:
    meta = deployment["metadata"]
    ns, name = meta["namespace"], meta["name"]
    dep = {**deployment, "metadata": {**meta, "uid": uid("Deployment", ns, name)},
           "spec": {**deployment["spec"], "replicas": replicas}}
    template = deployment["spec"]["template"]
    template_hash = _safe(repr(sorted(template.items(), key=str)), 10)
    rs_name = f"{name}-{template_hash}"
    rs_labels = {**template.get("metadata", {}).get("labels", {}), POD_TEMPLATE_HASH_LABEL: template_hash}
    rs = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": rs_name, "namespace": ns, "uid": uid("ReplicaSet", ns, rs_name), "labels": rs_labels,
                     "ownerReferences": [_owner_ref(dep)]},
        "spec": {"replicas": replicas, "selector": {"matchLabels": rs_labels},
                 "template": {**template, "metadata": {**template.get("metadata", {}), "labels": rs_labels}}},
    }
    out = [
        Replica(i, [_pod(template, ns, f"{rs_name}-{_safe(f'{rs_name}/{i}', 5)}", {POD_TEMPLATE_HASH_LABEL: template_hash},
                         {}, rs, priorities)])
        for i in range(replicas)
    ]
    return Expansion(owners=[dep, rs], replicas=out)


def expand_leader_worker_set(lws: Mapping[str, Any], replicas: int, priorities: Mapping[str, int]) -> Expansion:
    meta = lws["metadata"]
    ns, name = meta["namespace"], meta["name"]
    spec = lws["spec"]
    lwt = spec["leaderWorkerTemplate"]
    size = int(lwt.get("size", 1))
    leader_template = lwt.get("leaderTemplate") or lwt["workerTemplate"]
    worker_template = lwt["workerTemplate"]
    revision = _safe(repr(sorted(lwt.items(), key=str)), 10)
    obj = {**lws, "metadata": {**meta, "uid": uid("LeaderWorkerSet", ns, name)}, "spec": {**spec, "replicas": replicas}}
    leader_sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": ns, "uid": uid("StatefulSet", ns, name),
                     "labels": {**meta.get("labels", {}), LWS_NAME_LABEL: name, LWS_REVISION_LABEL: revision},
                     "annotations": {**meta.get("annotations", {}), LWS_REPLICAS_ANNOTATION: str(replicas)},
                     "ownerReferences": [_owner_ref(obj)]},
        "spec": {"replicas": replicas, "serviceName": name, "podManagementPolicy": "Parallel"},
    }
    owners: list[dict[str, Any]] = [obj, leader_sts]
    out: list[Replica] = []
    sts_revision = f"{name}-{_safe(name + revision, 10)}"
    for i in range(replicas):
        leader_name = f"{name}-{i}"
        group_key = hashlib.sha1(f"{ns}/{leader_name}".encode()).hexdigest()
        group = {LWS_NAME_LABEL: name, LWS_GROUP_INDEX_LABEL: str(i), labels.LWS_GROUP_KEY_LABEL: group_key,
                 LWS_REVISION_LABEL: revision}
        leader = _pod(
            leader_template, ns, leader_name,
            {**group, labels.LWS_WORKER_INDEX_LABEL: "0", STS_POD_NAME_LABEL: leader_name, STS_POD_INDEX_LABEL: str(i),
             STS_REVISION_LABEL: sts_revision},
            {LWS_SIZE_ANNOTATION: str(size)}, leader_sts, priorities,
        )
        replica = Replica(i, [leader])
        if size > 1:
            worker_sts = {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": {"name": leader_name, "namespace": ns, "uid": uid("StatefulSet", ns, leader_name),
                             "labels": {**meta.get("labels", {}), **group},
                             "annotations": dict(meta.get("annotations", {})),
                             "ownerReferences": [_owner_ref(leader)]},
                "spec": {"replicas": size - 1, "serviceName": name, "podManagementPolicy": "Parallel",
                         "ordinals": {"start": 1}},
            }
            owners.append(worker_sts)
            worker_revision = f"{leader_name}-{_safe(leader_name + revision, 10)}"
            for j in range(1, size):
                worker_name = f"{leader_name}-{j}"
                replica.pods.append(_pod(
                    worker_template, ns, worker_name,
                    {**group, labels.LWS_WORKER_INDEX_LABEL: str(j), STS_POD_NAME_LABEL: worker_name,
                     STS_POD_INDEX_LABEL: str(j), STS_REVISION_LABEL: worker_revision},
                    {LWS_SIZE_ANNOTATION: str(size), LWS_LEADER_NAME_ANNOTATION: leader_name}, worker_sts, priorities,
                ))
        out.append(replica)
    return Expansion(owners=owners, replicas=out)


def expand(workload: Mapping[str, Any], replicas: int, priorities: Mapping[str, int]) -> Expansion:
    """Owners and pods of ``workload`` (a Deployment or LeaderWorkerSet body) at ``replicas`` replicas."""
    if replicas < 0:
        raise ValueError(f"{workload['kind']} {workload['metadata']['name']}: replicas must be >= 0, got {replicas}")
    if workload["kind"] == "Deployment":
        return expand_deployment(workload, replicas, priorities)
    if workload["kind"] == "LeaderWorkerSet":
        return expand_leader_worker_set(workload, replicas, priorities)
    raise ValueError(f"cannot expand a {workload['kind']}")
