"""Pure builders for app-level autoscaling: KEDA ScaledObject, autoscaling/v2 HPA, chart values.

Why these signals (``docs/layer3-serving.md``): ``DCGM_FI_DEV_GPU_UTIL`` is a duty cycle (100% with 10 or 100 requests
in flight) and vLLM pre-allocates its KV cache (GPU memory is flat), so neither measures load. Each role scales on
``RoleSizing.signals``, one KEDA trigger (or HPA metric) each, and the HPA takes the largest replica count over them.
Each signal is an object of ``gpuscale.signals`` that renders its own trigger; this module adds the role's selector,
the activation thresholds, the front door's and the schedules' triggers, the fallback and the HPA behaviour.

With backend ``hpa``, prometheus-adapter serves one vLLM metric per pod, so the signals are single metrics (prompt
and output token rates, queue depth, KV use) whose targets assume the workload's token mix.

Every ``AverageValue`` query is a sum over the role's pods: the HPA then wants ``ceil(sum / target)`` replicas,
counting only pods that report (a pod still loading neither dilutes the average nor inflates it).

What KEDA v2.20.2 does with the emitted triggers (``gpuscale.signals.keda_model`` models it branch by branch):

* every query is total (0 for a ratio over no finished requests and for a role with no pods), because
  ``pkg/scalers/prometheus_scaler.go`` (L266-305) turns an empty result or NaN into an error with ``ignoreNullValues:
  false``; an erroring trigger makes the HPA refuse to scale down and keeps ``RequestScale`` from refreshing
  ``lastActiveTime`` (``pkg/scaling/executor/scale_scaledobjects.go`` L74-77), so an idle role would never shrink;
* ``fallback.replicas`` is at least 1: with 0, ``RequestScale`` skips its hold branch (L86) and scales a role that
  may scale to zero to zero during a Prometheus outage (L98-101).

Facts: ``research/upstream-facts.md`` section 3 (ScaledObject, 54-character name rule, prometheus trigger) and 7
(vLLM metric names, ``gpuscale.signals.vllm_metrics``); ``research/serving-facts.md`` section 4 (KEDA chart,
prometheus-adapter rules).
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import model_validator

from gpuscale import labels, upstream_bounds, versions
from gpuscale.guardrails import autoscaler_backend, autoscaler_metrics
from gpuscale.guardrails.warm_minimum import Criticality
from gpuscale.manifests import front_door
from gpuscale.manifests.namespaces import WorkloadNamespace
from gpuscale.manifests.vllm import WorkloadRef, common_labels, selector_labels, workload_name, workload_ref
from gpuscale.signals import promql, selection
from gpuscale.signals.base import RATE_WINDOW, ROLES, Signal, SingleMetric, adapter_metric_name, role_matchers
from gpuscale.signals.front_door_queue import FrontDoorQueue
from gpuscale.signals.gauge import VllmGauge
from gpuscale.signals.promql import Expr, Matcher
from gpuscale.signals.rate import VllmRate
from gpuscale.sizing import PlatformSizing, RoleSizing
from gpuscale.spec.base import Spec
from gpuscale.spec.model import Role, WakeSchedule
from gpuscale.spec.platform import PlatformSpec

KEDA_NAME_LIMIT = upstream_bounds.KEDA_SCALED_OBJECT_NAME_CHARS.high
"""KEDA names the generated HPA ``keda-hpa-<name>`` (<= 63 characters), so a ScaledObject name <= 54."""
SCALE_UP_PODS_PER_MINUTE = 2
SCALE_DOWN_PODS_PER_MINUTE = 1
FALLBACK_FAILURE_THRESHOLD = 3
"""KEDA falls back after more than this many failed polls of a trigger in a row (KEDA v2.20.2 ``pkg/fallback``:
``numberOfFailures > failureThreshold``), i.e. after about a minute at 15 s polling."""
FALLBACK_BEHAVIOR = "currentReplicasIfHigher"
"""While Prometheus cannot answer, hold the current replica count (never less than ``fallback_replicas``): a
restarting Prometheus must not read as zero load and scale down (KEDA v2.20.2 ``pkg/fallback/fallback.go`` L254-260;
the CRD's enum: static, currentReplicas, currentReplicasIfHigher, currentReplicasIfLower, scalingModifiers)."""
PROMETHEUS_VOLUME_GIB = 50
"""Prometheus TSDB volume: 15 days of vLLM, KEDA and KAI series for a few models, with room to spare."""
GP3_STORAGE_CLASS = "gp3"
"""StorageClass (EBS CSI, encrypted gp3) Prometheus' volume claims; EKS creates no default StorageClass on new clusters."""
PROMETHEUS_STACK_RELEASE = "kube-prometheus-stack"
"""Release and ``fullnameOverride`` of the Prometheus chart: its Service is ``kube-prometheus-stack-prometheus``."""

_INVALID_LABEL_CHARS = re.compile(r"[^a-zA-Z0-9_]")


class FrontDoorTrigger(Spec):
    """The model's front door as a KEDA trigger of one role: its queue (``gpuscale.manifests.front_door``)."""

    per_replica: int
    """Held requests per replica (the trigger's threshold); activation above 0: any held request wakes the role."""


class AutoscalerSettings(Spec):
    """One role's autoscaler: what it targets, what it reads, and the numbers sizing derived."""

    model: str
    """Model name (``gpuscale.io/model`` pod label)."""
    namespace: WorkloadNamespace
    """Namespace of the model's workloads."""
    role: Role
    """The single role this autoscaler owns."""
    criticality: Criticality
    """The model's ``slo.criticality``, labelled on the object (``gpuscale.io/criticality``) for the policy pack."""
    backend: Literal["keda", "hpa"] = "keda"
    """KEDA ScaledObject (default) or an autoscaling/v2 HPA on prometheus-adapter custom metrics."""
    paused: bool = False
    """KEDA only: freeze scaling (``autoscaling.keda.sh/paused``)."""
    scaling: RoleSizing
    """Signals with per-replica targets, min/max, stabilisation, polling, cooldown, activation (from sizing)."""
    target: WorkloadRef
    """The role's Deployment or LeaderWorkerSet (both have a scale subresource)."""
    prometheus_url: str
    """Prometheus the KEDA trigger queries (``observability.prometheus_url``)."""
    cold_start_s: float
    """Full cold start of a replica; KEDA waits this long after creation before it may scale to zero."""
    wake_schedule: WakeSchedule | None = None
    """KEDA only: hours the role is held awake (the wake-up signal of a role that scales to zero)."""
    front_door: FrontDoorTrigger | None = None
    """KEDA only: the model's front door, whose queue wakes the role from zero and adds replicas while it holds."""

    @model_validator(mode="after")
    def _one_role(self) -> AutoscalerSettings:
        if self.scaling.role != self.role:
            raise ValueError(f"scaling is sized for role {self.scaling.role!r}, not {self.role!r}")
        # the spec refuses these first; args built by hand meet the same rule (gpuscale.guardrails.autoscaler_backend)
        for _, message in autoscaler_backend.hpa_breaches(
            self.role, backend=self.backend, min_replicas=self.scaling.min_replicas, paused=self.paused,
            warm_schedule=bool(self.scaling.warm_schedule),
        ):
            raise ValueError(f"{self.model}/{self.role}: {message}")
        return self

    @classmethod
    def from_platform(cls, spec: PlatformSpec, sizing: PlatformSizing, model_name: str, role: Role) -> AutoscalerSettings:
        model = next(m for m in spec.models if m.name == model_name)
        ms = sizing.model(model_name)
        return cls(
            model=model.name,
            namespace=model.serving.namespace,
            role=role,
            criticality=model.slo.criticality,
            backend=model.autoscaling.backend,
            paused=model.autoscaling.paused,
            scaling=ms.role(role),
            target=workload_ref(model.name, role, ms.shape),
            prometheus_url=spec.observability.prometheus_url,
            cold_start_s=ms.cold_start.total_s,
            wake_schedule=model.autoscaling.role(role).wake_schedule,
            front_door=(
                FrontDoorTrigger(per_replica=ms.front_door.per_replica)
                if ms.front_door is not None and model.autoscaling.backend == "keda" else None
            ),
        )


def needs_keda(spec: PlatformSpec) -> bool:
    return any(m.autoscaling.backend == "keda" for m in spec.models)


def needs_prometheus_adapter(spec: PlatformSpec) -> bool:
    return any(m.autoscaling.backend == "hpa" for m in spec.models)


def fmt(x: float) -> str:
    """A KEDA threshold: a quoted float string (trigger metadata is map[string]string)."""
    return f"{x:g}"


# ---------------------------------------------------------------- PromQL


def prom_label(key: str) -> str:
    """The Prometheus label a pod label becomes through ``podTargetLabels`` (prometheus-operator ``sanitizeLabelName``)."""
    return _INVALID_LABEL_CHARS.sub("_", key)


MODEL_PROM_LABEL = prom_label(labels.MODEL_LABEL)
ROLE_PROM_LABEL = prom_label(labels.ROLE_LABEL)


def check_single_role(query: Expr | str) -> str:
    """Refuse a query that could select pods of more than one role (or a series with no role matcher at all: every
    selector must pin the same role); returns the role it selects. Reads the expression tree (a string is parsed)."""
    expr = promql.parse(query) if isinstance(query, str) else query
    roles = {(op, value) for leaf in expr.leaves() for name, op, value in leaf.matchers if name == ROLE_PROM_LABEL}
    unpinned = any(all(name != ROLE_PROM_LABEL for name, _, _ in leaf.matchers) for leaf in expr.leaves())
    # a composite query repeats the selector on every metric it reads: each must be the same single-role equality
    if unpinned or len(roles) != 1 or next(iter(roles))[0] != "=" or next(iter(roles))[1] not in ROLES:
        raise ValueError(
            f"query {expr.render()!r} does not select exactly one role with {ROLE_PROM_LABEL}=\"<role>\": an autoscaler over "
            "prefill and decode together scales the wrong role (they saturate on different signals: queue depth vs "
            "KV cache). Give each role its own autoscaler"
        )
    return str(next(iter(roles))[1])


def role_selector(namespace: str, model: str, role: str) -> tuple[Matcher, ...]:
    """The series of this model's pods of exactly one role (the PodMonitor's ``podTargetLabels``)."""
    return role_matchers(namespace, model, role, MODEL_PROM_LABEL, ROLE_PROM_LABEL)


def role_query(metric: str, namespace: str, model: str, role: str, kind: str = "gauge") -> str:
    """This model's pods of exactly one role: ``sum(<gauge>{ns, model, role})`` or, for a counter,
    ``sum(rate(<counter>{ns, model, role}[1m]))`` (per-pod rates, then summed: a pod restart resets only its own),
    each ``or on() vector(0)`` (a role with no pods reads 0, not an empty result)."""
    if role not in ROLES:
        raise ValueError(
            f"role {role!r}: an autoscaler query must select exactly one of {', '.join(ROLES)}; one query over "
            "prefill and decode together scales the wrong role. Give each role its own autoscaler"
        )
    for finding in autoscaler_metrics.banned_in(metric):  # the spec's rule (gpuscale.guardrails.autoscaler_metrics)
        raise ValueError(f"{metric}: {finding.message()}")
    selector = role_selector(namespace, model, role)
    sig: Signal
    if kind == "rate":
        if metric not in versions.VLLM_RATE_METRICS:
            raise ValueError(
                f"{metric}: not a vLLM counter an autoscaler may rate(); use one of {', '.join(sorted(versions.VLLM_RATE_METRICS))}"
            )
        sig = VllmRate(metric=metric, target=1.0, why="")
    elif kind == "gauge":
        if metric in versions.VLLM_RATE_METRICS:
            raise ValueError(f"{metric} is a counter: its sum only ever grows; scale on its rate (query_kind: rate)")
        if metric not in versions.VLLM_METRICS:
            raise ValueError(f"{metric}: not a vLLM gauge an autoscaler may target; use one of {', '.join(sorted(versions.VLLM_METRICS))}")
        sig = VllmGauge(metric=metric, target=1.0, why="")
    else:
        raise ValueError(f"query kind {kind!r}: use gauge or rate")
    expr = sig.expr(selector)
    check_single_role(expr)
    return expr.render()


def signal_query(sig: Signal, namespace: str, model: str, role: str) -> str:
    """The PromQL of one signal over exactly one role's pods."""
    if sig.single_metric:
        return role_query(sig.metric, namespace, model, role, sig.kind)
    expr = sig.expr(role_selector(namespace, model, role))
    check_single_role(expr)
    return expr.render()


def fallback_replicas(s: RoleSizing) -> int:
    """``fallback.replicas``: the warm minimum, and at least 1. KEDA v2.20.2 ``RequestScale`` holds a role while its
    triggers error only when this is not 0 (``pkg/scaling/executor/scale_scaledobjects.go`` L86); with 0 it falls
    through to ``scaleToZeroOrIdle`` (L98-101) and a Prometheus outage scales a role that may scale to zero to zero."""
    return max(s.min_replicas, 1)


# ---------------------------------------------------------------- shared pieces


def scaled_object_name(model: str, role: str) -> str:
    """``<model>-<role>``, shortened deterministically (prefix + hash) past KEDA's 54-character limit."""
    name = f"{model}-{role}"
    if len(name) <= KEDA_NAME_LIMIT:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: KEDA_NAME_LIMIT - 9].rstrip('-')}-{digest}"


BURST_SCALE_UP_PERIOD_S = 15
"""Burst mode's scale-up period: the HPA may act on every sync (Kubernetes' own default period)."""
BURST_SCALE_UP_PODS = 4


def hpa_behavior(s: RoleSizing) -> dict[str, Any]:
    """Scale up at once (a new replica takes minutes to arrive): in burst mode +100% or +4 pods every 15 s (a short
    window, like Knative's panic mode), otherwise +100% or +2 pods a minute; scale down one replica a minute, and only
    after the stabilisation window (longer than a cold start) so a brief dip never drops a replica we would re-buy."""
    period, pods = (BURST_SCALE_UP_PERIOD_S, BURST_SCALE_UP_PODS) if s.burst_mode else (60, SCALE_UP_PODS_PER_MINUTE)
    return {
        "scaleUp": {
            "stabilizationWindowSeconds": 0,
            "selectPolicy": "Max",
            "policies": [
                {"type": "Percent", "value": 100, "periodSeconds": period},
                {"type": "Pods", "value": pods, "periodSeconds": period},
            ],
        },
        "scaleDown": {
            "stabilizationWindowSeconds": s.scale_down_stabilization_s,
            "selectPolicy": "Min",
            "policies": [{"type": "Pods", "value": SCALE_DOWN_PODS_PER_MINUTE, "periodSeconds": 60}],
        },
    }


def scale_target_ref(target: WorkloadRef) -> dict[str, str]:
    return {"apiVersion": target.api_version, "kind": target.kind, "name": target.name}


def _meta(args: AutoscalerSettings, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": args.namespace,
        "labels": {
            **common_labels(args.model, args.role), **selector_labels(args.model, args.role),
            labels.CRITICALITY_LABEL: args.criticality,
        },
    }


def _check_target(args: AutoscalerSettings) -> None:
    if args.target.name != workload_name(args.model, args.role):
        raise ValueError(
            f"autoscaler of {args.model}/{args.role} targets {args.target.name}; it must own exactly that role's "
            f"workload {workload_name(args.model, args.role)} (one autoscaler per role)"
        )


# ---------------------------------------------------------------- KEDA


def front_door_signal(per_replica: int) -> FrontDoorQueue:
    """The door's queue as a signal of each role of its model: ``per_replica`` held requests per replica."""
    return FrontDoorQueue(
        metric=front_door.QUEUE_METRIC, target=float(per_replica), name=front_door.TRIGGER_NAME,
        why="requests the front door holds; one held request wakes the role",
    )


def keda_triggers(args: AutoscalerSettings) -> list[dict[str, Any]]:
    s = args.scaling
    triggers = []
    for sig in s.signals:
        query = signal_query(sig, args.namespace, args.model, args.role)  # refuses a query over more than one role
        activation = selection.activation(list(s.signals), s.activation_threshold, sig) if s.min_replicas == 0 else None
        triggers.append(sig.keda_trigger(args.prometheus_url, query, activation))
    if args.front_door is not None:
        # one held request wakes the role (activation above 0), whatever its warm minimum
        door = front_door_signal(args.front_door.per_replica)
        triggers.append(door.keda_trigger(args.prometheus_url, front_door.queue_query(args.model, args.namespace), 0.0))
    windows = ([("wake-schedule", args.wake_schedule)] if args.wake_schedule is not None else []) + [
        (f"warm-schedule-{i}", w) for i, w in enumerate(s.warm_schedule)
    ]
    for name, w in windows:
        triggers.append({
            "type": "cron",
            "name": name,
            "metadata": {"timezone": w.timezone, "start": w.start, "end": w.end, "desiredReplicas": str(w.replicas)},
        })
    return triggers


def scaled_object_body(args: AutoscalerSettings) -> dict[str, Any]:
    """A KEDA ScaledObject that owns one role's replicas."""
    _check_target(args)
    s = args.scaling
    meta = _meta(args, scaled_object_name(args.model, args.role))
    if args.paused:
        meta["annotations"] = {labels.KEDA_PAUSED_ANNOTATION: "true"}
    spec: dict[str, Any] = {
        "scaleTargetRef": scale_target_ref(args.target),
        "pollingInterval": s.polling_interval_s,
        "cooldownPeriod": s.cooldown_s,
        "minReplicaCount": s.min_replicas,
        "maxReplicaCount": s.max_replicas,
        "advanced": {"horizontalPodAutoscalerConfig": {"behavior": hpa_behavior(s)}},
        "fallback": {
            "failureThreshold": FALLBACK_FAILURE_THRESHOLD,
            "replicas": fallback_replicas(s),
            "behavior": FALLBACK_BEHAVIOR,
        },
        "triggers": keda_triggers(args),
    }
    if s.min_replicas == 0:
        # do not scale a fresh model to zero before it has even finished loading
        spec["initialCooldownPeriod"] = math.ceil(args.cold_start_s)
    return {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": meta, "spec": spec}


# ---------------------------------------------------------------- HPA (prometheus-adapter)


def hpa_body(args: AutoscalerSettings) -> dict[str, Any]:
    """An autoscaling/v2 HPA on per-pod custom metrics. The HPA reads only the pods its target selects (this role's),
    and the metric selector pins the role label as well."""
    _check_target(args)
    s = args.scaling
    single = [sig for sig in s.signals if isinstance(sig, SingleMetric)]
    if len(single) != len(s.signals):
        raise ValueError(
            f"{args.model}/{args.role}: backend hpa reads one vLLM metric per pod (prometheus-adapter); the composite "
            "load, backlog and latency signals need backend keda"
        )
    metrics = [sig.hpa_metric({ROLE_PROM_LABEL: args.role, MODEL_PROM_LABEL: args.model}) for sig in single]
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": _meta(args, workload_name(args.model, args.role)),
        "spec": {
            "scaleTargetRef": scale_target_ref(args.target),
            "minReplicas": s.min_replicas,
            "maxReplicas": s.max_replicas,
            "metrics": metrics,
            "behavior": hpa_behavior(s),
        },
    }


def scale_to_zero_warnings(args: AutoscalerSettings) -> list[str]:
    """What an operator must know about a role that may scale to zero (empty when min_replicas >= 1)."""
    if args.scaling.min_replicas > 0 or args.front_door is not None:
        return []  # a warm replica, or the front door's queue wakes the role
    if args.wake_schedule is not None:
        w = args.wake_schedule
        return [
            f"{args.model}/{args.role} scales to zero outside its wake schedule ({w.start} .. {w.end} {w.timezone}): "
            "requests arriving then wait for a manual `kubectl scale` or the next scheduled wake, plus a cold start"
        ]
    return [
        f"{args.model}/{args.role} may scale to zero: vLLM's own gauges disappear with the last pod, so the "
        f"activation threshold ({fmt(args.scaling.activation_threshold)}) only keeps a running replica awake. With no "
        "pod left, nothing queues a request; wake the role with `kubectl scale`, the autoscaling.keda.sh/paused-replicas "
        "annotation, or a request metric from the gateway in front of it"
    ]


def autoscaler_body(args: AutoscalerSettings) -> dict[str, Any]:
    return scaled_object_body(args) if args.backend == "keda" else hpa_body(args)


# ---------------------------------------------------------------- chart values


def keda_chart_values(servicemonitors: bool) -> dict[str, Any]:
    """KEDA 2.20: CRDs from the chart, two operator and metrics-server replicas (the external metrics API must not
    vanish during a node drain), its own metrics scraped when prometheus-operator is installed."""
    return {
        "crds": {"install": True},
        "operator": {"replicaCount": 2},
        "metricsServer": {"replicaCount": 2},
        "podDisruptionBudget": {"operator": {"minAvailable": 1}, "metricServer": {"minAvailable": 1}},
        "prometheus": {
            "operator": {"enabled": True, "serviceMonitor": {"enabled": servicemonitors}},
            "metricServer": {"enabled": True, "serviceMonitor": {"enabled": servicemonitors}},
        },
    }


def adapter_rules() -> list[dict[str, Any]]:
    """One Pods-metric rule per autoscalable vLLM gauge (serving-facts section 4), renamed ``vllm:x`` -> ``vllm_x``,
    and one per rate()-able counter, served per pod as ``vllm_x_per_second`` over the same 1 m window as KEDA's."""
    overrides = {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}
    rules = []
    for metric in sorted(versions.VLLM_METRICS):
        agg = "max" if metric == "vllm:kv_cache_usage_perc" else "sum"
        rules.append({
            "seriesQuery": f'{metric}{{namespace!="",pod!=""}}',
            "resources": {"overrides": overrides},
            "name": {"matches": f"^{metric}$", "as": adapter_metric_name(metric)},
            "metricsQuery": f"{agg}(<<.Series>>{{<<.LabelMatchers>>}}) by (<<.GroupBy>>)",
        })
    for metric in sorted(versions.VLLM_RATE_METRICS):
        rules.append({
            "seriesQuery": f'{metric}{{namespace!="",pod!=""}}',
            "resources": {"overrides": overrides},
            "name": {"matches": f"^{metric}$", "as": adapter_metric_name(metric, "rate")},
            "metricsQuery": f"sum(rate(<<.Series>>{{<<.LabelMatchers>>}}[{RATE_WINDOW}])) by (<<.GroupBy>>)",
        })
    return rules


def prometheus_adapter_values(prometheus_url: str) -> dict[str, Any]:
    """prometheus-adapter serves only ``custom.metrics.k8s.io``: ``external: []`` leaves the external metrics API to
    KEDA (both claim ``v1beta1.external.metrics.k8s.io``), ``resource: {}`` leaves ``metrics.k8s.io`` to metrics-server."""
    parts = urlsplit(prometheus_url)
    if not parts.scheme or not parts.hostname:
        raise ValueError(f"observability.prometheus_url {prometheus_url!r} is not an http(s) URL")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return {
        "prometheus": {"url": f"{parts.scheme}://{parts.hostname}", "port": port, "path": parts.path.rstrip("/")},
        "rules": {"default": False, "custom": adapter_rules(), "external": [], "resource": {}},
        "replicas": 2,
        "podDisruptionBudget": {"enabled": True, "maxUnavailable": 1},
    }


def prometheus_storage_class_body() -> dict[str, Any]:
    """Encrypted gp3 EBS volumes through the EBS CSI driver, bound where the pod lands (EBS volumes are zonal)."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": GP3_STORAGE_CLASS, "labels": {labels.MANAGED_BY_LABEL: labels.MANAGED_BY}},
        "provisioner": "ebs.csi.aws.com",
        "parameters": {"type": "gp3", "encrypted": "true"},
        "volumeBindingMode": "WaitForFirstConsumer",
        "reclaimPolicy": "Delete",
        "allowVolumeExpansion": True,
    }


def prometheus_stack_values(scrape_interval_s: int) -> dict[str, Any]:
    """kube-prometheus-stack: Prometheus picks up every PodMonitor/ServiceMonitor/PrometheusRule in every namespace
    (the chart's default only selects its own release's), which is how the vLLM PodMonitors are found.

    Every autoscaler reads it, so it runs on on-demand capacity (never a spot reclaim) with its TSDB on a persistent
    volume: a restart (consolidation of its node, an upgrade) loses neither history nor the rate() windows for long, and
    the KEDA fallback holds replica counts meanwhile."""
    return {
        "fullnameOverride": PROMETHEUS_STACK_RELEASE,
        "prometheus": {
            "prometheusSpec": {
                "scrapeInterval": f"{scrape_interval_s}s",
                "podMonitorSelectorNilUsesHelmValues": False,
                "serviceMonitorSelectorNilUsesHelmValues": False,
                "ruleSelectorNilUsesHelmValues": False,
                "podMonitorSelector": {},
                "podMonitorNamespaceSelector": {},
                "serviceMonitorSelector": {},
                "serviceMonitorNamespaceSelector": {},
                "retention": "15d",
                "nodeSelector": {labels.KARPENTER_CAPACITY_TYPE_LABEL: "on-demand"},
                "storageSpec": {
                    "volumeClaimTemplate": {
                        "spec": {
                            "storageClassName": GP3_STORAGE_CLASS,
                            "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": f"{PROMETHEUS_VOLUME_GIB}Gi"}},
                        }
                    }
                },
            }
        },
    }


def prometheus_stack_url(namespace: str) -> str:
    """The in-cluster URL of the chart's Prometheus (the ``observability.prometheus_url`` default for ``monitoring``)."""
    return f"http://{PROMETHEUS_STACK_RELEASE}-prometheus.{namespace}.svc:9090"
