"""Cluster dumps built from what gpuscale synthesizes for a shipped stack, plus what the controllers would write.

The objects are the real ones: NodePools and Queues as synthesized, pods as their Deployment's ReplicaSet would create
them and nodes as Karpenter would launch them for the pool (``gpuscale.schedule``'s snapshot builders, the same ones
``gpuscale schedule`` feeds the real KAI Scheduler). The statuses and events are added here, each in the form the
controller's source at the pinned tag writes it (``gpuscale.doctor.messages`` cites every one).
"""

from __future__ import annotations

import copy
import datetime
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuscale import labels
from gpuscale.schedule.snapshot import build_snapshot
from gpuscale.sizing import size_platform
from gpuscale.spec.platform import PlatformSpec
from gpuscale.synth.render import SynthResult

NOW = datetime.datetime(2026, 11, 30, 12, 0, tzinfo=datetime.UTC)
HOUR = 3600.0

Obj = dict[str, Any]


def ts(seconds_ago: float) -> str:
    return (NOW - datetime.timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(kind: str, status: str, reason: str = "", message: str = "", seconds_ago: float = HOUR) -> Obj:
    return {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": ts(seconds_ago)}


@dataclass
class DumpBuilder:
    spec: PlatformSpec
    synth: SynthResult
    items: list[Obj] = field(default_factory=list)
    _events: int = 0

    @property
    def objects(self) -> list[Obj]:
        return [o for _, o in self.synth.kubernetes_objects()]

    def synthesized(self, kind: str, name: str | None = None) -> list[Obj]:
        return [copy.deepcopy(o) for o in self.objects if o.get("kind") == kind
                and (name is None or o["metadata"]["name"] == name)]

    # --- the objects gpuscale emits, as they look once applied ----------------------------------------------------

    def nodepool(self, name: str, *, gpus_used: float = 0, seconds_ago: float = 24 * HOUR) -> Obj:
        """The synthesized NodePool with Karpenter's status (``status.resources``, ``NodeClassReady``/``Ready``)."""
        (pool,) = self.synthesized("NodePool", name)
        pool["metadata"]["creationTimestamp"] = ts(seconds_ago)
        pool["status"] = {"resources": {labels.GPU_RESOURCE: str(int(gpus_used))},
                          "conditions": [condition("NodeClassReady", "True"), condition("Ready", "True")]}
        self.items.append(pool)
        return pool

    def queues(self) -> list[Obj]:
        out = self.synthesized("Queue")
        for q in out:
            q["metadata"]["creationTimestamp"] = ts(24 * HOUR)
        self.items.extend(out)
        return out

    def _snapshot(self, model: str, role: str, replicas: int) -> dict[str, Any]:
        snap = build_snapshot(self.spec, size_platform(self.spec), self.objects, self.synth.charts(),
                              [{(model, role): replicas}])
        return snap.input

    def nodes(self, pool: str, count: int, *, seconds_ago: float = 6 * HOUR, gpus: int | None = None) -> list[Obj]:
        """Nodes of ``pool`` as Karpenter launches them (labels, taints, allocatable), Ready."""
        role = next((m.name, r) for m in self.spec.models for r in m.serving.roles)
        candidates = [n for n in self._snapshot(*role, 1)["cluster"]["nodes"]
                      if n["metadata"]["labels"].get(labels.NODE_POOL_LABEL) == pool]
        assert len(candidates) >= count, f"{pool} launches at most {len(candidates)} nodes"
        out = []
        for node in copy.deepcopy(candidates[:count]):
            node["metadata"]["creationTimestamp"] = ts(seconds_ago)
            node["status"]["conditions"] = [condition("Ready", "True", "KubeletReady", seconds_ago=seconds_ago)]
            if gpus is not None:
                node["status"]["allocatable"][labels.GPU_RESOURCE] = str(gpus)
            out.append(node)
        self.items.extend(out)
        return out

    def pods(self, model: str, role: str, replicas: int, *, seconds_ago: float = 20 * 60,
             podgroup: bool = True) -> list[Obj]:
        """The first ``replicas`` pods of a role as its ReplicaSet creates them (those an earlier call made are
        returned as they are now); new ones are Pending and grouped by KAI's pod grouper (a PodGroup per Deployment
        pod, ``pod-group-name`` annotation) unless ``podgroup`` is false."""
        have = {(i["metadata"]["namespace"], i["metadata"]["name"]): i for i in self.items if i["kind"] == "Pod"}
        pods = [have.get((p["metadata"]["namespace"], p["metadata"]["name"]), p)
                for wave in self._snapshot(model, role, replicas)["waves"] for p in wave]
        for pod in pods:
            if any(pod is i for i in have.values()):  # created by an earlier call: keep it as it is
                continue
            self.items.append(pod)
            pod["metadata"]["creationTimestamp"] = ts(seconds_ago)
            pod["status"] = {"phase": "Pending"}
            if podgroup:
                name = f"pg-{pod['metadata']['name']}-{pod['metadata']['uid']}"
                pod["metadata"]["annotations"]["pod-group-name"] = name
                queue = pod["metadata"]["labels"][labels.KAI_QUEUE_LABEL]
                self.items.append({
                    "apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
                    "metadata": {"name": name, "namespace": pod["metadata"]["namespace"],
                                 "creationTimestamp": ts(seconds_ago)},
                    "spec": {"minMember": 1, "queue": queue, "markUnschedulable": True},
                    "status": {},
                })
        return pods

    def bind(self, pod: Obj, node: Obj) -> None:
        pod["spec"]["nodeName"] = node["metadata"]["name"]
        pod["status"] = {"phase": "Running"}
        pod["metadata"]["annotations"].pop("pod-group-name", None)

    def podgroup_of(self, pod: Obj) -> Obj:
        name = pod["metadata"]["annotations"]["pod-group-name"]
        (pg,) = [i for i in self.items if i["kind"] == "PodGroup" and i["metadata"]["name"] == name]
        return pg

    # --- what the controllers write ----------------------------------------------------------------------------------

    def event(self, involved: Obj, reason: str, message: str, *, component: str, seconds_ago: float = 30,
              type_: str = "Warning") -> Obj:
        self._events += 1
        meta = involved["metadata"]
        event = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{meta['name']}.{self._events:08x}", "namespace": meta.get("namespace", "default"),
                         "creationTimestamp": ts(seconds_ago)},
            "involvedObject": {"kind": involved["kind"], "name": meta["name"],
                               **({"namespace": meta["namespace"]} if meta.get("namespace") else {})},
            "reason": reason, "message": message, "type": type_, "source": {"component": component},
            "firstTimestamp": ts(seconds_ago), "lastTimestamp": ts(seconds_ago), "count": 1,
        }
        self.items.append(event)
        return event

    def kai_unschedulable(self, pod: Obj, message: str, *, reasons: tuple[str, ...] = ()) -> None:
        """KAI's ``markTaskUnschedulable`` and ``markPodGroupUnschedulable`` (default_status_updater.go, v0.17.0)."""
        self.event(pod, "Unschedulable", message, component="kai-scheduler")
        pod["status"]["conditions"] = [condition("PodScheduled", "False", "Unschedulable", message, seconds_ago=60)]
        pg = self.podgroup_of(pod)
        pg["status"]["schedulingConditions"] = [{
            "type": "UnschedulableOnNodePool", "nodePool": "default", "reason": "Unschedulable", "message": message,
            "status": "True", "transitionID": "0", "lastTransitionTime": ts(60),
            "reasons": [{"reason": r, "message": message} for r in reasons],
        }]

    def karpenter_failed(self, pod: Obj, error: str) -> None:
        """``PodFailedToScheduleEvent`` (karpenter v1.14.1 scheduling/events.go)."""
        self.event(pod, "FailedScheduling", f"Failed to schedule pod, {error}", component="karpenter")

    def nodeclaim(self, pool: str, name: str, *, seconds_ago: float, launched: Obj | None = None,
                  registered: bool = False, initialized: bool = False) -> Obj:
        claim = {
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "creationTimestamp": ts(seconds_ago),
                         "labels": {"karpenter.sh/nodepool": pool}},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": pool}},
            "status": {"conditions": [
                launched or condition("Launched", "True", "Launched", seconds_ago=seconds_ago - 5),
                condition("Registered", "True" if registered else "Unknown",
                          "Registered" if registered else "AwaitingReconciliation", seconds_ago=seconds_ago - 5),
                condition("Initialized", "True" if initialized else "Unknown",
                          "Initialized" if initialized else "AwaitingReconciliation", seconds_ago=seconds_ago - 5),
            ]},
        }
        self.items.append(claim)
        return claim

    def nominated(self, pod: Obj, claim: str, *, seconds_ago: float = 40) -> None:
        """``NominatePodEvent`` (scheduling/events.go)."""
        self.event(pod, "Nominated", f"Pod should schedule on: nodeclaim/{claim}", component="karpenter",
                   seconds_ago=seconds_ago, type_="Normal")

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
                                    "items": self.items}), encoding="utf-8")
        return path
