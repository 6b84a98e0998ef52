"""The cluster KAI would see, built from what ``gpuscale synth`` emits: the input of the Go program.

Nodes come from the GPU NodePools (``nodes``), pods from the Deployments and LeaderWorkerSets scheduled by KAI
(``workloads``), the KAI install from the chart's values (``chart``); Queues and the Topology are taken as emitted.
Pods arrive in waves: each wave scales some roles up to a replica count, and is scheduled to a fixed point before
the next one arrives (how a quota-borrowing batch queue is reclaimed by inference scaling up, for example).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from gpuscale import labels
from gpuscale.schedule import chart, nodes, workloads
from gpuscale.schedule.errors import ScheduleRefusal
from gpuscale.sizing import PlatformSizing
from gpuscale.spec.model import Role
from gpuscale.spec.platform import PlatformSpec

ReplicaLevel = Literal["warm", "peak", "max"]
RoleKey = tuple[str, str]
"""(model, role)."""
KAI_CHART_NAME = "kai-scheduler"
MAX_SESSIONS_PER_WAVE = 8


class SnapshotError(ScheduleRefusal):
    """The synth output cannot be replayed (names what is missing or unsupported)."""


@dataclass(frozen=True)
class RoleWorkload:
    """One role's workload as emitted (a Deployment or LeaderWorkerSet scheduled by KAI)."""

    model: str
    role: Role
    body: Mapping[str, Any]

    @property
    def key(self) -> RoleKey:
        return (self.model, self.role)

    @property
    def pod_template(self) -> Mapping[str, Any]:
        return _pod_template(self.body)

    @property
    def pods_per_replica(self) -> int:
        if self.body["kind"] == "LeaderWorkerSet":
            return int(self.body["spec"]["leaderWorkerTemplate"].get("size", 1))
        return 1


def _pod_template(body: Mapping[str, Any]) -> Mapping[str, Any]:
    """The (worker) pod template of a Deployment or LeaderWorkerSet."""
    spec = body["spec"]
    if body["kind"] == "LeaderWorkerSet":
        return spec["leaderWorkerTemplate"]["workerTemplate"]  # type: ignore[no-any-return]
    return spec["template"]  # type: ignore[no-any-return]


@dataclass
class RolePods:
    """The pods of one role in the snapshot, replica by replica."""

    model: str
    role: str
    namespace: str
    queue: str
    warm_minimum: int
    gpus_per_pod: int
    replicas: list[list[str]] = field(default_factory=list)
    """Pod names per replica (one for a Deployment, the LWS group size for a LeaderWorkerSet)."""


@dataclass
class Snapshot:
    """The Go program's input and what gpuscale needs to read its answer."""

    input: dict[str, Any]
    roles: list[RolePods]
    nodes_per_pool: dict[str, tuple[str, int]]
    """Pool -> (instance type, node count)."""
    notes: list[str]

    def to_json(self) -> str:
        return json.dumps(self.input, sort_keys=True)


def kai_chart_values(charts: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The values of the KAI chart in a synth's chart list."""
    found = [c for c in charts if str(c.get("chart", "")).rstrip("/").endswith("/" + KAI_CHART_NAME)]
    if len(found) != 1:
        raise SnapshotError(f"expected one KAI Scheduler chart in the synth output, found {len(found)}")
    values = found[0].get("values")
    if not isinstance(values, dict):
        raise SnapshotError("the KAI chart's values are not readable in the synth output")
    return values


def role_workloads(objects: Iterable[Mapping[str, Any]]) -> list[RoleWorkload]:
    """Every Deployment/LeaderWorkerSet whose pods KAI schedules, by the model and role labels it carries."""
    out: list[RoleWorkload] = []
    for obj in objects:
        if obj.get("kind") not in ("Deployment", "LeaderWorkerSet"):
            continue
        if _pod_template(obj).get("spec", {}).get("schedulerName") != labels.KAI_SCHEDULER_NAME:
            continue
        meta_labels = obj["metadata"].get("labels", {})
        model, role = meta_labels.get(labels.MODEL_LABEL), meta_labels.get(labels.ROLE_LABEL)
        if not model or role not in ("aggregated", "prefill", "decode"):
            raise SnapshotError(f"{obj['kind']} {obj['metadata'].get('name')}: KAI-scheduled but without "
                                f"{labels.MODEL_LABEL}/{labels.ROLE_LABEL} labels")
        out.append(RoleWorkload(model=model, role=role, body=obj))
    return sorted(out, key=lambda w: w.key)


def replica_targets(sizing: PlatformSizing, level: ReplicaLevel) -> dict[RoleKey, int]:
    """Replicas per (model, role): ``warm`` = the autoscaler's minimum, ``peak`` = at peak traffic, ``max`` = ceiling."""
    field_name = {"warm": "min_replicas", "peak": "replicas_at_peak", "max": "max_replicas"}[level]
    return {(m.model, r.role): int(getattr(r, field_name)) for m in sizing.models for r in m.roles}


def _pod_request(template: Mapping[str, Any]) -> nodes.PodRequest:
    cpu = mem = gpu = 0.0
    for container in template["spec"].get("containers", []):
        req = (container.get("resources") or {}).get("requests") or {}
        cpu += nodes.parse_quantity(req.get("cpu", 0))
        mem += nodes.parse_quantity(req.get("memory", 0))
        gpu += nodes.parse_quantity(req.get(labels.GPU_RESOURCE, 0))
    return nodes.PodRequest(cpu_millis=round(cpu * 1000), memory_bytes=round(mem), gpus=round(gpu))


def _pool_of(template: Mapping[str, Any]) -> str | None:
    return (template["spec"].get("nodeSelector") or {}).get(labels.NODE_POOL_LABEL)


def _cluster_nodes(
    objects: Sequence[Mapping[str, Any]], wls: Sequence[RoleWorkload], region: str, notes: list[str]
) -> tuple[list[dict[str, Any]], dict[str, tuple[str, int]]]:
    node_classes = {o["metadata"]["name"]: o for o in objects if o.get("kind") == "EC2NodeClass"}
    requests: dict[str, nodes.PodRequest] = {}
    gang_nodes: dict[str, int] = {}
    for wl in wls:
        pool = _pool_of(wl.pod_template)
        if pool is None:
            continue
        gang_nodes[pool] = max(gang_nodes.get(pool, 1), wl.pods_per_replica)
        r = _pod_request(wl.pod_template)
        old = requests.get(pool)
        requests[pool] = r if old is None else nodes.PodRequest(
            max(old.cpu_millis, r.cpu_millis), max(old.memory_bytes, r.memory_bytes), max(old.gpus, r.gpus))
    out: list[dict[str, Any]] = []
    per_pool: dict[str, tuple[str, int]] = {}
    for node_pool in sorted((o for o in objects if o.get("kind") == "NodePool"), key=lambda o: o["metadata"]["name"]):
        name = node_pool["metadata"]["name"]
        if labels.GPU_RESOURCE not in (node_pool["spec"].get("limits") or {}):
            if name in requests:
                raise SnapshotError(f"NodePool {name} has no {labels.GPU_RESOURCE} limit, yet KAI-scheduled pods select it; "
                                    "only GPU NodePools can be replayed")
            notes.append(f"NodePool {name} has no GPU limit and no KAI-scheduled pod uses it: not modelled")
            continue
        class_name = node_pool["spec"]["template"]["spec"].get("nodeClassRef", {}).get("name", name)
        try:
            pool_nodes = nodes.pool_nodes(node_pool, node_classes.get(class_name), region, requests.get(name),
                                          zone_block=gang_nodes.get(name, 1))
        except nodes.NodePoolError as exc:
            raise SnapshotError(str(exc)) from None
        out.extend(pool_nodes)
        it = pool_nodes[0]["metadata"]["labels"][nodes.INSTANCE_TYPE_LABEL] if pool_nodes else "-"
        per_pool[name] = (it, len(pool_nodes))
    return out, per_pool


def _waves_of(targets: Sequence[Mapping[RoleKey, int]], known: set[RoleKey]) -> list[dict[RoleKey, int]]:
    unknown = sorted({k for wave in targets for k in wave} - known)
    if unknown:
        raise SnapshotError(f"no KAI-scheduled workload for {', '.join(f'{m}/{r}' for m, r in unknown)}")
    return [dict(w) for w in targets]


def build_snapshot(
    spec: PlatformSpec,
    sizing: PlatformSizing,
    objects: Sequence[Mapping[str, Any]],
    charts: Iterable[Mapping[str, Any]],
    waves: Sequence[Mapping[RoleKey, int]],
    *,
    max_sessions_per_wave: int = MAX_SESSIONS_PER_WAVE,
) -> Snapshot:
    """The snapshot of ``spec``'s synth output with pods arriving in ``waves``.

    Each wave maps (model, role) to the replica count that role scales up to when the wave arrives; roles a wave
    does not name keep their count. Scaling down is not a wave (it never makes a pod pending).
    """
    notes: list[str] = []
    values = kai_chart_values(charts)
    try:
        install = chart.kai_install(values)
    except chart.UnsupportedChartValues as exc:
        raise SnapshotError(str(exc)) from None
    pcs = chart.priority_classes(values) + [dict(o) for o in objects if o.get("kind") == "PriorityClass"]
    priorities = {pc["metadata"]["name"]: int(pc["value"]) for pc in pcs}
    wls = {wl.key: wl for wl in role_workloads(objects)}
    wave_targets = _waves_of(waves, set(wls))
    cluster_nodes, per_pool = _cluster_nodes(objects, list(wls.values()), spec.environment.aws_region, notes)

    final: dict[RoleKey, int] = {}
    for wave in wave_targets:
        for key, n in wave.items():
            if n < final.get(key, 0):
                raise SnapshotError(f"{key[0]}/{key[1]}: a wave scales it down ({final[key]} -> {n}); waves only scale up")
            final[key] = n
    warm = replica_targets(sizing, "warm")
    owners: list[dict[str, Any]] = []
    pods_by_replica: dict[RoleKey, list[list[dict[str, Any]]]] = {}
    roles: list[RolePods] = []
    for key, wl in sorted(wls.items()):
        if key not in final:
            continue
        expansion = workloads.expand(wl.body, final[key], priorities)
        owners.extend(expansion.owners)
        pods_by_replica[key] = [r.pods for r in expansion.replicas]
        template_labels = wl.pod_template.get("metadata", {}).get("labels", {})
        roles.append(RolePods(
            model=key[0], role=key[1], namespace=wl.body["metadata"]["namespace"],
            queue=template_labels.get(labels.KAI_QUEUE_LABEL, ""), warm_minimum=warm.get(key, 0),
            gpus_per_pod=_pod_request(wl.pod_template).gpus,
            replicas=[[p["metadata"]["name"] for p in r.pods] for r in expansion.replicas],
        ))

    pod_waves: list[list[dict[str, Any]]] = []
    current: dict[RoleKey, int] = {}
    for wave in wave_targets:
        arriving: list[dict[str, Any]] = []
        for key, n in sorted(wave.items()):
            for replica in pods_by_replica[key][current.get(key, 0):n]:
                arriving.extend(replica)
            current[key] = max(current.get(key, 0), n)
        pod_waves.append(arriving)

    return Snapshot(
        input={
            "chart": install,
            "cluster": {
                "nodes": cluster_nodes,
                "queues": [dict(o) for o in objects if o.get("kind") == "Queue"],
                "priorityClasses": pcs,
                "topologies": [dict(o) for o in objects if o.get("kind") == "Topology"],
            },
            "owners": owners,
            "waves": pod_waves,
            "maxSessionsPerWave": max_sessions_per_wave,
        },
        roles=roles,
        nodes_per_pool=per_pool,
        notes=notes,
    )
