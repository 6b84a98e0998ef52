"""KAI cannot be built here (the module proxy refuses it), so this is a faithful model of what v0.17.0 and Karpenter
v1.14.1 do with a recreated placeholder, cited line by line, run over the objects gpuscale emits: the ``Queue``
bodies (``manifests.kai.queue_bodies``) and the placeholder pods' queue label. It agrees with the guardrail
(``guardrails.headroom.placeholder_limit_breach``, applied by ``validate``) on both sides of the limit."""

from __future__ import annotations

from typing import Any

from gpuscale import labels
from gpuscale.feasibility import checked_sizing
from gpuscale.manifests import kai
from gpuscale.problems import Problems
from gpuscale.sizing import size_platform
from gpuscale.spec.platform import PlatformSpec
from tests.test_placeholder_limits import prod_with_placeholders

UNLIMITED = -1.0
"""``constants.UnlimitedResourceQuantity`` (``pkg/common/constants/constants.go`` L14 at v0.17.0)."""


def kai_over_limit(queues: dict[str, dict[str, Any]], queue: str, allocated: dict[str, float], request: float) -> str | None:
    """``resultsOverLimit`` (``capacity_policy/max_allowed_check.go`` L16-49): from the job's queue up through each
    ``ParentQueue`` (L19), the first queue whose GPU ``MaxAllowed`` (the Queue's ``resources.gpu.limit``) is not
    unlimited (L54) and is below its allocation plus the request (L61). Run for preemptible jobs too: ``allocate.go``
    L29 calls ``IsJobOverQueueCapacity``, whose checks are ``resultsOverLimit`` then the non-preemptible quota check
    (``capacity_policy.go`` L33), and only the latter returns early for a preemptible job (``quota_check.go`` L26-30)."""
    name: str | None = queue
    while name is not None:
        spec = queues[name]["spec"]
        limit = float(spec["resources"]["gpu"]["limit"])
        if limit != UNLIMITED and limit < allocated.get(name, 0.0) + request:
            return name
        name = spec.get("parentQueue")
    return None


def kai_pod_status_when_refused() -> dict[str, Any]:
    """What KAI writes on a pending task it did not place, whatever the reason (``default_status_updater.go``
    L249-260, called for every pending task at L382-383, ``markUnschedulable`` defaulting to true,
    ``scheduler/utils/pod_group_utils.go`` L16, L62-66)."""
    return {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}


def karpenter_provisions(pod: dict[str, Any]) -> bool:
    """``IsProvisionable`` (``pkg/utils/pod/scheduling.go`` L102-108): marked Unschedulable (L125-131), not bound, not
    nominated, not a DaemonSet's or a node's. ``schedulerName`` is not consulted."""
    status = pod.get("status", {})
    failed = any(c["type"] == "PodScheduled" and c["reason"] == "Unschedulable" for c in status.get("conditions", []))
    return failed and not pod["spec"].get("nodeName") and not status.get("nominatedNodeName") and not any(
        o.get("kind") in ("DaemonSet", "Node") for o in pod["metadata"].get("ownerReferences", []))


def worst_case(spec: PlatformSpec) -> tuple[str | None, dict[str, Any]]:
    """Every serving role at max_replicas, every placeholder but one bound, and the last one recreated pending: which
    queue KAI refuses it at, and the pod as Karpenter then sees it."""
    queues = {q["metadata"]["name"]: q for q in kai.queue_bodies(spec.teams)}
    sized = {ms.model: ms for ms in size_platform(spec).models}
    allocated: dict[str, float] = {}
    pending: tuple[str, float] | None = None
    for m in spec.models:
        ms = sized[m.name]
        gpus = sum(r.max_replicas for r in ms.roles) * ms.shape.gpus
        held = [r.headroom.pods for r in ms.roles if r.headroom is not None and r.headroom.emitted
                and r.headroom.mode == "placeholder-pods"]
        placeholders = sum(held) * ms.shape.gpus_per_pod
        if held and pending is None:
            pending = (m.queue, float(ms.shape.gpus_per_pod))
            placeholders -= ms.shape.gpus_per_pod
        for q in spec.queue_chain(m.queue):
            allocated[q.name] = allocated.get(q.name, 0.0) + gpus + placeholders
    assert pending is not None, "no placeholder pods on this stack"
    refused = kai_over_limit(queues, pending[0], allocated, pending[1])
    pod: dict[str, Any] = {"metadata": {"labels": {labels.KAI_QUEUE_LABEL: pending[0]}, "ownerReferences": [
        {"kind": "ReplicaSet"}]}, "spec": {"schedulerName": "kai-scheduler"}}
    if refused:
        pod["status"] = kai_pod_status_when_refused()
    return refused, pod


def guardrail_refuses(spec: PlatformSpec) -> bool:
    """Whether ``validate`` refuses the stack at a model's ``headroom.mode``."""
    try:
        checked_sizing(spec)
    except Problems as exc:
        return any(p.path.endswith("headroom.mode") for p in exc.problems)
    return False


def test_over_chats_limit_kai_refuses_the_recreated_placeholder_and_karpenter_would_launch_it_a_node() -> None:
    spec = prod_with_placeholders(48)
    refused, pod = worst_case(spec)
    assert refused == "chat"
    assert karpenter_provisions(pod)  # the empty node the guardrail exists to prevent
    assert guardrail_refuses(spec)


def test_with_room_in_every_limit_kai_places_it_and_the_guardrail_accepts() -> None:
    spec = prod_with_placeholders(64)
    refused, pod = worst_case(spec)
    assert refused is None and not karpenter_provisions(pod)
    assert not guardrail_refuses(spec)
