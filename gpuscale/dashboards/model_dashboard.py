"""One model's dashboard: the three layers on one page, every query the one its autoscaler or its alert reads.

Rows, top to bottom: the front door (requests held against the queue bound, what leaves the door); per role, each
signal as its trigger reads it against the target at the current replica count, replicas desired/ready against
min/max, TTFT/ITL p99 against the SLO, KV use per replica against its targets; the GPUs of every queue and node pool
the model's roles count against (``sizing.gpu_bounds``) against their quota or limit, and the pools' nodes; pods not
Ready against the sized cold start.

No number is typed here: targets come from the role's signals (sizing), bounds from ``gpu_bounds``, latency targets
from the SLO; a trigger's query is ``autoscaling.signal_query`` (what the ScaledObject or the HPA's adapter rule
carries) and an alert's is the function the alert itself calls (``gpuscale.alerts``).
"""

from __future__ import annotations

from gpuscale import sizing as sizing_mod
from gpuscale.alerts import exporter_metrics as m
from gpuscale.alerts import front_door_alerts, platform_alerts
from gpuscale.alerts.role_alerts import (
    LATENCY_ROLES,
    RoleContext,
    desired_replicas,
    hpa_series,
    kv_per_replica,
    kv_signal,
    ready_replicas,
    unready_pod_age,
)
from gpuscale.alerts.rule import camel
from gpuscale.dashboards.grafana import Dashboard, Layout, Query, Threshold
from gpuscale.manifests import autoscaling, front_door
from gpuscale.signals import vllm_metrics
from gpuscale.signals.base import MEAN_PROMPT_WINDOW, Signal
from gpuscale.sizing import GpuBound, PlatformSizing, gpu_bounds
from gpuscale.spec.model import Role
from gpuscale.spec.platform import PlatformSpec

QUANTILE = 0.99
"""The SLO's latency targets are p99s (``slo.ttft_p99_s``, ``slo.itl_p99_s``)."""
QUANTILE_WINDOW = MEAN_PROMPT_WINDOW
"""Window of the p99 panels: the signals' own longer window, enough finished requests at light load."""
UID_PREFIX = "gpuscale-"


def dashboard_uid(model: str) -> str:
    """``gpuscale-<model>``, cut to Grafana's 40 characters."""
    return (UID_PREFIX + model)[:40]


def trigger_source(ctx: RoleContext, trigger: str) -> str:
    """Where the panel's query is emitted: the ScaledObject's trigger (keda) or the HPA's metric (hpa)."""
    owner = (autoscaling.scaled_object_name(ctx.model.name, ctx.role) if ctx.model.autoscaling.backend == "keda"
             else ctx.hpa)
    return f"trigger:{owner}/{trigger}"


def signal_panel(layout: Layout, ctx: RoleContext, sig: Signal) -> None:
    """The trigger's query as the autoscaler reads it. ``AverageValue``: the HPA wants ``ceil(value / target)``
    replicas, so the value is drawn against ``target x current replicas`` (above it, the role scales up); ``Value``
    (the SLO guard): against the target itself."""
    query = Query(expr=autoscaling.signal_query(sig, ctx.namespace, ctx.model.name, ctx.role),
                  legend=sig.trigger_name, source=trigger_source(ctx, sig.trigger_name))
    target = Threshold(value=sig.target, label=f"target {sig.target:g}", field=f"signals[{sig.trigger_name}].target",
                       per_replica=sig.metric_type == "AverageValue")
    layout.add(f"{ctx.role}: {sig.label}", [query], [target], unit="s" if sig.metric_type == "Value" else "short",
               description=sig.why, per_replica=hpa_series(ctx, m.KSM_HPA_CURRENT),
               measure=f"signal:{ctx.role}:{sig.trigger_name}")


def replicas_panel(layout: Layout, ctx: RoleContext) -> None:
    rs = ctx.rs
    layout.add(
        f"{ctx.role}: replicas",
        [Query(expr=desired_replicas(ctx), legend="desired", source=f"alert:{ctx.prefix}ReplicasPinnedAtMax"),
         Query(expr=ready_replicas(ctx), legend="ready")],
        [Threshold(value=rs.max_replicas, label=f"max {rs.max_replicas}", field="role.max_replicas"),
         Threshold(value=rs.min_replicas, label=f"min {rs.min_replicas}", field="role.min_replicas")],
        description=rs.max_replicas_why, measure=f"replicas:{ctx.role}",
    )


def latency_panels(layout: Layout, ctx: RoleContext) -> None:
    slo = ctx.model.slo
    for histogram, target, field, name in (
        (vllm_metrics.TIME_TO_FIRST_TOKEN, slo.ttft_p99_s, "slo.ttft_p99_s", "TTFT"),
        (vllm_metrics.INTER_TOKEN_LATENCY, slo.itl_p99_s, "slo.itl_p99_s", "ITL"),
    ):
        if ctx.role not in LATENCY_ROLES[histogram]:
            continue
        sel = ",".join(f'{k}{op}"{v}"' for k, op, v in ctx.sel)
        expr = f"histogram_quantile({QUANTILE:g}, sum by (le) (rate({histogram}_bucket{{{sel}}}[{QUANTILE_WINDOW}])))"
        layout.add(f"{ctx.role}: {name} p{QUANTILE * 100:g}", [Query(expr=expr, legend=f"{name} p{QUANTILE * 100:g}")],
                   [Threshold(value=target, label=f"SLO {target:g} s", field=field)], unit="s",
                   measure=f"{name.lower()}:{ctx.role}")


def kv_panel(layout: Layout, ctx: RoleContext) -> None:
    kv = kv_signal(ctx)
    lines = [Threshold(value=sizing_mod.KV_TARGET_UTILISATION, label="KV ceiling", field="sizing.KV_TARGET_UTILISATION")]
    if kv in ctx.rs.signals and kv.target != sizing_mod.KV_TARGET_UTILISATION:
        lines.append(Threshold(value=kv.target, label=f"KV target {kv.target:g}", field=f"signals[{kv.trigger_name}].target"))
    layout.add(f"{ctx.role}: KV cache use per replica",
               [Query(expr=kv_per_replica(ctx), legend="KV use", source=f"alert:{ctx.prefix}KvCacheSaturated")],
               lines, unit="percentunit", measure=f"kv:{ctx.role}")


def cold_start_panel(layout: Layout, ctx: RoleContext) -> None:
    cold = ctx.ms.cold_start
    stages = ", ".join(f"{name} {s:.0f} s" for name, s in cold.stages())
    layout.add(f"{ctx.role}: pods not Ready, seconds since creation",
               [Query(expr=f"max({unready_pod_age(ctx)})", legend="oldest not Ready",
                      source=f"alert:{ctx.prefix}ColdStartSlow")],
               [Threshold(value=cold.total_s, label=f"sized cold start {cold.total_s:.0f} s", field="cold_start.total_s")],
               unit="s", description=f"Sized stage by stage: {stages}.", measure=f"unready:{ctx.role}")


def door_panels(layout: Layout, spec: PlatformSpec, sizing: PlatformSizing, model_name: str) -> None:
    model = next(x for x in spec.models if x.name == model_name)
    door = sizing.model(model_name).front_door
    ns = model.serving.namespace
    if door is None or model.autoscaling.backend != "keda":
        return
    sel = front_door.queue_matchers(model.name, ns)
    layout.row("Front door: arrivals and held requests")
    near = front_door_alerts.HELD_SHARE * door.queue_bound
    layout.add(
        "Requests held at the door",
        [Query(expr=front_door.queue_query(model.name, ns), legend="held",
               source=f"trigger:{autoscaling.scaled_object_name(model.name, model.serving.roles[0])}/{front_door.TRIGGER_NAME}")],
        [Threshold(value=door.queue_bound, label=f"queue bound {door.queue_bound}", field="front_door.queue_bound"),
         Threshold(value=near, label=f"alert at {near:g}", field="front_door_alerts.HELD_SHARE x front_door.queue_bound")],
        width=12, measure="door:held",
        description=f"Past the queue bound the door answers 503; held longer than {door.hold_limit_s} s (the hold limit), too.",
    )
    outcomes = ",".join(f'{k}{op}"{v}"' for k, op, v in sel)
    layout.add("Requests through the door per second, by outcome",
               [Query(expr=f"sum by (outcome) (rate({m.EPP_REQUESTS}{{{outcomes}}}[1m]))", legend="{{outcome}}")],
               [], unit="reqps", width=12, measure="door:outcomes")


def bound_panel(layout: Layout, spec: PlatformSpec, bound: GpuBound) -> None:
    if bound.kind == "pool_gpu_limit":
        full, smallest = platform_alerts.pool_full_gpus(spec, bound)
        pool = f"GpuPool{camel(bound.name)}AtGpuLimit"
        layout.add(f"Node pool {bound.name}: GPUs", [
            Query(expr=platform_alerts.pool_gpu_usage(bound.name), legend="GPUs", source=f"alert:{pool}")],
            [Threshold(value=bound.gpus, label=f"gpu_limit {bound.gpus:g}", field="topology.gpu_pools.gpu_limit"),
             Threshold(value=full, label=f"no node fits above {full:g}", field="gpu_limit - instance.gpus_per_node")],
            measure=f"pool_gpus:{bound.name}")
        nodes = bound.gpus // smallest
        layout.add(f"Node pool {bound.name}: GPU nodes",
                   [Query(expr=platform_alerts.pool_gpu_nodes(bound.name), legend="nodes")],
                   [Threshold(value=nodes, label=f"at most {nodes:g} nodes", field="gpu_limit // instance.gpus_per_node")],
                   measure=f"pool_nodes:{bound.name}")
        return
    what = "gpu_quota" if bound.kind == "gpu_quota" else "gpu_limit"
    layout.add(f"Queue {bound.name}: GPUs allocated",
               [Query(expr=platform_alerts.queue_allocated_gpus(bound.name), legend="allocated")],
               [Threshold(value=bound.gpus, label=f"{what} {bound.gpus:g}", field=f"teams.{what}")],
               description=bound.label, measure=f"queue_gpus:{bound.name}")


def model_dashboard(spec: PlatformSpec, sizing: PlatformSizing, model_name: str) -> Dashboard:
    model = next(x for x in spec.models if x.name == model_name)
    layout = Layout()
    door_panels(layout, spec, sizing, model_name)
    roles: tuple[Role, ...] = tuple(model.serving.roles)
    for role in roles:
        ctx = RoleContext(spec, sizing, model_name, role)
        layout.row(f"{role}: signals against targets, replicas, latency and KV ({model.autoscaling.backend})")
        for sig in ctx.rs.signals:
            signal_panel(layout, ctx, sig)
        replicas_panel(layout, ctx)
        latency_panels(layout, ctx)
        kv_panel(layout, ctx)
        cold_start_panel(layout, ctx)
    mine = [b for b in gpu_bounds(spec) if any(name == model.name for name, _ in b.roles)]
    if mine:
        layout.row("GPUs: queues (KAI) and node pools (Karpenter)")
        for bound in mine:
            bound_panel(layout, spec, bound)
    return Dashboard(uid=dashboard_uid(model.name), title=f"gpuscale / {model.name}",
                     tags=["gpuscale", model.name], panels=layout.panels)


def model_dashboards(spec: PlatformSpec, sizing: PlatformSizing) -> list[Dashboard]:
    return [model_dashboard(spec, sizing, m.name) for m in spec.models]
