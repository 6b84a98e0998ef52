"""KAI's verdict per model and role, and per queue: what binds, what stays pending and why."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from gpuscale.schedule.replay import Eviction, Verdict
from gpuscale.schedule.snapshot import RolePods, Snapshot
from gpuscale.spec.platform import PlatformSpec
from gpuscale.spec.teams import UNLIMITED

NO_REASON = "KAI recorded no reason (the pod was not considered in any session)"
SHORT_REASON_CHARS = 400
"""KAI repeats per-node fit errors for every attempt; displays keep the first part (``--json`` has it all)."""


def shorten(message: str, limit: int = SHORT_REASON_CHARS) -> str:
    """One line, at most ``limit`` characters."""
    text = " ".join(message.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


@dataclass(frozen=True)
class RoleOutcome:
    """One role: replicas requested and bound (a replica is bound when all its pods are), and KAI's reasons."""

    model: str
    role: str
    queue: str
    requested: int
    bound: int
    warm_minimum: int
    gpus_bound: int
    reasons: tuple[str, ...]
    """Distinct messages KAI recorded for the role's pending pods, most frequent first."""

    @property
    def pending(self) -> int:
        return self.requested - self.bound

    @property
    def must_bind(self) -> int:
        """Replicas that must bind: the warm minimum (or fewer, if fewer were requested)."""
        return min(self.warm_minimum, self.requested)

    @property
    def ok(self) -> bool:
        return self.bound >= self.must_bind


@dataclass(frozen=True)
class QueueOutcome:
    """GPUs bound in a queue (its subtree) against its quota and limit."""

    name: str
    parent: str | None
    preemptible: bool
    gpu_quota: float
    gpu_limit: float | None
    """None when unlimited."""
    gpus_bound: int


@dataclass(frozen=True)
class ScheduleReport:
    kai_version: str
    nodes_per_pool: dict[str, tuple[str, int]]
    roles: tuple[RoleOutcome, ...]
    queues: tuple[QueueOutcome, ...]
    evictions: tuple[Eviction, ...]
    sessions: int
    notes: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """Every role's warm minimum binds."""
        return all(r.ok for r in self.roles)

    def role(self, model: str, role: str) -> RoleOutcome:
        for r in self.roles:
            if (r.model, r.role) == (model, role):
                return r
        raise KeyError(f"{model}/{role}")

    def queue(self, name: str) -> QueueOutcome:
        for q in self.queues:
            if q.name == name:
                return q
        raise KeyError(name)


def _reasons(verdict: Verdict, role: RolePods, pending: list[str]) -> tuple[str, ...]:
    counts: Counter[str] = Counter()
    for name in pending:
        pod = verdict.pod(role.namespace, name)
        messages = [e.message for e in pod.events if e.reason == "Unschedulable" and e.message]
        if not messages and pod.pod_group:
            group = verdict.pod_group(role.namespace, pod.pod_group)
            messages = [f"{x.reason}: {x.message}" for x in group.unschedulable]
            messages += [e.message for e in group.events if e.message]
        for m in messages or [NO_REASON]:
            counts[m.strip()] += 1
    return tuple(m for m, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def build_report(spec: PlatformSpec, snapshot: Snapshot, verdict: Verdict) -> ScheduleReport:
    roles: list[RoleOutcome] = []
    gpus_by_queue: Counter[str] = Counter()
    for rp in snapshot.roles:
        bound_replicas = 0
        pending: list[str] = []
        gpus = 0
        for replica in rp.replicas:
            nodes = [verdict.pod(rp.namespace, name).node for name in replica]
            if all(nodes):
                bound_replicas += 1
            pending.extend(name for name, node in zip(replica, nodes, strict=True) if not node)
            gpus += rp.gpus_per_pod * sum(1 for n in nodes if n)
        gpus_by_queue[rp.queue] += gpus
        roles.append(RoleOutcome(
            model=rp.model, role=rp.role, queue=rp.queue, requested=len(rp.replicas), bound=bound_replicas,
            warm_minimum=rp.warm_minimum, gpus_bound=gpus, reasons=_reasons(verdict, rp, pending),
        ))
    queues: list[QueueOutcome] = []
    for q, parent in spec.queues():
        subtree = [x.name for x, _ in q.walk()]
        queues.append(QueueOutcome(
            name=q.name, parent=parent.name if parent else None, preemptible=q.preemptible, gpu_quota=q.gpu_quota,
            gpu_limit=None if q.gpu_limit == UNLIMITED else q.gpu_limit,
            gpus_bound=sum(gpus_by_queue[n] for n in subtree),
        ))
    return ScheduleReport(
        kai_version=verdict.kai_version,
        nodes_per_pool=snapshot.nodes_per_pool,
        roles=tuple(roles),
        queues=tuple(queues),
        evictions=tuple(e for s in verdict.sessions for e in s.evictions),
        sessions=len(verdict.sessions),
        notes=tuple(snapshot.notes) + tuple(
            f"wave {w} was still binding or evicting after {snapshot.input['maxSessionsPerWave']} sessions: "
            "its verdict may not be final" for w in verdict.unsettled_waves),
    )
