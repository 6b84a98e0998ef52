"""Layer 1, Karpenter: why no node is coming for a pending GPU pod.

Karpenter provisions only for pods some scheduler marked ``PodScheduled=False/Unschedulable``
(kubernetes-sigs/karpenter v1.14.1 ``pkg/utils/pod/scheduling.go`` ``IsProvisionable``); what it decides it writes as
events on the pod, the NodeClaim and the NodePool, and as NodeClaim/NodePool conditions (``messages``).
"""

from __future__ import annotations

from gpuscale import labels
from gpuscale.doctor import messages as m
from gpuscale.doctor import objects as o
from gpuscale.doctor import signals as sig
from gpuscale.doctor.cluster import PodView
from gpuscale.doctor.dump import Obj
from gpuscale.doctor.findings import Finding, quote

KARPENTER_LOGS = "kubectl -n kube-system logs deploy/karpenter --since=1h | grep -i error"


def _finding(view: PodView, cause: str, evidence: list[str], confirm: list[str]) -> Finding:
    return Finding(pod=view.key, layer="karpenter", cause=cause, evidence=evidence, confirm_with=confirm)


def _gpu_limit(pool: Obj) -> tuple[float | None, float]:
    limit = o.quantity(o.field(pool, "spec", "limits", labels.GPU_RESOURCE))
    used = o.quantity(o.field(pool, "status", "resources", labels.GPU_RESOURCE)) or 0.0
    return limit, used


def _has_room(view: PodView) -> bool:
    """A node the pod may use has its GPUs free, or a NodeClaim for it is coming up (``status.resources`` counts
    launching NodeClaims too: a pool "full" of the pod's own coming node is not a cause)."""
    return any(view.cluster.free_gpus(n) >= view.gpus for n in view.eligible_nodes()) or bool(view.launching())


def gpu_limit(view: PodView) -> list[Finding]:
    """The NodePool's ``limits.nvidia.com/gpu`` leaves no room for the pod's node."""
    said = view.saying(m.KARPENTER_LIMITS_EXCEEDED, m.KARPENTER_NODE_LIMIT_EXHAUSTED)
    said = [s for s in said if s in view.karpenter_said]
    full: list[tuple[Obj, float, float]] = []
    for pool in view.candidate_nodepools():
        limit, used = _gpu_limit(pool)
        if limit is not None and used + view.gpus > limit:
            full.append((pool, limit, used))
    if not said and not (full and not _has_room(view)):
        return []
    evidence = [s.evidence for s in said]
    evidence += [f"NodePool/{o.name(p)}: spec.limits.nvidia.com/gpu={limit:g}, status.resources.nvidia.com/gpu={used:g} "
                 f"(the pod needs {view.gpus} more)" for p, limit, used in full]
    names = [o.name(p) for p, _, _ in full] or [o.name(p) for p in view.candidate_nodepools()]
    confirm = [q for n in names for q in (sig.nodepool_gpu(sig.KARPENTER_NODEPOOL_USAGE, n),
                                         sig.nodepool_gpu(sig.KARPENTER_NODEPOOL_LIMIT, n))]
    confirm.append("kubectl get nodepools -o custom-columns=NAME:.metadata.name,LIMIT:.spec.limits.nvidia\\.com/gpu,"
                   "USED:.status.resources.nvidia\\.com/gpu")
    pools = ", ".join(names) or "its NodePool"
    return [_finding(view, f"NodePool {pools} is at its GPU limit: Karpenter launches no node that would exceed it "
                           "(raise gpu_limit or free GPUs)", evidence, confirm)]


def no_instance_type(view: PodView) -> list[Finding]:
    """No instance type of the NodePool satisfies the pod's requirements and resources."""
    said = [s for s in view.karpenter_said
            if m.KARPENTER_NO_INSTANCE_TYPE in s.message or m.KARPENTER_ALL_TYPES_FILTERED in s.message]
    pool_events = [f"NodePool/{o.name(p)}: event {m.KARPENTER_NO_COMPATIBLE_INSTANCE_TYPES}: "
                   f"{quote(o.text(e, 'message'))}"
                   for p in view.candidate_nodepools() for e in view.cluster.events_of("NodePool", "", o.name(p))
                   if o.text(e, "reason") == m.KARPENTER_NO_COMPATIBLE_INSTANCE_TYPES]
    if not said and not pool_events:
        return []
    names = [o.name(p) for p in view.candidate_nodepools()]
    return [_finding(
        view, "no instance type of the NodePool satisfies the pod's requirements (GPUs, CPU, memory per node, or "
              "zones/capacity type): fix the pod's requests or the pool's instance_types",
        [s.evidence for s in said] + pool_events,
        [sig.KARPENTER_UNSCHEDULABLE_PODS, *(f"kubectl get nodepool {n} -o yaml" for n in names), KARPENTER_LOGS],
    )]


def _launch_failed(claim: Obj) -> bool:
    launched = o.condition(claim, m.NODECLAIM_LAUNCHED)
    return launched.get("status") in ("False", "Unknown") and \
        str(launched.get("reason") or "") not in ("", m.AWAITING_RECONCILIATION)


def insufficient_capacity(view: PodView) -> list[Finding]:
    """EC2 had no capacity for the instance types Karpenter asked for (the NodeClaim is deleted and retried)."""
    claims = set(view.nominated_nodeclaims)
    pools = {o.name(p) for p in view.candidate_nodepools()}
    evidence: list[str] = []
    for name, events in view.cluster.nodeclaim_events:
        claim = view.cluster.nodeclaims.get(name)
        if name in claims:
            ours = True
        elif claim is not None:
            ours = o.text(claim, "metadata", "labels", o.NODEPOOL_LABEL) in pools
        else:  # deleted after the failure (launch.go), so its pool is unknown: any pod Karpenter is provisioning for
            ours = not claims and view.provisionable
        if ours:
            evidence += [f"NodeClaim/{name}: event {m.KARPENTER_INSUFFICIENT_CAPACITY}: {quote(o.text(e, 'message'))}"
                         for e in events if o.text(e, "reason") == m.KARPENTER_INSUFFICIENT_CAPACITY]
    if not evidence:
        return []
    names = sorted(pools) or ["<pool>"]
    return [_finding(
        view, "insufficient EC2 capacity for the pool's instance types: Karpenter deletes the NodeClaim and retries "
              "(add instance types, zones or on-demand capacity, or a capacity reservation)",
        evidence,
        [*(f'{sig.KARPENTER_NODECLAIMS_DISRUPTED}{{reason="insufficient_capacity",nodepool="{n}"}}' for n in names),
         sig.KARPENTER_CLOUDPROVIDER_ERRORS, KARPENTER_LOGS],
    )]


def launch_failure(view: PodView) -> list[Finding]:
    """A NodeClaim of the pod whose launch failed (``Launched`` not True with a reason): AMI, IAM, subnet, quota."""
    out: list[Finding] = []
    for claim in view.nodeclaims():
        if not _launch_failed(claim):
            continue
        launched = o.condition(claim, m.NODECLAIM_LAUNCHED)
        reason = str(launched.get("reason") or "")
        evidence = [f"NodeClaim/{o.name(claim)}: status.conditions Launched={launched.get('status')} {reason}: "
                    f"{quote(str(launched.get('message') or ''))}"]
        ami = reason == m.AMI_NOT_FOUND
        cause = (f"NodeClaim {o.name(claim)} cannot launch: the AMI does not exist or is not shared with the account "
                 "(pin an existing release: amiSelectorTerms alias)" if ami else
                 f"NodeClaim {o.name(claim)} failed to launch ({reason}): Karpenter retries the same request")
        out.append(_finding(view, cause, evidence, [
            f'{sig.KARPENTER_CLOUDPROVIDER_ERRORS}{{controller="nodeclaim.lifecycle",method="Create"}}',
            f"kubectl get nodeclaim {o.name(claim)} -o yaml", KARPENTER_LOGS,
        ]))
    return out


def nodeclass_not_ready(view: PodView) -> list[Finding]:
    """The NodePool's EC2NodeClass is not Ready (``NodeClassReady=False``), e.g. its AMI selector matches no AMI."""
    out: list[Finding] = []
    for pool in view.candidate_nodepools():
        ready = o.condition(pool, m.NODEPOOL_NODECLASS_READY)
        if ready.get("status") != "False":
            continue
        class_name = o.text(pool, "spec", "template", "spec", "nodeClassRef", "name")
        reason, message = str(ready.get("reason") or ""), str(ready.get("message") or "")
        evidence = [f"NodePool/{o.name(pool)}: status.conditions NodeClassReady=False {reason}: {quote(message)}"]
        node_class = view.cluster.nodeclasses.get(class_name)
        amis = o.condition(node_class, m.EC2NODECLASS_AMIS_READY) if node_class is not None else {}
        if amis.get("status") == "False":
            evidence.append(f"EC2NodeClass/{class_name}: status.conditions AMIsReady=False {amis.get('reason')}: "
                            f"{quote(str(amis.get('message') or ''))}")
        evidence += [f"NodeClaim/{o.text(e, 'involvedObject', 'name')}: event {m.KARPENTER_NODECLASS_NOT_READY_EVENT}: "
                     f"{quote(o.text(e, 'message'))}" for _, events in view.cluster.nodeclaim_events for e in events
                     if o.text(e, "reason") == m.KARPENTER_NODECLASS_NOT_READY_EVENT]
        ami = amis.get("reason") == m.AMI_NOT_FOUND or m.AMIS_NOT_READY in message or m.AMI_SELECTOR_NO_MATCH in message
        cause = (f"EC2NodeClass {class_name} is not ready: its AMI selector matches no AMI (a release that does not "
                 "exist, or not for this Kubernetes version), so the NodePool launches nothing" if ami else
                 f"EC2NodeClass {class_name} is not ready ({reason}), so NodePool {o.name(pool)} launches nothing")
        out.append(_finding(view, cause, evidence, [
            f"kubectl get ec2nodeclass {class_name} -o jsonpath='{{.status.conditions}}'",
            f'{sig.KARPENTER_NODECLAIMS_DISRUPTED}{{reason="nodeclass_not_ready",nodepool="{o.name(pool)}"}}',
        ]))
    return out


RULES = (gpu_limit, no_instance_type, insufficient_capacity, launch_failure, nodeclass_not_ready)
