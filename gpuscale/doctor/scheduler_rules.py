"""Node filtering (the kube-scheduler's plugins, which KAI runs too) and the device plugin.

A pod the kube-scheduler or KAI filters off every node says so with the filter plugins' fragments (``messages``); the
doctor then names the taint or selector from the nodes and NodePools in the dump. A GPU node that is Ready but
advertises no ``nvidia.com/gpu`` is the device plugin's failure, whatever the scheduler wrote.
"""

from __future__ import annotations

from gpuscale import labels
from gpuscale.doctor import messages as m
from gpuscale.doctor import objects as o
from gpuscale.doctor import signals as sig
from gpuscale.doctor.cluster import PodView
from gpuscale.doctor.findings import Finding
from gpuscale.manifests.namespaces import DEVICE_PLUGIN_NAMESPACE


def _finding(view: PodView, layer: str, cause: str, evidence: list[str], confirm: list[str]) -> Finding:
    return Finding.model_validate({"pod": view.key, "layer": layer, "cause": cause, "evidence": evidence,
                                   "confirm_with": confirm})


def not_addressed_to_kai(view: PodView) -> list[Finding]:
    """A GPU pod for another scheduler: KAI never sees it, so no queue, gang or topology applies."""
    if view.by_kai:
        return []
    evidence = [f"{view.ref}: spec.schedulerName={view.scheduler} (gpuscale's GPU pods name "
                f"{view.cluster.settings.scheduler_name})"]
    evidence += [s.evidence for s in view.saying(m.KUBE_NO_NODE_AVAILABLE)]
    return [_finding(view, "kube-scheduler", f"the pod is addressed to {view.scheduler}, not the KAI scheduler: set "
                     f"spec.schedulerName: {view.cluster.settings.scheduler_name} in its template", evidence, [
        f"kubectl get pod -n {o.namespace(view.pod)} {o.name(view.pod)} -o jsonpath='{{.spec.schedulerName}}'",
        f'{sig.KUBE_SCHEDULER_PENDING_PODS}{{queue="unschedulable"}}',
    ])]


def untolerated_taint(view: PodView) -> list[Finding]:
    """A taint of the GPU nodes (or of the NodePool's template) the pod does not tolerate."""
    said = view.saying(m.KUBE_UNTOLERATED_TAINT, m.KARPENTER_DID_NOT_TOLERATE)
    where: list[str] = []
    taints: set[str] = set()
    for pool in view.candidate_nodepools():
        bad = o.untolerated_taints(view.pod, o.items(pool, "spec", "template", "spec", "taints"))
        where += [f"NodePool/{o.name(pool)}: spec.template.spec.taints {o.taint_text(t)} not tolerated by the pod"
                  for t in bad]
        taints |= {o.taint_text(t) for t in bad}
    if not said:
        return []
    tolerated = {id(n) for n in view.tolerated_nodes()}
    for node in view.matching_nodes():
        if id(node) not in tolerated:
            bad = o.untolerated_taints(view.pod, o.items(node, "spec", "taints"))
            where += [f"Node/{o.name(node)}: spec.taints {o.taint_text(t)} not tolerated by the pod" for t in bad]
            taints |= {o.taint_text(t) for t in bad}
    if not where:
        return []
    gpu = any(t.startswith(f"{labels.GPU_TAINT_KEY}=") or t.startswith(f"{labels.GPU_TAINT_KEY}:") for t in taints)
    fix = (f"add the toleration ({labels.GPU_TAINT_KEY} {labels.GPU_TAINT_EFFECT}) to its template" if gpu else
           "these are taints of nodes being drained, not ready or not yet registered, or set by hand")
    return [_finding(view, "kube-scheduler", f"the pod does not tolerate the GPU nodes' taint(s) "
                     f"{', '.join(sorted(taints))}: {fix}", [s.evidence for s in said] + where[:6], [
        f'{sig.KUBE_SCHEDULER_UNSCHEDULABLE_PODS}{{plugin="TaintToleration"}}',
        f"kubectl get pod -n {o.namespace(view.pod)} {o.name(view.pod)} -o jsonpath='{{.spec.tolerations}}'",
    ])]


def selector_mismatch(view: PodView) -> list[Finding]:
    """The pod's nodeSelector or required affinity matches no GPU node and no NodePool's labels."""
    said = view.saying(m.KUBE_NODE_AFFINITY_MISMATCH, m.KARPENTER_INCOMPATIBLE_REQUIREMENTS)
    if not said:
        return []
    where: list[str] = []
    for pool in view.cluster.gpu_nodepools():
        template_labels = o.mapping(pool, "spec", "template", "metadata", "labels")
        if not (wrong := o.selector_mismatches(view.pod, {**template_labels, o.NODEPOOL_LABEL: o.name(pool)})):
            return []  # a GPU NodePool can launch a node it accepts: the mismatching nodes are others (CPU nodes)
        where.append(f"NodePool/{o.name(pool)}: spec.template.metadata.labels do not satisfy the pod's "
                     f"{'; '.join(wrong)}")
    if view.matching_nodes():
        return []
    selector = ", ".join(f"{k}={v}" for k, v in o.mapping(view.pod, "spec", "nodeSelector").items())
    return [_finding(view, "kube-scheduler", "the pod's node selector or affinity matches no GPU node or NodePool"
                     + (f" ({selector})" if selector else ""), [s.evidence for s in said] + where[:6], [
        f'{sig.KUBE_SCHEDULER_UNSCHEDULABLE_PODS}{{plugin="NodeAffinity"}}',
        "kubectl get nodes -L " + ",".join(o.mapping(view.pod, "spec", "nodeSelector")) if selector else
        "kubectl get nodes --show-labels",
    ])]


def young(view: PodView, node: o.Obj) -> bool:
    """Registered within the launch window: the device plugin may not have registered yet (normal)."""
    age = view.cluster.age_s(o.created(node))
    return age is not None and age <= view.cluster.settings.launch_window_s


def no_gpu_advertised(view: PodView) -> list[Finding]:
    """Ready GPU nodes the pod could use that advertise no ``nvidia.com/gpu``: the device plugin is not running."""
    silent = [n for n in view.cluster.fit(view.pod).silent if not young(view, n)]
    if not silent:
        return []
    evidence = []
    for node in silent[:6]:
        count = o.text(node, "metadata", "labels", o.GPU_COUNT_LABEL) or "?"
        evidence.append(f"Node/{o.name(node)}: status.allocatable has no nvidia.com/gpu (Ready; instance has "
                        f"{count} GPUs, label {o.GPU_COUNT_LABEL})")
    evidence += [s.evidence for s in view.saying(m.KUBE_INSUFFICIENT + labels.GPU_RESOURCE, m.KAI_NOT_ENOUGH_GPUS)]
    nodes = ", ".join(o.name(n) for n in silent[:3]) + (" ..." if len(silent) > 3 else "")
    return [_finding(view, "device-plugin", f"the NVIDIA device plugin advertises no nvidia.com/gpu on {nodes}: its "
                     "DaemonSet pod is missing or failing there", evidence, [
        f"kubectl -n {DEVICE_PLUGIN_NAMESPACE} get pods -o wide --field-selector spec.nodeName={o.name(silent[0])}",
        "kubectl get nodes -o custom-columns=NAME:.metadata.name,GPUS:.status.allocatable.nvidia\\.com/gpu",
    ])]


RULES = (not_addressed_to_kai, untolerated_taint, selector_mismatch, no_gpu_advertised)
