"""gpuscale's guardrails as pure rules over a resource's type token and properties (the Pulumi wire shape).

Each rule returns violation messages that name the trap and the fix; an empty list means compliant. The same
functions back the CrossGuard pack in ``policy/`` (for programs that import our components or write their own
manifests) and the offline check ``gpuscale synth`` prints, so ``pulumi preview --policy-pack policy`` and the
PR synth agree. Rules read plain mappings and sequences, so they work on recorded mock inputs, on hand-written
dicts and on the policy SDK's property proxies alike.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuscale import labels
from gpuscale.guardrails import (
    autoscaler_backend,
    autoscaler_metrics,
    autoscaler_scope,
    consolidation,
    production,
    warm_minimum,
)
from gpuscale.policy.gpu_nodepool import nodepool_selects_gpus as nodepool_selects_gpus  # synth.diff reads it here
from gpuscale.spec.base import parse_duration

NODEPOOL = "kubernetes:karpenter.sh/v1:NodePool"
EC2NODECLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
SCALEDOBJECT = "kubernetes:keda.sh/v1alpha1:ScaledObject"
HPA_TYPES = frozenset({
    "kubernetes:autoscaling/v2:HorizontalPodAutoscaler",
    "kubernetes:autoscaling/v2beta2:HorizontalPodAutoscaler",
})
LEADERWORKERSET = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
AUTOSCALER_TYPES = frozenset({SCALEDOBJECT, *HPA_TYPES})

NODEPOOL_PATCH = "kubernetes:karpenter.sh/v1:NodePoolPatch"
"""A Pulumi ``CustomResourcePatch`` of a NodePool: server-side apply of a partial object onto an existing one."""

@dataclass(frozen=True)
class StackViolation:
    """A violation of a rule over the whole stack, attributed to one resource (its index in the input)."""

    index: int
    message: str


# --- GPU NodePool consolidation -------------------------------------------------------------------------------


def gpu_nodepool_consolidation(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    """A GPU NodePool keeps the consolidation rule (``gpuscale.guardrails.consolidation``): ``WhenEmpty`` with
    ``consolidateAfter`` >= max(1h, the cold start gpuscale annotated), unless it carries the acknowledgement."""
    if resource_type != NODEPOOL:
        return []
    return _consolidation_breaches(props, gpu=nodepool_selects_gpus(_map(props.get("spec"))))


def _consolidation_breaches(props: Mapping[str, Any], *, gpu: bool, what: str = "", partial: bool = False) -> list[str]:
    """The rule's messages for a NodePool (``partial``: a patch of an unknown NodePool, whose absent fields are the
    target's, unknown here, not the CRD's defaults: only the fields it sets are judged)."""
    spec = _map(props.get("spec"))
    if not gpu or spec.get("replicas") is not None:  # static pools never consolidate
        return []
    meta = _map(props.get("metadata"))
    ack = labels.ACK_UNSAFE_CONSOLIDATION_ANNOTATION
    acknowledged = "true" in (str(_map(meta.get("annotations")).get(ack, "")).lower(),
                              str(_map(meta.get("labels")).get(ack, "")).lower())
    disruption = _map(spec.get("disruption"))
    after = str(disruption.get("consolidateAfter", consolidation.NODEPOOL_DEFAULT_CONSOLIDATE_AFTER))
    found = consolidation.breaches(
        consolidation.NODEPOOL, pool=f"{what}{meta.get('name', '?')}",
        policy=str(disruption.get("consolidationPolicy", consolidation.NODEPOOL_DEFAULT_POLICY)),
        after=after, after_s=parse_duration(after), cold_start_s=_annotated_cold_start_s(meta), acknowledged=acknowledged,
    )
    return [message for field, message in found if not partial or consolidation.NODEPOOL.name(field) in disruption]


def _annotated_cold_start_s(meta: Mapping[str, Any]) -> float | None:
    raw = _map(meta.get("annotations")).get(labels.COLD_START_ANNOTATION)
    try:
        return float(str(raw)) if raw is not None else None
    except ValueError:
        return None  # not a number: the hour's floor still applies


def nodepool_patches(resources: Sequence[tuple[str, Mapping[str, Any]]]) -> list[StackViolation]:
    """Stack rule: a ``NodePoolPatch`` is checked as the NodePool it produces. Patched onto a NodePool of this stack,
    the merged object is what Karpenter runs; onto one created elsewhere, only the patch is known, so it is taken as a
    GPU pool unless its own requirements rule GPUs out (the pack cannot see the target; acknowledge on the patch)."""
    pools = {str(_map(p.get("metadata")).get("name")): p for t, p in resources if t == NODEPOOL}
    out: list[StackViolation] = []
    for i, (rtype, props) in enumerate(resources):
        if rtype != NODEPOOL_PATCH:
            continue
        name = str(_map(props.get("metadata")).get("name", "?"))
        target = pools.get(name)
        if target is not None:
            merged = merge_patch(target, props)
            gpu = nodepool_selects_gpus(_map(merged.get("spec")))
            messages = _consolidation_breaches(merged, gpu=gpu, what="patch of ")
        else:
            spec = _map(props.get("spec"))
            template_spec = _map(_map(spec.get("template")).get("spec"))
            gpu = "requirements" not in template_spec or nodepool_selects_gpus(spec)
            messages = _consolidation_breaches(props, gpu=gpu, what="patch of (not in this stack) ", partial=True)
        out.extend(StackViolation(i, m) for m in messages)
    return out


def merge_patch(target: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """``patch`` applied onto ``target`` as server-side apply does for a custom resource: maps merge key by key,
    lists and scalars are replaced (CRD lists without list-type markers are atomic)."""
    out = dict(target)
    for key, value in patch.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge_patch(out[key], value)
        else:
            out[key] = value
    return out


# --- autoscaler metric and scope ------------------------------------------------------------------------------


def autoscaler_metric(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    """No ScaledObject trigger or HPA metric on a banned signal (``gpuscale.guardrails.autoscaler_metrics``)."""
    if resource_type not in AUTOSCALER_TYPES:
        return []
    name = _map(props.get("metadata")).get("name", "?")
    kind = "ScaledObject" if resource_type == SCALEDOBJECT else "HorizontalPodAutoscaler"
    return [
        f"{kind} {name} {where} uses {finding.matched}: {finding.message()}"
        for where, text in _autoscaler_signals(resource_type, props)
        for finding in autoscaler_metrics.banned_in(text)
    ]


def hpa_min_replicas(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    """An HPA holds at least one replica (``gpuscale.guardrails.autoscaler_backend``); scaling to zero needs KEDA."""
    if resource_type not in HPA_TYPES:
        return []
    spec = _map(props.get("spec"))
    low = spec.get("minReplicas", autoscaler_backend.HPA_MIN_REPLICAS)  # the API's default is 1
    if not isinstance(low, int | float) or low >= autoscaler_backend.HPA_MIN_REPLICAS:
        return []
    name = _map(props.get("metadata")).get("name", "?")
    return [autoscaler_backend.hpa_min_replicas_message(f"HorizontalPodAutoscaler {name}: minReplicas {low:g}")]


def critical_warm_minimum(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    """An autoscaler labelled ``gpuscale.io/criticality: critical`` holds the critical warm minimum
    (``gpuscale.guardrails.warm_minimum``); one without the label (not emitted by gpuscale) has no criticality to judge."""
    if resource_type not in AUTOSCALER_TYPES:
        return []
    meta = _map(props.get("metadata"))
    criticality = _map(meta.get("labels")).get(labels.CRITICALITY_LABEL)
    if not isinstance(criticality, str):
        return []
    spec = _map(props.get("spec"))
    if resource_type == SCALEDOBJECT:
        kind, low = "ScaledObject", spec.get("minReplicaCount", warm_minimum.KEDA_DEFAULT_MIN_REPLICA_COUNT)
    else:  # the HPA API's default minReplicas is 1
        kind, low = "HorizontalPodAutoscaler", spec.get("minReplicas", autoscaler_backend.HPA_MIN_REPLICAS)
    if not isinstance(low, int | float) or isinstance(low, bool):
        return []
    breach = warm_minimum.autoscaler_breach(f"{kind} {meta.get('name', '?')}", criticality, low)
    return [breach] if breach else []


def autoscaler_role_scope(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    """No autoscaler whose query or selector spans prefill and decode: they saturate on different signals."""
    if resource_type not in AUTOSCALER_TYPES:
        return []
    name = _map(props.get("metadata")).get("name", "?")
    out: list[str] = []
    for where, text in _autoscaler_signals(resource_type, props):
        if autoscaler_scope.spans_both_roles(text):
            out.append(
                f"autoscaler {name} {where} selects both prefill and decode; {autoscaler_scope.WHY}. Use one "
                f"autoscaler per role, each selecting only its {labels.ROLE_LABEL} pods"
            )
    return out


def one_autoscaler_per_workload(resources: Sequence[tuple[str, Mapping[str, Any]]]) -> list[StackViolation]:
    """Stack rule: no two ScaledObjects/HPAs scale the same workload (they fight over ``replicas``)."""
    targets: dict[tuple[str, str, str, str], list[int]] = defaultdict(list)
    for i, (rtype, props) in enumerate(resources):
        target = autoscaler_target(rtype, props)
        if target is not None:
            targets[target].append(i)
    out: list[StackViolation] = []
    for (ns, _group, kind, name), idx in sorted(targets.items()):
        if len(idx) < 2:
            continue
        who = ", ".join(_describe(*resources[i]) for i in idx)
        for i in idx[1:]:
            out.append(StackViolation(i, (
                f"{kind} {ns}/{name} is scaled by {len(idx)} autoscalers ({who}); they overwrite each other's "
                "replica count. Keep exactly one autoscaler per role workload"
            )))
    return out


def autoscaler_target(resource_type: str, props: Mapping[str, Any]) -> tuple[str, str, str, str] | None:
    """``(namespace, API group, kind, name)`` an autoscaler scales, or ``None`` if it is not an autoscaler."""
    if resource_type not in AUTOSCALER_TYPES:
        return None
    meta = _map(props.get("metadata"))
    ref = _map(_map(props.get("spec")).get("scaleTargetRef"))
    # KEDA defaults the target to an apps/v1 Deployment; HPA requires kind and apiVersion
    api = str(ref.get("apiVersion", "apps/v1"))
    group = api.rpartition("/")[0]
    return (str(meta.get("namespace", "default")), group, str(ref.get("kind", "Deployment")), str(ref.get("name", "")))


# --- gang scheduling ------------------------------------------------------------------------------------------


def gang_scheduling(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    """A LeaderWorkerSet whose replica is several GPU pods must be gang-scheduled by KAI (in a queue)."""
    if resource_type != LEADERWORKERSET:
        return []
    meta = _map(props.get("metadata"))
    tmpl = _map(_map(props.get("spec")).get("leaderWorkerTemplate"))
    size = tmpl.get("size", 1)
    worker = _map(tmpl.get("workerTemplate"))
    pods = [("workerTemplate", worker)]
    if tmpl.get("leaderTemplate") is not None:
        pods.insert(0, ("leaderTemplate", _map(tmpl.get("leaderTemplate"))))
    if not isinstance(size, int | float) or size <= 1 or not any(_requests_gpus(p) for _, p in pods):
        return []
    name = meta.get("name", "?")
    out: list[str] = []
    for where, pod in pods:
        scheduler = _map(pod.get("spec")).get("schedulerName", "default-scheduler")
        if scheduler != labels.KAI_SCHEDULER_NAME:
            out.append(
                f"LeaderWorkerSet {name}: {where} uses schedulerName {scheduler}, but one replica is {int(size)} GPU "
                "pods; without gang scheduling some pods of a group bind and hold GPUs while the rest stay Pending "
                f"(no replica serves, and two partial groups can deadlock under quota). Set schedulerName: "
                f"{labels.KAI_SCHEDULER_NAME}"
            )
        elif labels.KAI_QUEUE_LABEL not in _map(meta.get("labels")) and labels.KAI_QUEUE_LABEL not in _map(
            _map(pod.get("metadata")).get("labels")
        ):
            out.append(
                f"LeaderWorkerSet {name}: {where} is scheduled by KAI but has no {labels.KAI_QUEUE_LABEL} label; "
                "KAI only schedules pods charged to a leaf queue. Label the LeaderWorkerSet and its pods"
            )
    return out


# --- prod AMI pinning -----------------------------------------------------------------------------------------


def ami_pinned(resource_type: str, props: Mapping[str, Any], *, stage: str | None = None) -> list[str]:
    """In production an EC2NodeClass pins its AMI (``gpuscale.guardrails.production``): its stage is its
    ``gpuscale.io/stage`` tag, else ``stage`` (the pack's config for the stack)."""
    if resource_type != EC2NODECLASS:
        return []
    spec = _map(props.get("spec"))
    if not production.is_production(production.stage_of(_map(spec.get("tags")), stage)):
        return []
    name = _map(props.get("metadata")).get("name", "?")
    out: list[str] = []
    for i, term in enumerate(_seq(spec.get("amiSelectorTerms"))):
        alias = str(_map(term).get("alias", ""))
        ssm = str(_map(term).get("ssmParameter", ""))
        if production.floating_ssm_parameter(ssm):
            out.append(production.unpinned_ami_message(f"EC2NodeClass {name}: amiSelectorTerms[{i}].ssmParameter {ssm}"))
        if production.unpinned_alias(alias):
            out.append(production.unpinned_ami_message(f"EC2NodeClass {name}: amiSelectorTerms[{i}].alias {alias}"))
    return out


# --- all rules at once ----------------------------------------------------------------------------------------

RESOURCE_RULES = {
    "gpu-nodepool-consolidation": gpu_nodepool_consolidation,
    "autoscaler-metric": autoscaler_metric,
    "hpa-min-replicas": hpa_min_replicas,
    "critical-warm-minimum": critical_warm_minimum,
    "autoscaler-role-scope": autoscaler_role_scope,
    "gang-scheduling-multi-pod-gpu": gang_scheduling,
}
"""Resource rules that need nothing but the resource (``ami_pinned`` also needs to know the stage)."""


STACK_RULES = {
    "one-autoscaler-per-workload": one_autoscaler_per_workload,
    "gpu-nodepool-patch-consolidation": nodepool_patches,
}
"""Rules over the whole stack (a resource judged with the others)."""


def check_resources(
    resources: Sequence[tuple[str, Mapping[str, Any]]], *, stage: str | None = None,
) -> list[tuple[int, str, str]]:
    """Every rule over every resource: ``(resource index, rule name, message)``, in input order. ``stage`` is the
    stack's ``environment.stage`` for resources that carry no ``gpuscale.io/stage`` tag."""
    out: list[tuple[int, str, str]] = []
    for i, (rtype, props) in enumerate(resources):
        for rule, fn in RESOURCE_RULES.items():
            out.extend((i, rule, msg) for msg in fn(rtype, props))
        out.extend((i, "prod-ami-pinned", msg) for msg in ami_pinned(rtype, props, stage=stage))
    for name, stack_rule in STACK_RULES.items():
        out.extend((v.index, name, v.message) for v in stack_rule(resources))
    return sorted(out, key=lambda t: t[0])


# --- helpers --------------------------------------------------------------------------------------------------


def _autoscaler_signals(resource_type: str, props: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(where, text)`` of every metric name, query and selector an autoscaler reads."""
    spec = _map(props.get("spec"))
    out: list[tuple[str, str]] = []
    if resource_type == SCALEDOBJECT:
        for i, trig in enumerate(_seq(spec.get("triggers"))):
            trig = _map(trig)
            meta = _map(trig.get("metadata"))
            texts = [str(trig.get("name", "")), str(trig.get("metricName", ""))] + [str(v) for v in meta.values()]
            out.append((f"trigger {i} ({trig.get('type', '?')})", " ".join(texts)))
        return out
    for i, metric in enumerate(_seq(spec.get("metrics"))):
        metric = _map(metric)
        mtype = str(metric.get("type", "?"))
        body = _map(metric.get(mtype[:1].lower() + mtype[1:]))  # Pods -> pods, ContainerResource -> containerResource
        ident = _map(body.get("metric"))
        texts = [str(ident.get("name", "")), str(body.get("name", "")), _flatten(ident.get("selector"))]
        out.append((f"metric {i} ({mtype})", " ".join(texts)))
    return out


def _requests_gpus(pod: Mapping[str, Any]) -> bool:
    spec = _map(pod.get("spec"))
    for c in [*_seq(spec.get("containers")), *_seq(spec.get("initContainers"))]:
        res = _map(_map(c).get("resources"))
        for part in ("limits", "requests"):
            qty = _map(res.get(part)).get(labels.GPU_RESOURCE)
            if qty is not None and str(qty) not in ("0", ""):
                return True
    return False


def _describe(resource_type: str, props: Mapping[str, Any]) -> str:
    meta = _map(props.get("metadata"))
    kind = resource_type.rsplit(":", 1)[-1]
    return f"{kind} {meta.get('namespace', 'default')}/{meta.get('name', '?')}"


def _flatten(value: Any) -> str:
    if isinstance(value, Mapping):
        return " ".join(f"{k} {_flatten(v)}" for k, v in value.items())
    if isinstance(value, Sequence) and not isinstance(value, str):
        return " ".join(_flatten(v) for v in value)
    return "" if value is None else str(value)


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _seq(value: Any) -> Sequence[Any]:
    return value if isinstance(value, Sequence) and not isinstance(value, str) else ()
