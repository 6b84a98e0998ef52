"""The dump indexed for diagnosis: events per object, PodGroups, Queues, NodePools, NodeClaims, nodes, the dump's time.

``PodView`` gathers what the controllers wrote about one pending pod (its events, its ``PodScheduled`` condition, its
PodGroup's scheduling conditions and events), so the rules of each layer read the same messages.
"""

from __future__ import annotations

import datetime
import json
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from gpuscale import labels
from gpuscale.doctor import messages as m
from gpuscale.doctor import objects as o
from gpuscale.doctor.dump import ClusterDump, Obj
from gpuscale.doctor.findings import quote
from gpuscale.spec.topology import ProvisioningSpec


@dataclass(frozen=True)
class Settings:
    """What the diagnosis assumes about the cluster; ``from_provisioning`` reads the stack's timings."""

    launch_window_s: float
    """How long a pending pod waiting for a new node is normal: twice the sized node launch (``node_ready_s`` max
    plus ``gpu_ready_s``), so a launch at the slow end of normal is not called stuck."""
    scheduler_name: str = labels.KAI_SCHEDULER_NAME
    gpu_pools: frozenset[str] | None = None
    """The stack's GPU NodePools (None without a stack: every NodePool with an ``nvidia.com/gpu`` limit)."""

    @classmethod
    def from_provisioning(cls, provisioning: ProvisioningSpec, gpu_pools: frozenset[str] | None = None) -> Settings:
        return cls(launch_window_s=LAUNCH_SLACK * (provisioning.node_ready_s[1] + provisioning.gpu_ready_s),
                   gpu_pools=gpu_pools)


LAUNCH_SLACK = 2.0
"""A launch twice as slow as sized is no longer normal."""


@dataclass(frozen=True)
class Said:
    """One thing a controller wrote about a pod or its PodGroup."""

    evidence: str
    """``<Kind>/<name>: <field or event reason>: <message>``."""
    reason: str
    message: str


@dataclass(frozen=True)
class Fit:
    """The GPU nodes of the dump as one pod's spec sees them."""

    matching: list[Obj]
    """Labels accepted by its nodeSelector and required node affinity."""
    tolerated: list[Obj]
    """``matching`` whose taints it tolerates."""
    eligible: list[Obj]
    """``tolerated`` that are Ready and schedulable."""
    silent: list[Obj]
    """``tolerated`` that are Ready and advertise no ``nvidia.com/gpu``."""
    matching_silent: list[Obj]
    """``matching`` that are Ready and advertise no ``nvidia.com/gpu`` (taints aside: a new node's startup taints)."""


def _key(kind: str, namespace: str, name: str) -> tuple[str, str, str]:
    return kind, namespace, name


@dataclass
class Cluster:
    dump: ClusterDump
    settings: Settings
    events: dict[tuple[str, str, str], list[Obj]] = field(default_factory=lambda: defaultdict(list))
    _fits: dict[str, Fit] = field(default_factory=dict)
    _free: dict[int, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for event in self.dump.of("Event"):
            involved = o.mapping(event, "involvedObject")
            self.events[_key(o.text(involved, "kind"), o.text(involved, "namespace"), o.text(involved, "name"))].append(
                event)
        for evs in self.events.values():
            evs.sort(key=lambda e: o.event_time(e) or _EPOCH)

    def events_of(self, kind: str, namespace: str, name: str) -> list[Obj]:
        return self.events.get(_key(kind, namespace, name), [])

    @cached_property
    def now(self) -> datetime.datetime:
        """The dump's time: the newest timestamp in it (a dump is a snapshot; the wall clock is not its time). Each
        kubelet renews its node's ``lastHeartbeatTime`` about every minute, so a dump with nodes is dated to about
        a minute even when no event is recent."""
        times = [o.event_time(e) for e in self.dump.of("Event")]
        for kind in self.dump.objects:
            times.extend(o.created(obj) for obj in self.dump.of(kind))
            times.extend(o.timestamp(c.get(key)) for obj in self.dump.of(kind)
                         for c in o.items(obj, "status", "conditions") if isinstance(c, Mapping)
                         for key in ("lastTransitionTime", "lastHeartbeatTime"))
        known = [t for t in times if t is not None]
        return max(known) if known else _EPOCH

    def age_s(self, when: datetime.datetime | None) -> float | None:
        return None if when is None else (self.now - when).total_seconds()

    @cached_property
    def podgroups(self) -> dict[tuple[str, str], Obj]:
        return {(o.namespace(pg), o.name(pg)): pg for pg in self.dump.of("PodGroup")}

    @cached_property
    def queues(self) -> dict[str, Obj]:
        return {o.name(q): q for q in self.dump.of("Queue")}

    @cached_property
    def nodepools(self) -> dict[str, Obj]:
        return {o.name(p): p for p in self.dump.of("NodePool")}

    @cached_property
    def nodeclaims(self) -> dict[str, Obj]:
        return {o.name(c): c for c in self.dump.of("NodeClaim")}

    @cached_property
    def nodeclasses(self) -> dict[str, Obj]:
        return {o.name(c): c for c in self.dump.of("EC2NodeClass")}

    @cached_property
    def nodes(self) -> list[Obj]:
        return self.dump.of("Node")

    @cached_property
    def gpu_nodes(self) -> list[Obj]:
        return [n for n in self.nodes if o.is_gpu_node(n)]

    @cached_property
    def nodeclaim_events(self) -> list[tuple[str, list[Obj]]]:
        """``(NodeClaim name, its events)``, by name (the NodeClaim may be gone: Karpenter deletes failed ones)."""
        return sorted((name, evs) for (kind, _, name), evs in self.events.items() if kind == "NodeClaim")

    def fit(self, pod: Obj) -> Fit:
        """The GPU nodes for the pod, computed once per distinct (selector, affinity, tolerations): a role's pods
        share them."""
        spec = o.mapping(pod, "spec")
        key = json.dumps([spec.get("nodeSelector"), spec.get("affinity"), spec.get("tolerations")], sort_keys=True,
                         default=str)
        if key not in self._fits:
            matching = [n for n in self.gpu_nodes if not o.selector_mismatches(pod, o.mapping(n, "metadata", "labels"))]
            tolerated = [n for n in matching if not o.untolerated_taints(pod, o.items(n, "spec", "taints"))]
            ready = [n for n in tolerated if o.node_ready(n)]
            self._fits[key] = Fit(
                matching=matching, tolerated=tolerated,
                eligible=[n for n in ready if not o.field(n, "spec", "unschedulable")],
                silent=[n for n in ready if not o.node_gpus(n)],
                matching_silent=[n for n in matching if o.node_ready(n) and not o.node_gpus(n)],
            )
        return self._fits[key]

    @cached_property
    def gpus_bound(self) -> dict[str, int]:
        """GPUs requested by the live pods bound to each node."""
        out: dict[str, int] = defaultdict(int)
        for pod in self.dump.of("Pod"):
            node = o.text(pod, "spec", "nodeName")
            if node and o.text(pod, "status", "phase") not in ("Succeeded", "Failed"):
                out[node] += o.pod_gpus(pod)
        return out

    def free_gpus(self, node: Obj) -> float:
        if id(node) not in self._free:
            self._free[id(node)] = (o.node_gpus(node) or 0.0) - self.gpus_bound.get(o.name(node), 0)
        return self._free[id(node)]

    def gpu_nodepools(self) -> list[Obj]:
        pools = self.settings.gpu_pools
        return [p for name, p in sorted(self.nodepools.items())
                if (name in pools if pools is not None else labels.GPU_RESOURCE in o.mapping(p, "spec", "limits"))]


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


@dataclass
class PodView:
    """One pending GPU pod and everything written about it."""

    cluster: Cluster
    pod: Obj

    @property
    def key(self) -> str:
        return f"{o.namespace(self.pod)}/{o.name(self.pod)}"

    @property
    def ref(self) -> str:
        return f"Pod/{self.key}"

    @cached_property
    def gpus(self) -> int:
        return o.pod_gpus(self.pod)

    @property
    def age_s(self) -> float:
        return self.cluster.age_s(o.created(self.pod)) or 0.0

    @property
    def scheduler(self) -> str:
        return o.text(self.pod, "spec", "schedulerName") or "default-scheduler"

    @property
    def by_kai(self) -> bool:
        return self.scheduler == self.cluster.settings.scheduler_name

    @property
    def provisionable(self) -> bool:
        """Marked ``PodScheduled=False/Unschedulable``: the only pods Karpenter provisions for (``IsProvisionable``)."""
        scheduled = o.condition(self.pod, "PodScheduled")
        return scheduled.get("status") == "False" and scheduled.get("reason") == m.KAI_UNSCHEDULABLE

    @cached_property
    def events(self) -> list[Obj]:
        return self.cluster.events_of("Pod", o.namespace(self.pod), o.name(self.pod))

    @cached_property
    def podgroup_name(self) -> str:
        return o.text(self.pod, "metadata", "annotations", m.KAI_POD_GROUP_ANNOTATION)

    @cached_property
    def podgroup(self) -> Obj | None:
        return self.cluster.podgroups.get((o.namespace(self.pod), self.podgroup_name)) if self.podgroup_name else None

    @cached_property
    def queue_name(self) -> str:
        return (o.text(self.podgroup, "spec", "queue") if self.podgroup else "") or \
            o.text(self.pod, "metadata", "labels", labels.KAI_QUEUE_LABEL)

    @cached_property
    def said(self) -> list[Said]:
        """Pod events, the pod's ``PodScheduled`` condition, the PodGroup's scheduling conditions and events."""
        out = [Said(f"{self.ref}: event {o.text(e, 'reason')}: {quote(o.text(e, 'message'))}", o.text(e, "reason"),
                    o.text(e, "message")) for e in self.events]
        scheduled = o.condition(self.pod, "PodScheduled")
        if scheduled.get("status") == "False":
            reason, message = str(scheduled.get("reason") or ""), str(scheduled.get("message") or "")
            out.append(Said(f"{self.ref}: status.conditions PodScheduled=False {reason}: {quote(message)}", reason,
                            message))
        if self.podgroup is not None:
            pg_ref = f"PodGroup/{o.namespace(self.podgroup)}/{o.name(self.podgroup)}"
            for cond in o.items(self.podgroup, "status", "schedulingConditions"):
                message = o.text(cond, "message")
                reasons = [o.text(r, "reason") for r in o.items(cond, "reasons")] or [o.text(cond, "reason")]
                for reason in reasons:
                    out.append(Said(f"{pg_ref}: status.schedulingConditions {o.text(cond, 'type')} reason {reason}: "
                                    f"{quote(message)}", reason, message))
            for e in self.cluster.events_of("PodGroup", o.namespace(self.podgroup), o.name(self.podgroup)):
                out.append(Said(f"{pg_ref}: event {o.text(e, 'reason')}: {quote(o.text(e, 'message'))}",
                                o.text(e, "reason"), o.text(e, "message")))
        return out

    def saying(self, *fragments: str, reason: str | None = None) -> list[Said]:
        """What was said whose message contains one of ``fragments`` (or whose reason is ``reason``)."""
        return [s for s in self.said if any(f in s.message for f in fragments) or (reason and s.reason == reason)]

    @cached_property
    def karpenter_said(self) -> list[Said]:
        """Karpenter's own ``FailedScheduling`` events on the pod (``Failed to schedule pod, ...``)."""
        return [s for s in self.said if s.reason == m.KUBE_FAILED_SCHEDULING
                and s.message.startswith(m.KARPENTER_FAILED_TO_SCHEDULE)]

    @cached_property
    def nominated_nodeclaims(self) -> list[str]:
        """NodeClaims Karpenter nominated the pod for (``Pod should schedule on: nodeclaim/<name>, node/<name>``)."""
        out: list[str] = []
        for s in self.said:
            if s.reason == m.KARPENTER_NOMINATED and s.message.startswith(m.KARPENTER_NOMINATED_PREFIX):
                for part in s.message.removeprefix(m.KARPENTER_NOMINATED_PREFIX).split(","):
                    kind, _, claim = part.strip().partition("/")
                    if kind == "nodeclaim" and claim and claim not in out:
                        out.append(claim)
        return out

    @cached_property
    def pool(self) -> str:
        """The NodePool the pod asks for (its ``gpuscale.io/node-pool`` or ``karpenter.sh/nodepool`` selector)."""
        selector = o.mapping(self.pod, "spec", "nodeSelector")
        return str(selector.get(labels.NODE_POOL_LABEL) or selector.get(o.NODEPOOL_LABEL) or "")

    def candidate_nodepools(self) -> list[Obj]:
        """The GPU NodePools that could take the pod: its pool when it names one, else every GPU NodePool."""
        pools = self.cluster.gpu_nodepools()
        if self.pool:
            return [p for p in pools if o.name(p) == self.pool] or \
                [p for p in self.cluster.nodepools.values() if o.name(p) == self.pool]
        return pools

    def nodeclaims(self) -> list[Obj]:
        """NodeClaims nominated for the pod, else those of its candidate NodePools."""
        if self.nominated_nodeclaims:
            return [self.cluster.nodeclaims[n] for n in self.nominated_nodeclaims if n in self.cluster.nodeclaims]
        pools = {o.name(p) for p in self.candidate_nodepools()}
        return [c for c in self.cluster.nodeclaims.values()
                if o.text(c, "metadata", "labels", o.NODEPOOL_LABEL) in pools]

    def launching(self) -> list[Obj]:
        """The pod's NodeClaims still coming up inside the launch window (not Initialized, created recently)."""
        window = self.cluster.settings.launch_window_s
        out = []
        for claim in self.nodeclaims():
            age = self.cluster.age_s(o.created(claim))
            if o.condition(claim, m.NODECLAIM_INITIALIZED).get("status") != "True" and age is not None and age <= window:
                out.append(claim)
        return out

    def matching_nodes(self) -> list[Obj]:
        """GPU nodes whose labels the pod's nodeSelector and required affinity accept."""
        return self.cluster.fit(self.pod).matching

    def tolerated_nodes(self) -> list[Obj]:
        """``matching_nodes`` whose taints the pod tolerates."""
        return self.cluster.fit(self.pod).tolerated

    def eligible_nodes(self) -> list[Obj]:
        """Ready, schedulable GPU nodes whose labels the pod's selectors accept and whose taints it tolerates."""
        return self.cluster.fit(self.pod).eligible


def pending_gpu_pods(cluster: Cluster) -> list[PodView]:
    return sorted((PodView(cluster, p) for p in cluster.dump.of("Pod") if o.is_pending_unbound(p) and o.pod_gpus(p) > 0),
                  key=lambda v: v.key)


def describe(obj: Any) -> str:
    return o.ref(obj) if isinstance(obj, Mapping) else str(obj)
