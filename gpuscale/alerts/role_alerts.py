"""The alerts of one serving role of one model: SLO burn, KV saturation, cold start, autoscaler input, replica ceiling.

Every number comes from the spec or the sizing (``AlertRule.thresholds`` names each source); every vLLM query over the
role's pods uses the selector its autoscaler uses (``autoscaling.role_selector``), and the KV alert reads the KV signal
object's own query, so the alert and the trigger can never disagree.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from gpuscale import sizing as sizing_mod
from gpuscale.alerts import burn_rate
from gpuscale.alerts import exporter_metrics as m
from gpuscale.alerts.rule import AlertRule, Severity, camel, plan_runbook
from gpuscale.manifests import autoscaling
from gpuscale.manifests.vllm import workload_name
from gpuscale.signals import vllm_metrics
from gpuscale.signals.base import RATE_WINDOW, ROLES, SingleMetric, adapter_metric_name
from gpuscale.signals.gauge import VllmGauge
from gpuscale.signals.promql import Matcher
from gpuscale.sizing import ModelSizing, RoleSizing
from gpuscale.spec.model import ModelDeployment, Role
from gpuscale.spec.platform import PlatformSpec

LATENCY_ROLES: dict[str, tuple[Role, ...]] = {
    vllm_metrics.TIME_TO_FIRST_TOKEN: ("aggregated", "prefill"),
    vllm_metrics.INTER_TOKEN_LATENCY: ("aggregated", "decode"),
}
"""Where each latency is observed: the first token on the role that runs the prompt, inter-token gaps on the role that
decodes. With P/D the user's TTFT is the prefill pod's plus the KV transfer and the decode pod's first step; the prefill
pod's histogram is the part the prefill autoscaler controls."""


def _sel_text(sel: tuple[Matcher, ...]) -> str:
    return ",".join(f'{k}{op}"{v}"' for k, op, v in sel)


def hpa_name(model: str, role: Role, backend: str) -> str:
    """The HPA that scales the role: KEDA's ``keda-hpa-<ScaledObject>``, or gpuscale's own (backend ``hpa``)."""
    return (m.KEDA_HPA_PREFIX + autoscaling.scaled_object_name(model, role) if backend == "keda"
            else workload_name(model, role))


class RoleContext:
    """What every alert of one role reads: the model, its sizing, the role's sizing and selector, and labels."""

    def __init__(self, spec: PlatformSpec, sizing: sizing_mod.PlatformSizing, model_name: str, role: Role) -> None:
        self.spec = spec
        self.model: ModelDeployment = next(x for x in spec.models if x.name == model_name)
        self.ms: ModelSizing = sizing.model(model_name)
        self.rs: RoleSizing = self.ms.role(role)
        self.role = role
        self.namespace = self.model.serving.namespace
        self.sel = autoscaling.role_selector(self.namespace, self.model.name, role)
        self.labels = {"model": self.model.name, "role": role, "namespace": self.namespace}
        self.prefix = f"{camel(self.model.name)}{camel(role)}"
        """Alert names carry model and role: one alert per model and role in Alertmanager's grouping."""
        self.pods = f'namespace="{self.namespace}",pod=~"{workload_name(self.model.name, role)}-.+"'
        """kube-state-metrics' series of the role's pods (their names start with the workload's)."""
        self.hpa = hpa_name(self.model.name, role, self.model.autoscaling.backend)

    def rule(self, name: str, *, expr: str, for_s: int, severity: Severity, summary: str, description: str,
             runbook: str, thresholds: Mapping[str, float]) -> AlertRule:
        return AlertRule(alert=f"{self.prefix}{name}", labels=self.labels, expr=expr, for_s=for_s, severity=severity,
                         summary=summary, description=description, runbook=runbook, thresholds=dict(thresholds))


def kv_signal(ctx: RoleContext) -> VllmGauge:
    """The role's KV signal (decode and aggregated roles scale on it), or the same gauge at the KV ceiling."""
    kv = next((s for s in ctx.rs.signals if isinstance(s, VllmGauge) and s.metric == vllm_metrics.KV_CACHE), None)
    return kv or VllmGauge(metric=vllm_metrics.KV_CACHE, target=sizing_mod.KV_TARGET_UTILISATION, why="")


def kv_per_replica(ctx: RoleContext) -> str:
    """Mean KV use per replica: the KV signal's own query over the role's pods, divided by the pods reporting."""
    return f"({kv_signal(ctx).expr(ctx.sel).render()}) / count({vllm_metrics.KV_CACHE}{{{_sel_text(ctx.sel)}}})"


def hpa_series(ctx: RoleContext, metric: str) -> str:
    return f'{metric}{{namespace="{ctx.namespace}",horizontalpodautoscaler="{ctx.hpa}"}}'


def desired_replicas(ctx: RoleContext) -> str:
    """The replicas the role's HPA wants (KEDA's HPA with backend keda)."""
    return hpa_series(ctx, m.KSM_HPA_DESIRED)


def ready_replicas(ctx: RoleContext) -> str:
    """Ready replicas: the role's Ready pods over the pods of one replica (a LeaderWorkerSet group has several)."""
    ready = f'sum({m.KSM_POD_READY}{{{ctx.pods},condition="true"}})'
    return ready if ctx.ms.shape.pods == 1 else f"{ready} / {ctx.ms.shape.pods}"


def unready_pod_age(ctx: RoleContext) -> str:
    """Seconds since creation of each of the role's pods that is not Ready yet (none once all are Ready)."""
    return (f"(time() - {m.KSM_POD_CREATED}{{{ctx.pods}}}) "
            f'and on(namespace, pod) ({m.KSM_POD_READY}{{{ctx.pods},condition="true"}} == 0)')


def latency_burn(ctx: RoleContext, histogram: str, target_s: float, target_field: str) -> list[AlertRule]:
    """A page for a fast burn and a ticket for a slow one, when this role observes the latency."""
    if ctx.role not in LATENCY_ROLES[histogram]:
        return []
    budget = 1.0 - ctx.model.slo.goodput_target
    bound, exact = burn_rate.good_bound(histogram, target_s)
    short = "Ttft" if histogram == vllm_metrics.TIME_TO_FIRST_TOKEN else "Itl"
    counted = (f"observations up to the {bound:g} s bucket count as good" +
               ("" if exact else f" (vLLM has no bucket at {target_s:g} s: the nearest bound {'under' if bound < target_s else 'over'} it)"))
    thresholds = {f"slo.{target_field}": target_s, "slo.goodput_target": ctx.model.slo.goodput_target}
    rules = []
    for severity, windows, kind in (("critical", burn_rate.PAGE, "FastBurn"), ("warning", burn_rate.TICKET, "SlowBurn")):
        sev: Severity = "critical" if severity == "critical" else "warning"
        spans = ", ".join(f"{w.long_s // 3600} h and {w.short_s // 60} min at {w.rate:g}x" for w in windows)
        rules.append(ctx.rule(
            f"{short}Slo{kind}",
            expr=burn_rate.burn_expr(histogram, ctx.sel, bound, budget, windows),
            for_s=0, severity=sev,
            summary=f"{ctx.model.name}/{ctx.role}: {short.upper()} above {target_s:g} s burns the error budget ({kind})",
            description=(
                f"More than the budget's share ({budget:.4g} = 1 - goodput_target {ctx.model.slo.goodput_target:g}) of "
                f"{histogram} is above the p99 target, burning over {spans}; {counted}."
            ),
            runbook=plan_runbook("replicas", "Check the role's signals against their targets and whether replicas are "
                                 "at max_replicas (the limits, not the policy, bind)"),
            thresholds=thresholds,
        ))
    return rules


def kv_saturated(ctx: RoleContext) -> list[AlertRule]:
    """The role's mean KV use per replica (what its KV signal's trigger compares with its target) above the highest
    target sizing allows, for longer than a new replica takes to come up: scaling is not relieving it."""
    ceiling = sizing_mod.KV_TARGET_UTILISATION
    per_replica = kv_per_replica(ctx)
    cold = ctx.ms.cold_start.total_s
    return [ctx.rule(
        "KvCacheSaturated",
        expr=f"{per_replica} > {ceiling:g}",
        for_s=math.ceil(cold), severity="warning",
        summary=f"{ctx.model.name}/{ctx.role}: KV cache above {ceiling:.0%} per replica for longer than a cold start",
        description=(
            f"Mean {vllm_metrics.KV_CACHE} per replica has stayed above {ceiling:g} (sizing.KV_TARGET_UTILISATION) for "
            f"{cold:.0f} s (the sized cold start): requests preempt and ITL grows; more replicas are not arriving."
        ),
        runbook=plan_runbook("replicas", "Is the role at max_replicas? Then raise the limits that bind (plan section 3)"),
        thresholds={"sizing.KV_TARGET_UTILISATION": ceiling, "cold_start.total_s": cold},
    )]


def cold_start_slow(ctx: RoleContext) -> list[AlertRule]:
    """A pod of the role not Ready longer after its creation than the sized cold start, stage by stage."""
    cold = ctx.ms.cold_start.total_s
    stages = ", ".join(f"{name} {s:.0f} s" for name, s in ctx.ms.cold_start.stages())
    return [ctx.rule(
        "ColdStartSlow",
        expr=f"({unready_pod_age(ctx)}) > {cold:.6g}",
        for_s=0, severity="warning",
        summary=f"{ctx.model.name}/{ctx.role}: a replica is not Ready {cold:.0f} s after creation (the sized cold start)",
        description=f"Sized stage by stage: {stages}. The pod is slower than that; find the stage that is late.",
        runbook=plan_runbook("cold_start", "A pod still Pending: run gpuscale doctor (docs/doctor.md)"),
        thresholds={"cold_start.total_s": cold},
    )]


def autoscaler_input(ctx: RoleContext) -> list[AlertRule]:
    return keda_input(ctx) if ctx.model.autoscaling.backend == "keda" else hpa_input(ctx)


def _adapter_series(ctx: RoleContext, sig: SingleMetric) -> str:
    """The per-pod series prometheus-adapter's rule for the signal reads (``autoscaling.adapter_rules``: the gauge,
    or the counter's ``rate()`` over the signals' window), over the role's pods."""
    series = f"{sig.metric}{{{_sel_text(ctx.sel)}}}"
    return f"rate({series}[{RATE_WINDOW}])" if sig.kind == "rate" else series


def hpa_input(ctx: RoleContext) -> list[AlertRule]:
    """Backend ``hpa``: the HPA reads each signal through prometheus-adapter's custom metrics API. prometheus-adapter
    v0.12.0 exposes no per-metric error counter (its only own metric is
    ``prometheus_adapter_prometheus_client_request_duration_seconds``, ``pkg/client/metrics/metrics.go`` L38-47), so
    what fails is read where it shows: the HPA's ``ScalingActive`` condition (kube-state-metrics), the adapter's
    inputs turned NaN, and Ready pods without a series (the adapter skips a pod with no value,
    ``pkg/custom-provider/provider.go`` ``metricsFor`` L124-127, and the HPA then counts it at 0 when scaling up, at
    the target when scaling down, Kubernetes v1.36.3 ``pkg/controller/podautoscaler/replica_calculator.go`` L226-236:
    the role follows its load late). The vLLM series carry ``namespace`` and ``pod`` from the PodMonitor's scrape
    config (prometheus-operator v0.93.0 ``pkg/prometheus/promcfg.go`` L1600-1614), which is what the stale rule joins
    on with kube-state-metrics' ``kube_pod_status_ready``."""
    signals = [sig for sig in ctx.rs.signals if isinstance(sig, SingleMetric)]
    failures = autoscaling.FALLBACK_FAILURE_THRESHOLD
    sync = m.HPA_SYNC_PERIOD_S
    window = max((failures + 1) * sync, 4 * ctx.spec.observability.scrape_interval_s)
    names = ", ".join(adapter_metric_name(s.metric, s.kind) for s in signals)
    thresholds = {"autoscaling.FALLBACK_FAILURE_THRESHOLD": failures, "exporter_metrics.HPA_SYNC_PERIOD_S": sync}
    condition = (f'{m.KSM_HPA_CONDITION}{{namespace="{ctx.namespace}",horizontalpodautoscaler="{ctx.hpa}",'
                 f'condition="{m.HPA_SCALING_ACTIVE}",status="false"}}')
    nan = " or ".join(f"({x} != {x})" for x in (_adapter_series(ctx, s) for s in signals))
    ready = f'({m.KSM_POD_READY}{{{ctx.pods},condition="true"}} == 1)'
    stale = " or ".join(f"({ready} unless on(namespace, pod) {s.metric}{{{_sel_text(ctx.sel)}}})" for s in signals)
    return [
        ctx.rule(
            "AutoscalerInputFailing",
            expr=f"{condition} == 1",
            for_s=failures * sync, severity="critical",
            summary=f"{ctx.model.name}/{ctx.role}: HPA {ctx.hpa} cannot read its custom metrics; it holds the replica count",
            description=(
                f"ScalingActive has been False for {failures * sync} s ({failures} syncs of {sync} s): the custom "
                f"metrics API (prometheus-adapter) answered no value for {names}, for all of them or for one while the "
                "others would scale down. kubectl describe hpa names the reason (FailedGetPodsMetric: the adapter or "
                "Prometheus; ScalingDisabled: the workload was scaled to 0 by hand)."
            ),
            runbook=plan_runbook("replicas", "kubectl get apiservice v1beta1.custom.metrics.k8s.io; kubectl get --raw "
                                 f"/apis/custom.metrics.k8s.io/v1beta1/namespaces/{ctx.namespace}/pods/*/<metric>"),
            thresholds=thresholds,
        ),
        ctx.rule(
            "AutoscalerInputNaN",
            expr=nan,
            for_s=failures * sync, severity="critical",
            summary=f"{ctx.model.name}/{ctx.role}: a metric the HPA reads is NaN, which prometheus-adapter serves as 0",
            description=(
                f"A pod's series behind {names} has read NaN for {failures * sync} s. prometheus-adapter v0.12.0 "
                "turns NaN into 0 without an error (pkg/custom-provider/provider.go L89-92), so the HPA sees an "
                "idle pod and may scale the role down while it is loaded."
            ),
            runbook=plan_runbook("replicas"),
            thresholds=thresholds,
        ),
        ctx.rule(
            "AutoscalerInputStale",
            expr=stale,
            for_s=window, severity="warning",
            summary=f"{ctx.model.name}/{ctx.role}: a Ready pod has no series for a metric its HPA reads",
            description=(
                f"For {window} s a Ready pod of the role has had no series of {names} (its scrape fails or the "
                "PodMonitor misses it). prometheus-adapter leaves the pod out of its answer and the HPA counts it "
                "at 0 when scaling up: the role scales up late."
            ),
            runbook=plan_runbook("replicas", "Check the pod's scrape target in Prometheus (Status > Targets)"),
            thresholds={**thresholds, "observability.scrape_interval_s": ctx.spec.observability.scrape_interval_s},
        ),
    ]


def keda_input(ctx: RoleContext) -> list[AlertRule]:
    """KEDA cannot read a trigger (errors or an empty answer) or reads NaN: the fallback holds the replica count, so
    the role no longer follows its load."""
    so = autoscaling.scaled_object_name(ctx.model.name, ctx.role)
    poll = ctx.rs.polling_interval_s
    failures = autoscaling.FALLBACK_FAILURE_THRESHOLD
    window = max((failures + 1) * poll, 4 * ctx.spec.observability.scrape_interval_s)
    # KEDA creates the empty-response counter on its first increment: each sum answers 0 when it has no series, or
    # the sum of the two would be empty whenever one of them is
    errors = (f'(sum(increase({m.KEDA_SCALER_ERRORS}{{namespace="{ctx.namespace}",scaledObject="{so}"}}[{window}s])) '
              f'or on() vector(0)) + (sum(increase({m.KEDA_EMPTY_UPSTREAM}{{namespace="{ctx.namespace}",'
              f'scaledResource="{so}"}}[{window}s])) or on() vector(0))')
    value = f'{m.KEDA_METRIC_VALUE}{{namespace="{ctx.namespace}",scaledObject="{so}"}}'
    thresholds = {"autoscaling.FALLBACK_FAILURE_THRESHOLD": failures, "role.polling_interval_s": poll}
    return [
        ctx.rule(
            "AutoscalerInputFailing",
            expr=f"{errors} > {failures}",
            for_s=0, severity="critical",
            summary=f"{ctx.model.name}/{ctx.role}: KEDA fails to read its triggers; the fallback holds the replica count",
            description=(
                f"More than {failures} failed or empty polls of ScaledObject {so} within {window} s (polling every "
                f"{poll} s): KEDA's fallback (failureThreshold {failures}) now holds the count; check Prometheus and "
                "the trigger queries."
            ),
            runbook=plan_runbook("replicas"),
            thresholds=thresholds,
        ),
        ctx.rule(
            "AutoscalerInputNaN",
            expr=f"{value} != {value}",
            for_s=failures * poll, severity="critical",
            summary=f"{ctx.model.name}/{ctx.role}: a trigger of {so} reads NaN",
            description=(f"A trigger query answers NaN for {failures * poll} s (its failureThreshold x pollingInterval): "
                         "every gpuscale query is total, so a NaN means a changed metric or a broken query."),
            runbook=plan_runbook("replicas"),
            thresholds=thresholds,
        ),
    ]


def pinned_at_max(ctx: RoleContext) -> list[AlertRule]:
    """Desired replicas at max_replicas for longer than the scale-down window: the limits, not the policy, bind."""
    rs = ctx.rs
    if rs.max_replicas <= rs.min_replicas:
        return []  # min == max: always "at max" by construction
    hold = max(rs.scale_down_stabilization_s, 60)
    return [ctx.rule(
        "ReplicasPinnedAtMax",
        expr=f"{desired_replicas(ctx)} >= {rs.max_replicas}",
        for_s=hold, severity="warning",
        summary=f"{ctx.model.name}/{ctx.role}: at max_replicas {rs.max_replicas} for {hold} s",
        description=(f"The autoscaler wants {rs.max_replicas} replicas or more ({rs.max_replicas_why or 'max_replicas'}) "
                     f"for longer than its scale-down window ({rs.scale_down_stabilization_s} s): the limits bind."),
        runbook=plan_runbook("replicas", "Raise the bound that binds (max_replicas, the queue's quota or the pool's gpu_limit)"),
        thresholds={"role.max_replicas": rs.max_replicas, "role.scale_down_stabilization_s": rs.scale_down_stabilization_s},
    )]


def role_rules(spec: PlatformSpec, sizing: sizing_mod.PlatformSizing, model_name: str, role: Role) -> list[AlertRule]:
    if role not in ROLES:
        raise ValueError(f"role {role!r}: one of {', '.join(ROLES)}")
    ctx = RoleContext(spec, sizing, model_name, role)
    slo = ctx.model.slo
    return [
        *latency_burn(ctx, vllm_metrics.TIME_TO_FIRST_TOKEN, slo.ttft_p99_s, "ttft_p99_s"),
        *latency_burn(ctx, vllm_metrics.INTER_TOKEN_LATENCY, slo.itl_p99_s, "itl_p99_s"),
        *kv_saturated(ctx),
        *cold_start_slow(ctx),
        *autoscaler_input(ctx),
        *pinned_at_max(ctx),
    ]
