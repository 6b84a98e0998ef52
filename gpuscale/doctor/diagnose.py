"""Every pending GPU pod: which layer holds it and why, or that it is waiting normally for a node.

The layers' rules (``scheduler_rules``, ``kai_rules``, ``karpenter_rules``) each return the causes they can prove from
the dump. A pod with causes is stuck; a cause that only follows from another is dropped (a gang waits because the
node for its last pod cannot launch: the launch is the cause). A pod without causes is in progress while it is
younger than the launch window or a NodeClaim for it is still coming up inside that window; past it, the slow
NodeClaim (or the silence of every controller) is the cause.
"""

from __future__ import annotations

from gpuscale.doctor import kai_rules, karpenter_rules, scheduler_rules
from gpuscale.doctor import messages as m
from gpuscale.doctor import objects as o
from gpuscale.doctor import signals as sig
from gpuscale.doctor.cluster import Cluster, PodView, Settings, pending_gpu_pods
from gpuscale.doctor.dump import ClusterDump, Obj
from gpuscale.doctor.findings import LAYERS, Finding, Report

RULES = (*scheduler_rules.RULES, *kai_rules.RULES, *karpenter_rules.RULES)
SYMPTOMS = (kai_rules.gang_unmet,)
"""Rules whose finding is dropped when another rule found a cause for the same pod."""
WAIT_FOR_LAUNCH = (kai_rules.gang_unmet, kai_rules.fragmented)
"""Rules whose finding is dropped while a NodeClaim for the pod is launching (the new node resolves it)."""


def _causes(view: PodView) -> list[Finding]:
    found: dict[object, list[Finding]] = {rule: rule(view) for rule in RULES}
    if not view.by_kai:  # KAI never saw it: its queues, gangs and topology are not why it waits
        found = {r: f for r, f in found.items() if r not in kai_rules.RULES}
    elif found[kai_rules.no_podgroup]:  # without a PodGroup nothing else KAI says applies
        found = {r: f for r, f in found.items() if r not in kai_rules.RULES or r is kai_rules.no_podgroup}
    # a gang waiting for nodes that are launching, or for a node another cause blocks, is not a cause of its own
    if view.launching():
        found = {r: f for r, f in found.items() if r not in WAIT_FOR_LAUNCH}
    if any(f for r, f in found.items() if r not in SYMPTOMS):
        found = {r: f for r, f in found.items() if r not in SYMPTOMS}
    return [f for findings in found.values() for f in findings]


def _claim_state(view: PodView, claim: Obj) -> str:
    states = ", ".join(f"{kind}={o.condition(claim, kind).get('status', 'Unknown')}"
                       for kind in (m.NODECLAIM_LAUNCHED, m.NODECLAIM_REGISTERED, m.NODECLAIM_INITIALIZED))
    return f"NodeClaim/{o.name(claim)}: status.conditions {states} (created {view.cluster.age_s(o.created(claim)):.0f} s ago)"


def _young_silent_nodes(view: PodView) -> list[Obj]:
    return [n for n in view.cluster.fit(view.pod).matching_silent if scheduler_rules.young(view, n)]


def _waiting(view: PodView) -> Finding | None:
    """Why a pod without a cause is waiting normally, or None when it is past the window."""
    window = view.cluster.settings.launch_window_s
    claims = view.launching()
    pools = [o.name(p) for p in view.candidate_nodepools()]
    if claims:
        return Finding(pod=view.key, layer="karpenter",
                       cause=f"waiting for a node: NodeClaim {o.name(claims[0])} is launching (normal for up to "
                             f"{window:.0f} s)",
                       evidence=[*(s.evidence for s in view.said if s.reason == m.KARPENTER_NOMINATED),
                                 *(_claim_state(view, c) for c in claims)],
                       confirm_with=[*(f'{sig.KARPENTER_NODECLAIMS_CREATED}{{nodepool="{p}"}}' for p in pools),
                                     "kubectl get nodeclaims -w"])
    if (nodes := _young_silent_nodes(view)):
        return Finding(pod=view.key, layer="device-plugin",
                       cause=f"waiting for the device plugin on new node {o.name(nodes[0])} to advertise nvidia.com/gpu",
                       evidence=[f"Node/{o.name(n)}: Ready {view.cluster.age_s(o.created(n)):.0f} s ago, "
                                 "status.allocatable has no nvidia.com/gpu yet" for n in nodes],
                       confirm_with=["kubectl get nodes -o custom-columns=NAME:.metadata.name,"
                                     "GPUS:.status.allocatable.nvidia\\.com/gpu"])
    if view.age_s <= window:
        layer = "kai" if view.by_kai else "kube-scheduler"
        return Finding.model_validate({
            "pod": view.key, "layer": layer,
            "cause": f"created {view.age_s:.0f} s ago; the scheduler and Karpenter are still deciding (normal for up "
                     f"to {window:.0f} s)",
            "evidence": [f"{view.ref}: metadata.creationTimestamp {o.text(view.pod, 'metadata', 'creationTimestamp')}",
                         *(s.evidence for s in view.said)],
            "confirm_with": [f"kubectl get pod -n {o.namespace(view.pod)} {o.name(view.pod)} -w"],
        })
    return None


def _overdue(view: PodView) -> Finding:
    """A pod past the launch window that no rule explains: a slow NodeClaim, or silence."""
    window = view.cluster.settings.launch_window_s
    slow = [c for c in view.nodeclaims() if o.condition(c, m.NODECLAIM_INITIALIZED).get("status") != "True"]
    if slow:
        return Finding(pod=view.key, layer="karpenter",
                       cause=f"NodeClaim {o.name(slow[0])} has not become an initialized node within {window:.0f} s "
                             "(the launch sized for this stack, twice over)",
                       evidence=[_claim_state(view, c) for c in slow],
                       confirm_with=[f"kubectl get nodeclaim {o.name(slow[0])} -o yaml",
                                     karpenter_rules.KARPENTER_LOGS])
    if view.by_kai and not view.provisionable and view.saying(m.KAI_NO_NODES_WITH_RESOURCES):
        return Finding(pod=view.key, layer="kai",
                       cause="no node has room and KAI did not mark the pod PodScheduled=False/Unschedulable, so "
                             "Karpenter never provisions for it (the PodGroup's markUnschedulable is false?)",
                       evidence=[s.evidence for s in view.said],
                       confirm_with=[f"kubectl get podgroup -n {o.namespace(view.pod)} {view.podgroup_name} "
                                     "-o jsonpath='{.spec.markUnschedulable}'"])
    if view.provisionable:
        return Finding(pod=view.key, layer="karpenter",
                       cause=f"pending {view.age_s:.0f} s, marked Unschedulable, and Karpenter has written no decision "
                             "about it (is the controller running?)",
                       evidence=[s.evidence for s in view.said],
                       confirm_with=[sig.KARPENTER_PROVISIONING_UNBOUND, karpenter_rules.KARPENTER_LOGS])
    layer = "kai" if view.by_kai else "kube-scheduler"
    return Finding.model_validate({
        "pod": view.key, "layer": layer,
        "cause": f"pending {view.age_s:.0f} s and no controller has written why ({view.scheduler} is the scheduler)",
        "evidence": [f"{view.ref}: no event, no PodScheduled condition"] + [s.evidence for s in view.said],
        "confirm_with": [kai_rules.KAI_LOGS.replace("<pod>", o.name(view.pod)) if view.by_kai else
                         "kubectl -n kube-system logs -l component=kube-scheduler --since=1h"],
    })


def _order(finding: Finding) -> tuple[str, int, str]:
    return finding.pod, LAYERS.index(finding.layer), finding.cause


def diagnose(dump: ClusterDump, settings: Settings) -> Report:
    cluster = Cluster(dump, settings)
    stuck: list[Finding] = []
    in_progress: list[Finding] = []
    for view in pending_gpu_pods(cluster):
        causes = _causes(view)
        if causes:
            stuck.extend(causes)
        elif (waiting := _waiting(view)) is not None:
            in_progress.append(waiting)
        else:
            stuck.append(_overdue(view))
    return Report(stuck=sorted(stuck, key=_order), in_progress=sorted(in_progress, key=_order))
