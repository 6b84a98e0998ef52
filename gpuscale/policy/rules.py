"""gpuscale's guardrails as pure rules over a resource's type token and properties (the Pulumi wire shape).

Each rule returns violation messages that name the trap and the fix; an empty list means compliant. The same
functions back the CrossGuard pack in ``policy/`` (for programs that import our components or write their own
manifests) and the offline check ``gpuscale synth`` prints, so ``pulumi preview --policy-pack policy`` and the
PR synth agree. Rules read plain mappings and sequences, so they work on recorded mock inputs, on hand-written
dicts and on the policy SDK's property proxies alike.
"""

from __future__ import annotations

import fnmatch
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuscale import labels, versions
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

MIN_GPU_CONSOLIDATE_AFTER_S = 3600.0
"""A GPU node must stay empty this long before Karpenter removes it (longer than any model's cold start)."""

DEFAULT_PROD_STACKS: tuple[str, ...] = ("prod", "production", "prod-*", "*-prod", "*.prod", "*/prod")
"""Stack-name patterns treated as production when the pack has no ``prodStacks`` config."""

GPU_COUNT_LABEL = "karpenter.k8s.aws/instance-gpu-count"
GPU_MEMORY_LABEL = "karpenter.k8s.aws/instance-gpu-memory"
GPU_NAME_LABELS = frozenset({"karpenter.k8s.aws/instance-gpu-name", "karpenter.k8s.aws/instance-gpu-manufacturer"})
"""Karpenter sets these only on instance types with GPUs (``DoesNotExist`` on the others)."""
_NUMERIC_GPU_LABELS = frozenset({GPU_COUNT_LABEL, GPU_MEMORY_LABEL})
_BY_TYPE_LABELS = frozenset({"node.kubernetes.io/instance-type", "karpenter.k8s.aws/instance-family"})
_GPU_INSTANCE = re.compile(r"^(p\d|g\d|gr\d)")
"""EC2 GPU families (p3..p6, g4dn..g7e, gr6); Graviton CPU types carry the ``g`` as a suffix (m7g), not a prefix."""
_GPU_CATEGORIES = frozenset({"p", "g", "gr"})

_BANNED_METRICS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"DCGM_FI_DEV_GPU_UTIL|DCGM_FI_DEV_MEM_COPY_UTIL", re.I),
     "GPU utilisation is a duty cycle: it reads ~100% with 10 or 100 requests in flight, so the autoscaler never "
     "sees load grow"),
    (re.compile(r"DCGM_FI_PROF_[A-Z0-9_]+", re.I),
     "DCGM profiling counters (SM/tensor/DRAM activity) saturate with batch size, not with queued requests"),
    (re.compile(r"(DCGM_FI_DEV_)?FB_(USED|FREE)", re.I),
     "vLLM pre-allocates the KV cache at start-up, so GPU memory is flat: the autoscaler scales up once and "
     "never down"),
)
_FIX = (
    "scale prefill on rate(vllm:prompt_tokens_total) and vllm:num_requests_waiting, decode on "
    "vllm:kv_cache_usage_perc and rate(vllm:generation_tokens_total)"
)


@dataclass(frozen=True)
class StackViolation:
    """A violation of a rule over the whole stack, attributed to one resource (its index in the input)."""

    index: int
    message: str


# --- GPU NodePool consolidation -------------------------------------------------------------------------------


def nodepool_selects_gpus(spec: Mapping[str, Any]) -> bool:
    """Whether a NodePool ``spec`` launches GPU nodes: a requirement that admits GPU instance types (any operator:
    ``In``, ``NotIn ["0"]``, ``Exists``, ``Gt``/``Gte``/``Lt``/``Lte`` on the ``instance-gpu-*`` labels; GPU instance
    types, families or categories), the GPU taint, the ``nvidia.com/gpu.present`` node label, or a GPU limit."""
    template = _map(spec.get("template"))
    template_spec = _map(template.get("spec"))
    for req in _seq(template_spec.get("requirements")):
        req = _map(req)
        values = [str(v) for v in _seq(req.get("values"))]
        if requirement_admits_gpus(str(req.get("key", "")), str(req.get("operator", "")), values):
            return True
    if labels.GPU_TAINT_KEY in [_map(t).get("key") for t in _seq(template_spec.get("taints"))]:
        return True
    if str(_map(_map(template.get("metadata")).get("labels")).get(labels.GPU_PRESENT_LABEL, "")).lower() == "true":
        return True
    return labels.GPU_RESOURCE in _map(spec.get("limits"))


def requirement_admits_gpus(key: str, op: str, values: Sequence[str]) -> bool:
    """Whether one NodePool requirement lets Karpenter pick a GPU instance type for it.

    The ``instance-gpu-*`` labels exist only on GPU types, so ``Exists``, ``NotIn`` and ``In`` any GPU value admit
    GPUs and ``DoesNotExist`` does not; numeric operators admit GPUs when their range holds a positive count or size.
    By type, family or category: any GPU one listed with ``In`` (a mixed list still launches GPU nodes).
    """
    if key in _NUMERIC_GPU_LABELS or key in GPU_NAME_LABELS:
        if op in ("Exists", "NotIn"):
            return True
        if op == "In":
            return any(key in GPU_NAME_LABELS or _positive_or_unknown(v) for v in values)
        if op in ("Gt", "Gte", "Lt", "Lte") and key in _NUMERIC_GPU_LABELS and values:
            return _range_has_positive(op, values[0])
        return False
    if key == labels.GPU_PRESENT_LABEL:
        return op == "Exists" or (op == "In" and "true" in [v.lower() for v in values])
    if op != "In":
        return False
    if key in _BY_TYPE_LABELS:
        return any(_GPU_INSTANCE.match(v) for v in values)
    if key == "karpenter.k8s.aws/instance-category":
        return bool(_GPU_CATEGORIES & set(values))
    return False


def _positive_or_unknown(value: str) -> bool:
    try:
        return int(value) > 0
    except ValueError:
        return True  # not a number Karpenter could match: assume the worst


def _range_has_positive(op: str, bound: str) -> bool:
    try:
        n = int(bound)
    except ValueError:
        return True
    # Gt/Gte always include positive values; Lt n admits 1..n-1, Lte n admits 1..n
    return op in ("Gt", "Gte") or (op == "Lt" and n > 1) or (op == "Lte" and n >= 1)


def gpu_nodepool_consolidation(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    """A GPU NodePool must be ``WhenEmpty`` with ``consolidateAfter`` >= 1h, unless it carries the acknowledgement."""
    if resource_type != NODEPOOL:
        return []
    spec = _map(props.get("spec"))
    if not nodepool_selects_gpus(spec) or spec.get("replicas") is not None:  # static pools never consolidate
        return []
    meta = _map(props.get("metadata"))
    ack = labels.ACK_UNSAFE_CONSOLIDATION_ANNOTATION
    if str(_map(meta.get("annotations")).get(ack, "")).lower() == "true" or str(
        _map(meta.get("labels")).get(ack, "")
    ).lower() == "true":
        return []
    name = meta.get("name", "?")
    disruption = _map(spec.get("disruption"))
    out: list[str] = []
    policy = disruption.get("consolidationPolicy", "WhenEmptyOrUnderutilized")  # the CRD default
    if policy != "WhenEmpty":
        out.append(
            f"GPU NodePool {name}: consolidationPolicy {policy} lets Karpenter evict in-flight inference to repack "
            "nodes; every evicted replica drops its requests and reloads the model (minutes). Use WhenEmpty with "
            f"consolidateAfter: 1h, or annotate the NodePool {ack}: \"true\" to accept it"
        )
    after = str(disruption.get("consolidateAfter", "0s"))  # the CRD default
    seconds = parse_duration(after)
    if seconds is None:
        out.append(f"GPU NodePool {name}: consolidateAfter {after!r} is not a Karpenter duration (e.g. 1h, 90m, Never)")
    elif seconds < MIN_GPU_CONSOLIDATE_AFTER_S:
        out.append(
            f"GPU NodePool {name}: consolidateAfter {after} is shorter than 1h; a GPU node emptied by a brief dip is "
            "gone when traffic returns, and the next replica pays a full cold start (node + image + weights). "
            f"Use consolidateAfter: 1h, or annotate the NodePool {ack}: \"true\""
        )
    return out


# --- autoscaler metric and scope ------------------------------------------------------------------------------


def autoscaler_metric(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    """No ScaledObject trigger or HPA metric on DCGM duty cycle, profiling counters, GPU memory or removed vLLM names."""
    if resource_type not in AUTOSCALER_TYPES:
        return []
    name = _map(props.get("metadata")).get("name", "?")
    kind = "ScaledObject" if resource_type == SCALEDOBJECT else "HorizontalPodAutoscaler"
    out: list[str] = []
    for where, text in _autoscaler_signals(resource_type, props):
        for pattern, why in _BANNED_METRICS:
            m = pattern.search(text)
            if m:
                out.append(f"{kind} {name} {where} uses {m.group(0)}: {why}; {_FIX}")
                break
        for removed, fix in sorted(versions.VLLM_REMOVED_METRICS.items()):
            bare = removed.split(":", 1)[1]
            if re.search(rf"vllm[:_]{re.escape(bare)}\b", text):
                out.append(
                    f"{kind} {name} {where} uses {removed}, which vLLM {versions.VLLM.tag} no longer exposes "
                    f"(the autoscaler would read nothing and never scale): {fix}"
                )
    return out


def autoscaler_role_scope(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    """No autoscaler whose query or selector spans prefill and decode: they saturate on different signals."""
    if resource_type not in AUTOSCALER_TYPES:
        return []
    name = _map(props.get("metadata")).get("name", "?")
    out: list[str] = []
    for where, text in _autoscaler_signals(resource_type, props):
        if re.search(r"\bprefill\b", text) and re.search(r"\bdecode\b", text):
            out.append(
                f"autoscaler {name} {where} selects both prefill and decode; prefill saturates on queue depth and "
                "decode on KV-cache use, so one signal over both scales the wrong role. Use one autoscaler per "
                f"role, each selecting only its {labels.ROLE_LABEL} pods"
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


def ami_pinned(resource_type: str, props: Mapping[str, Any], *, prod: bool) -> list[str]:
    """In production an EC2NodeClass must pin its AMI: ``@latest`` drifts every node whenever AWS ships an AMI."""
    if resource_type != EC2NODECLASS or not prod:
        return []
    name = _map(props.get("metadata")).get("name", "?")
    out: list[str] = []
    for i, term in enumerate(_seq(_map(props.get("spec")).get("amiSelectorTerms"))):
        alias = str(_map(term).get("alias", ""))
        ssm = str(_map(term).get("ssmParameter", ""))
        if "/recommended/" in ssm or ssm.endswith("/latest") or "/latest/" in ssm:
            out.append(
                f"EC2NodeClass {name}: amiSelectorTerms[{i}].ssmParameter {ssm} follows the newest AMI, so every node "
                "drifts whenever AWS publishes one. Pin a release alias, e.g. "
                f"{versions.EKS_AL2023_AMI_ALIAS}, and roll it forward in a reviewed change"
            )
        if alias.endswith("@latest"):
            out.append(
                f"EC2NodeClass {name}: amiSelectorTerms[{i}].alias {alias} in production replaces every node (GPU "
                "nodes included) each time AWS publishes an AMI. Pin a release, e.g. "
                f"{versions.EKS_AL2023_AMI_ALIAS}, and roll it forward in a reviewed change"
            )
    return out


def is_prod_stack(stack: str, patterns: Iterable[str] = DEFAULT_PROD_STACKS) -> bool:
    """Whether a stack name matches one of the production patterns (fnmatch, case-insensitive)."""
    return any(fnmatch.fnmatch(stack.lower(), p.lower()) for p in patterns)


def stack_from_urn(urn: str) -> str:
    """The stack name in ``urn:pulumi:<stack>::<project>::...``."""
    head = urn.split("::", 1)[0]
    return head.split(":", 2)[2] if head.count(":") >= 2 else ""


# --- all rules at once ----------------------------------------------------------------------------------------

RESOURCE_RULES = {
    "gpu-nodepool-consolidation": gpu_nodepool_consolidation,
    "autoscaler-metric": autoscaler_metric,
    "autoscaler-role-scope": autoscaler_role_scope,
    "gang-scheduling-multi-pod-gpu": gang_scheduling,
}
"""Resource rules that need nothing but the resource (``ami_pinned`` also needs to know the stage)."""


def check_resources(resources: Sequence[tuple[str, Mapping[str, Any]]], *, prod: bool) -> list[tuple[int, str, str]]:
    """Every rule over every resource: ``(resource index, rule name, message)``, in input order."""
    out: list[tuple[int, str, str]] = []
    for i, (rtype, props) in enumerate(resources):
        for rule, fn in RESOURCE_RULES.items():
            out.extend((i, rule, msg) for msg in fn(rtype, props))
        out.extend((i, "prod-ami-pinned", msg) for msg in ami_pinned(rtype, props, prod=prod))
    out.extend((v.index, "one-autoscaler-per-workload", v.message) for v in one_autoscaler_per_workload(resources))
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
