"""Layer 2, KAI: the pod grouper, queue quotas, gangs, fragmentation and topology.

KAI schedules PodGroups, never bare pods: its pod grouper annotates each pod it groups with ``pod-group-name`` and
creates the PodGroup; the scheduler writes why a PodGroup waits on the PodGroup (``status.schedulingConditions``,
events) and on each pod (an ``Unschedulable`` event and ``PodScheduled`` condition), texts in ``messages``.
"""

from __future__ import annotations

from gpuscale.doctor import messages as m
from gpuscale.doctor import objects as o
from gpuscale.doctor import signals as sig
from gpuscale.doctor.cluster import PodView
from gpuscale.doctor.findings import Finding
from gpuscale.manifests.kai import KAI_NAMESPACE

KAI_LOGS = f"kubectl -n {KAI_NAMESPACE} logs deploy/kai-scheduler-default --since=1h | grep -i <pod>"


def _finding(view: PodView, cause: str, evidence: list[str], confirm: list[str]) -> Finding:
    return Finding(pod=view.key, layer="kai", cause=cause, evidence=evidence, confirm_with=confirm)


def _podgroup_cmd(view: PodView) -> str:
    return (f"kubectl get podgroup -n {o.namespace(view.pod)} {view.podgroup_name} "
            "-o jsonpath='{.status.schedulingConditions}'")


def no_podgroup(view: PodView) -> list[Finding]:
    """KAI's pod grouper made no PodGroup for the pod (an owner it does not know or cannot read)."""
    if not view.by_kai or view.podgroup is not None:
        return []
    if view.podgroup_name and not view.cluster.podgroups:  # a dump without PodGroups cannot tell
        return []
    owners = [f"{o.text(r, 'kind')}/{o.text(r, 'name')}" for r in o.items(view.pod, "metadata", "ownerReferences")]
    if view.podgroup_name:
        evidence = [f"{view.ref}: metadata.annotations.{m.KAI_POD_GROUP_ANNOTATION}={view.podgroup_name}, but "
                    f"PodGroup/{o.namespace(view.pod)}/{view.podgroup_name} is not in the dump"]
    else:
        evidence = [f"{view.ref}: metadata.annotations has no {m.KAI_POD_GROUP_ANNOTATION} (the pod grouper never "
                    f"grouped it); owners: {', '.join(owners) or 'none'}"]
    evidence += [s.evidence for s in view.said if s.reason == m.KAI_POD_GROUPER_WARNING]
    owner = owners[0] if owners else "its owner"
    return [_finding(view, f"no PodGroup: KAI's pod grouper did not group the pod (top owner {owner}), so the KAI "
                     "scheduler never considers it", evidence, [
        f"kubectl -n {KAI_NAMESPACE} logs deploy/pod-grouper --since=1h | grep {o.name(view.pod)}",
        f"kubectl get events -n {o.namespace(view.pod)} --field-selector reason={m.KAI_POD_GROUPER_WARNING}",
    ])]


def _queue_evidence(view: PodView) -> list[str]:
    queue = view.cluster.queues.get(view.queue_name)
    if queue is None:
        return []
    gpu = o.mapping(queue, "spec", "resources", "gpu")
    return [f"Queue/{view.queue_name}: spec.resources.gpu quota={gpu.get('quota')} limit={gpu.get('limit')}"]


def over_quota(view: PodView) -> list[Finding]:
    """The leaf queue is at its quota and the pod is non-preemptible (or at its limit)."""
    quota = view.saying(m.KAI_OVER_QUOTA_MESSAGE, reason=m.KAI_NON_PREEMPTIBLE_OVER_QUOTA)
    limit = [s for s in view.said if s.reason == m.KAI_OVER_LIMIT]
    if not quota and not limit:
        return []
    queue = view.queue_name or "<queue>"
    confirm = [sig.queue_gpus(sig.KAI_QUEUE_ALLOCATED_GPUS, queue), sig.queue_gpus(sig.KAI_QUEUE_DESERVED_GPUS, queue),
               f"kubectl get queue {queue} -o yaml"]
    out = []
    if quota:
        out.append(_finding(view, f"leaf queue {queue} is at its GPU quota and the pod is non-preemptible: KAI lets "
                            "non-preemptible pods use only the quota (raise the queue's quota or lower other "
                            "non-preemptible use)", [s.evidence for s in quota] + _queue_evidence(view), confirm))
    if limit:
        out.append(_finding(view, f"queue {queue} is at its GPU limit: KAI admits nothing beyond it",
                            [s.evidence for s in limit] + _queue_evidence(view), confirm))
    return out


def gang_unmet(view: PodView) -> list[Finding]:
    """The PodGroup's minimum cannot be placed (or does not exist yet), so every pod of it waits."""
    said = view.saying(m.KAI_GANG, m.KAI_GANG_SUBGROUP, m.KAI_JOB_NOT_READY_MESSAGE)
    if not said:
        return []
    min_member = o.field(view.podgroup, "spec", "minMember") if view.podgroup is not None else None
    evidence = [s.evidence for s in said]
    if view.podgroup is not None:
        evidence.append(f"PodGroup/{o.namespace(view.podgroup)}/{o.name(view.podgroup)}: spec.minMember={min_member}")
    placed = view.saying(m.KAI_GANG, m.KAI_GANG_SUBGROUP)
    why = ("the cluster cannot hold them" if placed else
           "fewer of its pods exist (their workload controller has not created them)")
    return [_finding(view, f"gang minimum unmet: the PodGroup needs {min_member or 'all its'} pods placed at once and "
                     f"{why}, so the whole group waits", evidence,
                     [_podgroup_cmd(view), KAI_LOGS.replace("<pod>", view.podgroup_name or o.name(view.pod))])]


def topology_unsatisfied(view: PodView) -> list[Finding]:
    """A required topology level no set of nodes satisfies (or a Topology/level that does not exist)."""
    said = view.saying(m.KAI_TOPOLOGY_UNSATISFIED, m.KAI_TOPOLOGY_MISSING, m.KAI_TOPOLOGY_CONFIG)
    if not said:
        return []
    annotations = o.mapping(view.pod, "metadata", "annotations")
    wanted = {k: v for k, v in annotations.items() if str(k).startswith("kai.scheduler/topology")}
    evidence = [s.evidence for s in said]
    if wanted:
        evidence.append(f"{view.ref}: metadata.annotations " + ", ".join(f"{k}={v}" for k, v in sorted(wanted.items())))
    level = str(wanted.get("kai.scheduler/topology-required-placement", "<level>"))
    return [_finding(view, "topology constraint no node set satisfies: the required placement level has no domain "
                     "with enough free GPUs (or its label is missing from the nodes)", evidence,
                     [f"kubectl get nodes -L {level}", "kubectl get topology -o yaml", _podgroup_cmd(view)])]


def fragmented(view: PodView) -> list[Finding]:
    """Enough free GPUs in total on the nodes the pod may use, but no single node with as many as it needs."""
    said = view.saying(m.KAI_NOT_ENOUGH_GPUS, m.KAI_NO_NODES_WITH_RESOURCES)
    if not said or not view.by_kai:
        return []
    nodes = view.eligible_nodes()
    free = {o.name(n): view.cluster.free_gpus(n) for n in nodes}
    if not free or max(free.values()) >= view.gpus or sum(free.values()) < view.gpus:
        return []
    if not any((o.node_gpus(n) or 0) >= view.gpus for n in nodes):  # no node could ever hold it: not fragmentation
        return []
    spread = ", ".join(f"{n}: {g:g}" for n, g in sorted(free.items()) if g > 0)
    evidence = [s.evidence for s in said] + [
        f"Node/*: {sum(free.values()):g} free GPUs over {sum(1 for g in free.values() if g > 0)} nodes ({spread}); "
        f"none has the {view.gpus} the pod needs"]
    return [_finding(view, f"free GPUs are fragmented: {sum(free.values()):g} are free across nodes but no node has "
                     f"{view.gpus}; KAI cannot split a pod, and Karpenter adds no node while GPUs look free", evidence, [
        "kubectl get nodes -o custom-columns=NAME:.metadata.name,GPUS:.status.allocatable.nvidia\\.com/gpu",
        "kubectl describe nodes | grep -A6 'Allocated resources'",
    ])]


RULES = (no_podgroup, over_quota, gang_unmet, topology_unsatisfied, fragmented)
