"""The typed context the plan template renders; every number comes from sizing, synth or the simulator."""

from __future__ import annotations

from gpuscale import labels, reservation_shares
from gpuscale.doctor import signals as doctor_signals
from gpuscale.doctor.dump import KUBECTL_COMMAND
from gpuscale.first_answer import fastest_cold_start
from gpuscale.guardrails import consolidation, warm_minimum
from gpuscale.guardrails import reservations as reservation_rules
from gpuscale.manifests import karpenter
from gpuscale.manifests.kai_wiring import kai_pod_wiring, topology_name
from gpuscale.reservation_shares import ReservationShare
from gpuscale.sizing import ModelSizing, PlatformSizing, RoleSizing, slowest_cold_start
from gpuscale.spec.base import Spec
from gpuscale.spec.catalogue import CATALOGUE
from gpuscale.spec.platform import PlatformSpec
from gpuscale.spec.teams import UNLIMITED
from gpuscale.spec.topology import CapacityReservationSpec, GpuNodePoolSpec
from gpuscale.stack_warnings import stack_warnings


class PoolRow(Spec):
    name: str
    instance_types: str
    gpu: str
    gpus_per_node: int
    nvlink_domain_gpus: int
    capacity_types: str
    gpu_limit: int
    consolidation_policy: str
    consolidate_after: str
    consolidate_after_floor: str
    """The shortest ``consolidate_after`` the rule allows this pool: max(1h, its slowest model's cold start)."""
    expire_after: str
    usd_per_gpu_hour: float
    root_volume_gib: int
    acknowledged_unsafe: bool
    drift_window: str
    """When drifted nodes roll (``DriftWindow.describe``), or ``any hour``."""
    placement: str
    """``cluster placement group in <zone>`` or ``all zones``."""
    efa: str
    """EFA devices per node (``-`` off EFA pools)."""
    kai_topology: str
    """The KAI Topology the pool's workloads name (its level set)."""
    gpu_usage_query: str
    gpu_limit_query: str
    """Karpenter's GPU usage and limit gauges of the pool (``gpuscale.doctor.signals``, as ``gpuscale doctor`` says)."""
    network_layers_note: str = ""
    """Set when the pool mixes instance types with different EC2 network layers: which layers its Topology keeps."""


class ModelRow(Spec):
    name: str
    params_b: float
    weight_precision: str
    kv_cache_precision: str
    max_context_tokens: int
    mode: str
    queue: str
    node_pool: str
    weights_uri: str


class SloRow(Spec):
    model: str
    ttft_p99_s: float
    itl_p99_s: float
    request_timeout_s: float
    goodput_target: float
    criticality: str


class WorkloadRow(Spec):
    model: str
    base_rps: float
    peak_rps: float
    peak_hours_per_day: float
    prompt_mean: float
    prompt_p99: float
    output_mean: float
    output_p99: float
    burst: str
    trace: str


class QueueRow(Spec):
    name: str
    parent: str
    depth: int
    gpu_quota: str
    gpu_limit: str
    over_quota_weight: float
    priority: int
    preemptible: bool
    leaf: bool
    models: str


class ReservationRow(Spec):
    """One capacity reservation of a GPU pool, with its window and what happens at its end."""

    pool: str
    id: str
    type: str
    start: str
    """``-`` for an ODCR (no window Karpenter acts on)."""
    end: str
    drain_from: str
    """When Karpenter deletes the block's nodes (``guardrails.reservations.drain_at``); ``-`` for an ODCR."""
    reclaim_from: str
    """When EC2 starts reclaiming the block's instances (``guardrails.reservations.reclaim_at``); ``-`` for an ODCR."""
    usable_hours: str
    """Start to drain, hours; ``-`` for an ODCR."""
    after_end: str
    """Where the pool's new nodes come from once the reservation is gone."""
    bill: str
    """What it bills, used or not (``guardrails.reservations``): instances x rate, per hour and per day (an ODCR) or
    for the whole block; what is unknown without ``instance_count``."""


def _bill(pool: GpuNodePoolSpec, r: CapacityReservationSpec) -> str:
    if r.instance_count is None:
        return "not billed here (no instance_count)"
    kind = r.instance_type or pool.instance_types[0]
    rate = reservation_rules.instance_hour_rate(r.type, r.usd_per_instance_hour, CATALOGUE[kind].on_demand_usd_per_hour)
    assert rate is not None  # a block with a count states its price (CapacityReservationSpec._billing)
    per_h = r.instance_count * rate
    head = f"{r.instance_count} x {kind} at ${rate:,.2f}/h = ${per_h:,.2f}/h"
    if r.type == "capacity-block" and r.start_utc is not None and r.end_utc is not None:
        hours = reservation_rules.block_hours(r.start_utc, r.end_utc)
        return f"{head}, ${per_h * hours:,.0f} up front for the block's {hours:,.0f} h"
    return f"{head} (${per_h * 24:,.0f}/day) while it exists"


def _fallback(pool: GpuNodePoolSpec, leaving: str) -> str:
    others = [f"ODCR {r.id}" for r in pool.reservations if r.type == "odcr" and r.id != leaving]
    if any(r.type == "capacity-block" and r.id != leaving for r in pool.reservations):
        others.append("its other Capacity Blocks while they are active")
    others += [t for t in pool.capacity_types if t != "reserved"]
    return "new nodes from " + ", ".join(others) if others else "the pool launches no new node"


def _reservation_rows(pool: GpuNodePoolSpec) -> list[ReservationRow]:
    rows = []
    for r in pool.reservations:
        if r.type == "capacity-block" and r.start_utc is not None and r.end_utc is not None:
            rows.append(ReservationRow(
                pool=pool.name, id=r.id, type=r.type, start=f"{r.start_utc:%Y-%m-%d %H:%M}", end=f"{r.end_utc:%Y-%m-%d %H:%M}",
                drain_from=f"{reservation_rules.drain_at(r.end_utc):%Y-%m-%d %H:%M}",
                reclaim_from=f"{reservation_rules.reclaim_at(r.end_utc):%Y-%m-%d %H:%M}",
                usable_hours=f"{reservation_rules.usable_hours(r.start_utc, r.end_utc):.1f}", after_end=_fallback(pool, r.id),
                bill=_bill(pool, r),
            ))
        else:
            rows.append(ReservationRow(
                pool=pool.name, id=r.id, type=r.type, start="-", end="-", drain_from="-", reclaim_from="-", usable_hours="-",
                after_end="running nodes stay (billed on demand); " + _fallback(pool, r.id), bill=_bill(pool, r),
            ))
    return rows


class GangRow(Spec):
    model: str
    role: str
    workload_kind: str
    pods: int
    gpus_per_pod: int
    min_member: int
    required_placement: str
    preferred_placement: str
    priority_class: str
    preemption_delay: str
    """The ``kai.scheduler/preemption-delay`` value the workload carries (the model's sized node time)."""


class RoleRow(Spec):
    model: str
    role: str
    backend: str
    metric: str
    target: str
    why: str
    replicas_base: int
    replicas_peak: int
    min_replicas: int
    max_replicas: int
    max_why: str
    """Where the ceiling comes from (the share of the tightest GPU bound, or the stack file)."""
    pdb_floor: str
    """The role's PDB: ``minAvailable N`` (ready floor) or ``maxUnavailable 1``."""
    scale_down_stabilization_s: int
    polling_interval_s: int
    cooldown_s: int
    policy: str
    """Target utilisation, burst mode, SLO guard and warm-up windows, as sizing resolved them."""
    target_utilisation: float
    """Share of one replica's capacity at the SLO the load signal targets (sizing's, per role)."""
    load_target: str
    """The load target as the plan says it (``load_target``)."""
    burst_headroom_replicas: float
    """Replicas the derived target's burst headroom holds at peak under the workload's bursts (sizing's)."""
    burst_headroom_usd_per_hour: float
    """What they cost while held."""
    replicas_per_rps: float
    """Replicas the load signal holds per request per second (sizing's, at the target utilisation)."""
    peak_rps: float
    tuned: str
    """The ``gpuscale tune`` command that chose the values (``autoscaling.tuned_on``), or that sizing's defaults hold."""


class ColdStartRow(Spec):
    model: str
    choices: str
    """The cold-start choices the stages were timed for (image pull, weights source, engine start)."""
    node_s: float
    gpu_ready_s: float
    image_pull_s: float
    weights_s: float
    engine_init_s: float
    total_s: float
    warm_node_s: float
    criticality: str
    warm_pool: str


class FrontDoorRow(Spec):
    """The front door before one model: what a held request may wait and what the user sees when it cannot."""

    model: str
    first_answer_s: float
    detection_s: float
    cold_start_s: float
    first_token_s: float
    request_timeout_s: float
    speed_up: str
    """The stage to speed up and its faster choice."""
    hold_limit_s: int
    queue_bound: int
    per_replica: int
    retry_after_s: int
    retry_after_saturated_s: int
    idle_window_s: int
    fastest_cold_start_s: float
    """The cold start with the fastest choice the stack allows at each stage."""


class TrapRow(Spec):
    """The 7-of-8 trap for the stack's largest replica."""

    model: str
    gpus: int
    pods: int
    gpus_per_pod: int
    wait_s: float
    """How long the first pods wait for the last node: node + GPU-ready + image pull."""
    idle_gpu_minutes_without_gang: float
    """GPUs bound by the early pods times that wait, per scale-out."""
    applies: bool
    """False when one replica fits one pod: the pod binds atomically."""


class CheckRow(Spec):
    number: str
    check: str
    passed: bool
    detail: str


class PlanContext(Spec):
    """Everything the template reads."""

    stack: str
    cluster_name: str
    stage: str
    region: str
    kubernetes_version: str
    zones: str
    node_provisioner: str
    node_ready_s: str
    pools: list[PoolRow]
    models: list[ModelRow]
    slos: list[SloRow]
    workloads: list[WorkloadRow]
    queues: list[QueueRow]
    queue_mermaid: str
    topology_levels: list[str]
    sizing: list[ModelSizing]
    gangs: list[GangRow]
    reservations: list[ReservationRow]
    """Every GPU pool's capacity reservations (empty when none selects any)."""
    reservation_shares: list[ReservationShare] = []
    """Each model's part of its pool's reserved instances, which its simulation runs in and is charged
    (``gpuscale.reservation_shares``): the parts add up to the pool's one bill."""
    reservation_drain_lead_min: int = reservation_rules.DRAIN_LEAD_S // 60
    reservation_reclaim_lead_min: int = reservation_rules.EC2_RECLAIM_LEAD_S // 60
    trap: TrapRow
    roles: list[RoleRow]
    cold_starts: list[ColdStartRow]
    front_doors: list[FrontDoorRow]
    checklist: list[CheckRow]
    warnings: list[str]
    """What synth will log as ``warning:`` for this stack (``gpuscale.stack_warnings``)."""
    namespaces: list[str]
    leaf_queues: list[str]
    prometheus_url: str
    dump_command: str
    """The cluster dump ``gpuscale doctor`` reads (``gpuscale.doctor.dump``)."""


def _fmt_quota(v: float) -> str:
    return "unlimited" if v == UNLIMITED else f"{v:g}"


def _why(r: RoleSizing) -> str:
    """Each signal of the role and why it is there (sizing's one sentence per signal), primary first."""
    return ". ".join(f"`{x.label}` (target {x.target:g}): {x.why}" for x in r.signals)


def load_target(r: RoleSizing) -> str:
    """How the role's load target reads in the plan: derived from the SLO, or a share of a replica."""
    return "derived from the SLO (replicas needed)" if r.derived_target else f"{r.target_utilisation:.0%} of a replica"


def _policy(r: RoleSizing) -> str:
    guard = [x.label for x in r.signals if x.purpose == "guard"]
    warm = "; ".join(f"{w.start} .. {w.end} {w.timezone}: {w.replicas}" for w in r.warm_schedule)
    return (
        f"load target {load_target(r)}; burst mode {'on' if r.burst_mode else 'off'}; "
        f"SLO guard {'on (' + ', '.join(guard) + ')' if guard else 'off'}; warm-up {warm or 'none'}"
    )


def build_context(stack: str, spec: PlatformSpec, sizing: PlatformSizing) -> PlanContext:
    env, topo = spec.environment, spec.topology
    by_model = {m.model: m for m in sizing.models}
    pools = [
        PoolRow(
            name=p.name, instance_types=", ".join(p.instance_types), gpu=f"{p.instances[0].gpu.name} {p.instances[0].gpu_memory_gib:g} GiB",
            gpus_per_node=max(i.gpus_per_node for i in p.instances), nvlink_domain_gpus=max(i.nvlink_domain_gpus for i in p.instances),
            capacity_types=", ".join(p.capacity_types), gpu_limit=p.gpu_limit, consolidation_policy=p.consolidation_policy,
            consolidate_after=p.consolidate_after, expire_after=p.expire_after,
            consolidate_after_floor=consolidation.floor_text(_pool_cold_start_s(sizing, spec, p.name)),
            usd_per_gpu_hour=round(min(i.usd_per_gpu_hour for i in p.instances), 3),
            root_volume_gib=sizing.root_volume_gib[p.name],
            acknowledged_unsafe=p.acknowledge_underutilized_consolidation_evicts_inference,
            drift_window=p.drift_window.describe() if p.drift_window is not None else "any hour",
            placement=f"cluster placement group in {topo.pool_zones(p.name)[0]}" if p.cluster_placement else "all zones",
            efa=str(min(i.efa_interfaces for i in p.instances)) if p.efa else "-",
            kai_topology=topology_name(spec, p.name),
            gpu_usage_query=doctor_signals.nodepool_gpu(doctor_signals.KARPENTER_NODEPOOL_USAGE, p.name),
            gpu_limit_query=doctor_signals.nodepool_gpu(doctor_signals.KARPENTER_NODEPOOL_LIMIT, p.name),
            network_layers_note=" ".join(karpenter.network_layer_warnings(p)),
        )
        for p in topo.gpu_pools
    ]
    models = [
        ModelRow(
            name=m.name, params_b=m.architecture.params_b, weight_precision=m.architecture.weight_precision,
            kv_cache_precision=m.architecture.kv_cache_precision, max_context_tokens=m.architecture.max_context_tokens,
            mode=m.serving.mode, queue=m.queue, node_pool=m.node_pool, weights_uri=m.weights.uri,
        )
        for m in spec.models
    ]
    slos = [SloRow(model=m.name, **m.slo.model_dump()) for m in spec.models]
    workloads = [
        WorkloadRow(
            model=m.name, base_rps=m.workload.base_rps, peak_rps=m.workload.peak_rps,
            peak_hours_per_day=m.workload.peak_hours_per_day, prompt_mean=m.workload.prompt_tokens.mean,
            prompt_p99=m.workload.prompt_tokens.p99, output_mean=m.workload.output_tokens.mean,
            output_p99=m.workload.output_tokens.p99,
            burst=(f"x{m.workload.burst.multiplier:g} for {m.workload.burst.duration_s:g} s, {m.workload.burst.per_hour:g}/h"
                   if m.workload.burst.per_hour > 0 else "none"),
            trace=(f"{m.workload.trace.path.name} (compress x{m.workload.trace.compress:g})" if m.workload.trace else "none"),
        )
        for m in spec.models
    ]
    depth: dict[str, int] = {}
    queues: list[QueueRow] = []
    mermaid = ["graph TD"]
    for q, parent in spec.queues():
        depth[q.name] = 0 if parent is None else depth[parent.name] + 1
        used = [m.name for m in spec.models if m.queue == q.name]
        queues.append(QueueRow(
            name=q.name, parent=parent.name if parent else "-", depth=depth[q.name], gpu_quota=_fmt_quota(q.gpu_quota),
            gpu_limit=_fmt_quota(q.gpu_limit), over_quota_weight=q.over_quota_weight, priority=q.priority,
            preemptible=q.preemptible, leaf=q.is_leaf, models=", ".join(used) or "-",
        ))
        label = f"{q.name}<br/>quota {_fmt_quota(q.gpu_quota)} / limit {_fmt_quota(q.gpu_limit)} GPU<br/>prio {q.priority}{' preemptible' if q.preemptible else ''}"
        mermaid.append(f'    {q.name.replace("-", "_")}["{label}"]')
        if parent is not None:
            mermaid.append(f"    {parent.name.replace('-', '_')} --> {q.name.replace('-', '_')}")
        for model_name in used:
            mermaid.append(f'    {q.name.replace("-", "_")} -.-> model_{model_name.replace("-", "_")}(("{model_name}"))')
    gangs: list[GangRow] = []
    roles: list[RoleRow] = []
    colds: list[ColdStartRow] = []
    doors: list[FrontDoorRow] = []
    for m in spec.models:
        ms = by_model[m.name]
        for r in ms.roles:
            wiring = kai_pod_wiring(spec, m, r.role, ms.shape)
            gangs.append(GangRow(
                model=m.name, role=r.role, workload_kind="LeaderWorkerSet" if ms.shape.pods > 1 else "Deployment",
                pods=ms.shape.pods, gpus_per_pod=ms.shape.gpus_per_pod, min_member=wiring.gang_min_member,
                required_placement=wiring.pod_annotations.get(labels.KAI_TOPOLOGY_REQUIRED_ANNOTATION, "-"),
                preferred_placement=wiring.pod_annotations.get(labels.KAI_TOPOLOGY_PREFERRED_ANNOTATION, "-"),
                priority_class=wiring.priority_class_name,
                preemption_delay=wiring.workload_annotations[labels.KAI_PREEMPTION_DELAY_ANNOTATION],
            ))
            metric = " + ".join(x.label for x in r.signals)
            target = " / ".join(f"{x.target:g}" for x in r.signals)
            roles.append(RoleRow(
                model=m.name, role=r.role, backend=m.autoscaling.backend, metric=metric, target=target, why=_why(r),
                replicas_base=r.replicas_at_base, replicas_peak=r.replicas_at_peak, min_replicas=r.min_replicas,
                max_replicas=r.max_replicas, max_why=r.max_replicas_why,
                pdb_floor=f"minAvailable {r.pdb_min_available}" if r.pdb_min_available else "maxUnavailable 1",
                scale_down_stabilization_s=r.scale_down_stabilization_s,
                polling_interval_s=r.polling_interval_s, cooldown_s=r.cooldown_s, policy=_policy(r),
                target_utilisation=r.target_utilisation, replicas_per_rps=r.replicas_per_rps, load_target=load_target(r),
                burst_headroom_replicas=r.burst_headroom_replicas,
                burst_headroom_usd_per_hour=round(r.burst_headroom_replicas * ms.shape.gpus * ms.usd_per_gpu_hour, 2),
                peak_rps=m.workload.peak_rps,
                tuned=(f"tuned by `{m.autoscaling.tuned_on}`" if m.autoscaling.tuned_on else
                       "sizing's defaults (not tuned; `gpuscale tune --trace FILE` fits them to a trace)"),
            ))
        c = ms.cold_start
        if m.slo.criticality == "critical":
            decision = (
                f"warm pool: min_replicas >= {warm_minimum.CRITICAL_MIN_REPLICAS} per role, so a drifted or failed node never takes a role to zero (a cold "
                f"start costs {c.total_s:.0f} s against a {m.slo.ttft_p99_s:g} s TTFT p99)"
            )
        elif min(r.min_replicas for r in ms.roles) >= 1:
            decision = "one warm replica per role (standard SLO; first request after idle would otherwise wait a cold start)"
        else:
            wakes = [w for r in m.serving.roles if (w := m.autoscaling.role(r).wake_schedule) is not None]
            when = f"; held awake {wakes[0].start} .. {wakes[0].end} ({wakes[0].timezone}) by a KEDA cron trigger" if wakes else ""
            door = ms.front_door
            how = (f"the front door holds it and wakes the model; its first answer from zero comes after "
                   f"~{door.first_answer.total_s:.0f} s" if door is not None else
                   f"nothing holds it: it fails until a replica is up (~{c.total_s:.0f} s)")
            decision = f"scale to zero allowed ({m.slo.criticality}): the first request after idle: {how}{when}"
        if ms.front_door is not None:
            fa, d = ms.front_door.first_answer, ms.front_door
            pool = spec.topology.pool(m.node_pool)
            inst = next(i for i in pool.instances if i.name == ms.shape.instance_type)
            fast = fastest_cold_start(m, pool, topo.provisioning, inst, ms.weights_gib)
            doors.append(FrontDoorRow(
                model=m.name, first_answer_s=round(fa.total_s, 1), detection_s=fa.detection_s, cold_start_s=fa.cold_start_s,
                first_token_s=fa.first_token_s, request_timeout_s=fa.request_timeout_s,
                speed_up=f"{fa.slowest_stage.replace('_', ' ')}: {fa.speed_up}", hold_limit_s=d.hold_limit_s,
                queue_bound=d.queue_bound, per_replica=d.per_replica, retry_after_s=d.retry_after_s,
                retry_after_saturated_s=d.retry_after_saturated_s,
                idle_window_s=d.idle_window_s, fastest_cold_start_s=round(fast.total_s, 1),
            ))
        colds.append(ColdStartRow(
            model=m.name, choices=f"{c.image_pull} / {c.weights_source} / {c.engine_start}", node_s=c.node_s, gpu_ready_s=c.gpu_ready_s, image_pull_s=c.image_pull_s, weights_s=c.weights_s,
            engine_init_s=c.engine_init_s, total_s=c.total_s, warm_node_s=c.warm_node_s, criticality=m.slo.criticality,
            warm_pool=decision,
        ))
    largest = max(sizing.models, key=lambda ms: (ms.shape.gpus, ms.shape.pods))
    prov = topo.provisioning
    wait = prov.node_ready_s[1] + prov.gpu_ready_s + largest.cold_start.image_pull_s
    held = (largest.shape.pods - 1) * largest.shape.gpus_per_pod
    trap = TrapRow(
        model=largest.model, gpus=largest.shape.gpus, pods=largest.shape.pods, gpus_per_pod=largest.shape.gpus_per_pod,
        wait_s=wait, idle_gpu_minutes_without_gang=round(held * wait / 60.0, 1), applies=largest.shape.pods > 1,
    )
    checklist = _checklist(spec, sizing, gangs)
    return PlanContext(
        stack=stack, cluster_name=env.cluster_name, stage=env.stage, region=env.aws_region,
        kubernetes_version=env.kubernetes_version, zones=", ".join(topo.zones), node_provisioner=prov.node_provisioner,
        node_ready_s=f"{prov.node_ready_s[0]:g}-{prov.node_ready_s[1]:g}", pools=pools, models=models, slos=slos,
        workloads=workloads, queues=queues, queue_mermaid="\n".join(mermaid),
        topology_levels=[f"{lv.node_label}" + (f" ({lv.alias})" if lv.alias else "") for lv in topo.levels],
        sizing=sizing.models, gangs=gangs, reservations=[row for p in topo.gpu_pools for row in _reservation_rows(p)], reservation_shares=sorted(reservation_shares.shares(spec, sizing.models).values(), key=lambda r: (r.pool, r.instance_type)), trap=trap, roles=roles, cold_starts=colds, front_doors=doors, checklist=checklist, warnings=stack_warnings(spec, sizing),
        namespaces=sorted({m.serving.namespace for m in spec.models}), leaf_queues=spec.leaf_queue_names(), prometheus_url=spec.observability.prometheus_url,
        dump_command=KUBECTL_COMMAND,
    )


def _checklist(spec: PlatformSpec, sizing: PlatformSizing, gangs: list[GangRow]) -> list[CheckRow]:
    prov = spec.topology.provisioning
    fast = prov.node_provisioner == "karpenter" and prov.node_ready_s[1] <= 60
    # the plan checks the rules themselves (gpuscale.guardrails), with the cold starts sizing derived
    cold = {p.name: _pool_cold_start_s(sizing, spec, p.name) for p in spec.topology.gpu_pools}
    pools_ok = [p for p in spec.topology.gpu_pools if not consolidation.breaches(
        consolidation.SPEC, pool=p.name, policy=p.consolidation_policy, after=p.consolidate_after,
        after_s=p.consolidate_after_s, cold_start_s=cold[p.name])]
    multi = [m for m in sizing.models if m.shape.pods > 1]
    critical = [m for m in spec.models if m.slo.criticality == "critical"]
    warm_ok = [m for m in critical
               if all(warm_minimum.keeps_warm_minimum(m.slo.criticality, r.min_replicas) for r in sizing.model(m.name).roles)]
    floor_note = ", ".join(f"{name} {consolidation.floor_text(seconds)}" for name, seconds in cold.items())
    return [
        CheckRow(
            number="45-60 s", check="GPU node provisioning by Karpenter (Cluster Autoscaler: 90-120 s)", passed=fast,
            detail=f"{prov.node_provisioner}, node Ready in {prov.node_ready_s[0]:g}-{prov.node_ready_s[1]:g} s",
        ),
        CheckRow(
            number=f">= {consolidation.MIN_CONSOLIDATE_AFTER}",
            check=f"GPU pools consolidate {consolidation.GPU_POOL_CONSOLIDATION_POLICY} after >= max(1h, slowest cold start)",
            passed=len(pools_ok) == len(spec.topology.gpu_pools),
            detail=", ".join(f"{p.name}: {p.consolidation_policy}/{p.consolidate_after}" for p in spec.topology.gpu_pools)
            + f" (floors: {floor_note})",
        ),
        CheckRow(
            number="8 of 8", check="multi-GPU replicas start all-or-nothing (gang minMember = pods per replica)",
            passed=all(g.min_member == g.pods for g in gangs),
            detail=(", ".join(f"{m.model}: minMember {m.shape.pods} over {m.shape.nodes} nodes" for m in multi)
                    or f"every replica fits one pod ({', '.join(f'{m.model}: {m.shape.gpus} GPU' for m in sizing.models)}); KAI binds it atomically"),
        ),
        CheckRow(
            number=f">= {warm_minimum.CRITICAL_MIN_REPLICAS} warm",
            check=f"critical SLOs keep {warm_minimum.CRITICAL_MIN_REPLICAS} warm replicas per role", passed=len(warm_ok) == len(critical),
            detail=(", ".join(f"{m.name}: min {min(r.min_replicas for r in sizing.model(m.name).roles)}" for m in critical)
                    or "no critical model in this stack"),
        ),
    ]




def _pool_cold_start_s(sizing: PlatformSizing, spec: PlatformSpec, pool: str) -> float:
    """The slowest sized cold start among the pool's models (what sets its consolidation floor); 0 without models."""
    slowest = slowest_cold_start(spec, sizing, pool)
    return slowest[1] if slowest is not None else 0.0
