"""Typed reads of the dumped objects: a field of the wrong type reads as absent, never as a traceback.

Kubernetes semantics the diagnosis needs, each as the API defines it: quantities, a pod's GPU request, whether a pod
tolerates a taint (``k8s.io/api/core/v1`` ``Toleration.ToleratesTaint``), whether a node's labels satisfy a pod's
``nodeSelector`` and required node affinity, timestamps.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from typing import Any

from gpuscale import labels

Obj = Mapping[str, Any]


def field(obj: Any, *path: str) -> Any:
    """``obj[path[0]][path[1]]...`` or None where a step is missing or not a mapping."""
    for key in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def text(obj: Any, *path: str) -> str:
    value = field(obj, *path)
    return value if isinstance(value, str) else ""


def mapping(obj: Any, *path: str) -> Mapping[str, Any]:
    value = field(obj, *path)
    return value if isinstance(value, Mapping) else {}


def items(obj: Any, *path: str) -> list[Any]:
    value = field(obj, *path)
    return value if isinstance(value, list) else []


def name(obj: Obj) -> str:
    return text(obj, "metadata", "name")


def namespace(obj: Obj) -> str:
    return text(obj, "metadata", "namespace")


def ref(obj: Obj) -> str:
    """``<Kind>/<namespace>/<name>`` (``<Kind>/<name>`` for cluster-scoped objects)."""
    ns = namespace(obj)
    return f"{text(obj, 'kind')}/{ns}/{name(obj)}" if ns else f"{text(obj, 'kind')}/{name(obj)}"


_QUANTITY = re.compile(r"^([+-]?[0-9.]+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")
_SUFFIX = {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18, "Ki": 2**10, "Mi": 2**20,
           "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}


def quantity(value: Any) -> float | None:
    """A Kubernetes quantity (``"4"``, ``"500m"``, ``"16Gi"``, or a JSON number); None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if not isinstance(value, str):
        return None
    match = _QUANTITY.match(value.strip())
    if not match:
        return None
    try:
        number = float(match.group(1))
    except ValueError:
        return None
    return number * _SUFFIX.get(match.group(2) or "", 1.0)


def pod_gpus(pod: Obj) -> int:
    """GPUs the pod requests: the sum over its containers (limits when requests omit it, as the API defaults them),
    or the largest init container's if that is more (``resourcehelper.PodRequests``)."""
    def of(container: Any) -> int:
        value = quantity(field(container, "resources", "requests", labels.GPU_RESOURCE))
        if value is None:
            value = quantity(field(container, "resources", "limits", labels.GPU_RESOURCE))
        return int(value) if value is not None and value > 0 else 0

    spec = mapping(pod, "spec")
    regular = sum(of(c) for c in items(spec, "containers"))
    init = max((of(c) for c in items(spec, "initContainers")), default=0)
    return max(regular, init)


def is_pending_unbound(pod: Obj) -> bool:
    return text(pod, "status", "phase") in ("Pending", "") and not text(pod, "spec", "nodeName") and \
        field(pod, "metadata", "deletionTimestamp") is None


def condition(obj: Obj, kind: str) -> Mapping[str, Any]:
    """The ``status.conditions`` entry of ``type: kind`` (empty when absent)."""
    for cond in items(obj, "status", "conditions"):
        if isinstance(cond, Mapping) and cond.get("type") == kind:
            return cond
    return {}


def timestamp(value: Any) -> datetime.datetime | None:
    """An RFC 3339 time as the API writes it (``2026-11-30T10:00:00Z``, with or without fractions)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)


def created(obj: Obj) -> datetime.datetime | None:
    return timestamp(field(obj, "metadata", "creationTimestamp"))


def event_time(event: Obj) -> datetime.datetime | None:
    """When an event last happened (``lastTimestamp``, else ``eventTime``, ``firstTimestamp``, creation)."""
    for key in ("lastTimestamp", "eventTime", "firstTimestamp"):
        found = timestamp(event.get(key))
        if found is not None:
            return found
    return created(event)


def tolerates(toleration: Any, taint: Mapping[str, Any]) -> bool:
    """``Toleration.ToleratesTaint`` (k8s.io/api core/v1 ``toleration.go``): effect empty or equal, key empty
    (with ``Exists``) or equal, ``Exists`` matches any value, ``Equal`` (the default) the same value."""
    if not isinstance(toleration, Mapping):
        return False
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    return operator == "Equal" and bool(key) and (toleration.get("value") or "") == (taint.get("value") or "")


def untolerated_taints(pod: Obj, taints: list[Any]) -> list[Mapping[str, Any]]:
    """The ``NoSchedule``/``NoExecute`` taints of ``taints`` no toleration of the pod tolerates (the scheduler's
    filter ignores ``PreferNoSchedule``)."""
    tolerations = items(pod, "spec", "tolerations")
    return [t for t in taints if isinstance(t, Mapping) and t.get("effect") in ("NoSchedule", "NoExecute")
            and not any(tolerates(tol, t) for tol in tolerations)]


def taint_text(taint: Mapping[str, Any]) -> str:
    value = taint.get("value")
    return f"{taint.get('key')}={value}:{taint.get('effect')}" if value else f"{taint.get('key')}:{taint.get('effect')}"


def _expression_matches(expr: Any, node_labels: Mapping[str, Any]) -> bool:
    if not isinstance(expr, Mapping):
        return False
    key, operator = str(expr.get("key")), expr.get("operator")
    values: list[Any] = items(expr, "values")
    present = key in node_labels
    if operator == "In":
        return present and node_labels[key] in values
    if operator == "NotIn":
        return not present or node_labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and len(values) == 1:
        try:
            have, want = int(node_labels[key]), int(values[0])
        except (TypeError, ValueError):
            return False
        return have > want if operator == "Gt" else have < want
    return False


def selector_mismatches(pod: Obj, node_labels: Mapping[str, Any]) -> list[str]:
    """What of the pod's ``nodeSelector`` and required node affinity ``node_labels`` do not satisfy (empty: they do).

    Node affinity terms are ORed, the expressions of one term ANDed (``nodeaffinity`` plugin)."""
    wrong = [f"nodeSelector {k}={v}" for k, v in mapping(pod, "spec", "nodeSelector").items()
             if node_labels.get(k) != v]
    terms = items(pod, "spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution",
                  "nodeSelectorTerms")
    if terms and not any(
        all(_expression_matches(e, node_labels) for e in items(term, "matchExpressions")) for term in terms
    ):
        wrong.append("required node affinity (no nodeSelectorTerm matches)")
    return wrong


def node_gpus(node: Obj) -> float | None:
    """``status.allocatable`` ``nvidia.com/gpu`` (None: not advertised)."""
    return quantity(field(node, "status", "allocatable", labels.GPU_RESOURCE))


def node_ready(node: Obj) -> bool:
    return condition(node, "Ready").get("status") == "True"


def is_gpu_node(node: Obj) -> bool:
    """A node of a GPU instance type: labelled ``nvidia.com/gpu.present=true`` (every gpuscale GPU NodePool sets it)
    or with Karpenter's ``karpenter.k8s.aws/instance-gpu-count`` above 0."""
    node_labels = mapping(node, "metadata", "labels")
    count = quantity(node_labels.get(GPU_COUNT_LABEL))
    return node_labels.get(labels.GPU_PRESENT_LABEL) == "true" or (count is not None and count > 0)


GPU_COUNT_LABEL = "karpenter.k8s.aws/instance-gpu-count"
"""Set by the AWS provider on every node of a GPU instance type (aws/karpenter-provider-aws v1.14.1
``pkg/apis/v1/labels.go`` ``LabelInstanceGPUCount``)."""
NODEPOOL_LABEL = "karpenter.sh/nodepool"
"""On every NodeClaim and node Karpenter launches (kubernetes-sigs/karpenter v1.14.1 ``pkg/apis/v1/labels.go``
``NodePoolLabelKey``)."""
