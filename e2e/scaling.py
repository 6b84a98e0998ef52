"""Run one role's emitted Deployment and ScaledObject under the real KEDA and HPA, driven by the synthetic exporter.

What is changed in the emitted objects, and only this (each scenario records it in its report):

* every Prometheus trigger's ``serverAddress`` points at the local Prometheus (the stack's in-cluster Prometheus
  Service does not exist here);
* timing fields, so a scenario ends in minutes: ``cooldownPeriod``, ``initialCooldownPeriod`` and the HPA's
  scale-down ``stabilizationWindowSeconds`` are shortened to ``FAST_WINDOW_S`` (scale-down policies, thresholds,
  activation, fallback and queries are as emitted). ``FAST_WINDOW_S`` stays longer than the queries' 1 m rate
  windows plus a scrape and a KEDA poll, so, as with the emitted windows (300 to 900 s), the finished-request windows
  empty before a scale-down or a scale to zero may begin: a shorter window would let the role reach its minimum
  while the histogram means are still finite, and the NaN case would never be seen;
* ``on_kwok_nodes``: the role's emitted NodePool with its ``nodeClassRef`` swapped to the KWOKNodeClass and the pods on
  the default scheduler (``e2e.karpenter``), so Karpenter's kwok provider launches GPU nodes and kwok's pod stages
  make the pods Running and Ready (``default_scheduled`` alone: the pods on kube-scheduler, with no node). KEDA's fallback for a ``Value`` trigger divides by the Ready pods and gives up
  without one (``pkg/fallback/fallback.go`` L274-286, v2.20.2), and the HPA multiplies a ``Value`` metric by them:
  without Ready pods neither decides what it decides on a serving cluster. Without it the pods stay Pending (the
  scale-from-zero scenario, whose dump ``gpuscale doctor`` reads).

The role's vLLM pods are one simulated series set in the exporter (the sum over the role's pods, which is what every
emitted query reads), labelled as the role's PodMonitor would label them.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from e2e.acceptance import manifest_objects
from e2e.exporter import Exporter
from e2e.karpenter import default_scheduled, to_kwok
from e2e.kube import Kubectl
from e2e.prometheus import Prometheus, Target, pod_target
from e2e.report import Timeline
from gpuscale import labels
from gpuscale.manifests import front_door
from gpuscale.manifests.vllm import workload_name
from gpuscale.schedule.chart import priority_classes
from gpuscale.signals import promql

FAST_WINDOW_S = 120
"""Longer than a 1 m rate window + a 15 s scrape + a 15 s KEDA poll (see the module's docstring)."""
NODES_GONE_S = 180


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    for obj in objects:
        if obj["kind"] == kind and obj["metadata"]["name"] == name:
            return obj
    raise LookupError(f"no {kind} {name} among the emitted objects")


@dataclass
class Role:
    """One model role's objects as emitted, and what the harness changed in them."""

    model: str
    role: str
    deployment: dict[str, Any]
    scaled_object: dict[str, Any]
    pod_monitor: dict[str, Any]
    support: list[dict[str, Any]] = field(default_factory=list)
    """The pods' ServiceAccount and the KAI chart's PriorityClasses they name (admission refuses the pods without)."""
    emitted_pool: dict[str, Any] | None = None
    node_pool: dict[str, Any] | None = None
    """The NodePool applied with the role (``on_kwok_nodes``); None: no node ever appears for its pods."""
    changes: list[str] = field(default_factory=list)
    lane: str | None = None
    """The lane the role runs in beside others (``isolate``); None: alone on the cluster."""

    @classmethod
    def from_synth_dir(cls, manifests: Path, model: str, role: str) -> Role:
        """The role's objects from ``gpuscale synth --out``'s ``manifests/``, with the KAI chart's PriorityClasses of
        its ``charts.yaml`` beside."""
        charts = yaml.safe_load((manifests.parent / "charts.yaml").read_text(encoding="utf-8"))["charts"]
        kai = next(c for c in charts if c["chart"].endswith("kai-scheduler"))
        return cls.from_synth(manifest_objects(manifests), model, role, priority_classes(kai["values"]))

    @classmethod
    def from_synth(cls, objects: list[dict[str, Any]], model: str, role: str,
                   classes: Sequence[dict[str, Any]] = ()) -> Role:
        """The role's objects among the emitted ones; ``classes``: PriorityClasses the cluster has."""
        name = workload_name(model, role)  # type: ignore[arg-type]
        deployment = copy.deepcopy(find(objects, "Deployment", name))
        pod = deployment["spec"]["template"]["spec"]
        sa = pod.get("serviceAccountName")
        support = [o for o in objects if o["kind"] == "ServiceAccount" and o["metadata"]["name"] == sa
                   and o["metadata"].get("namespace") == deployment["metadata"]["namespace"]]
        support += [c for c in classes if c["metadata"]["name"] == pod.get("priorityClassName")]
        pool_name = pod.get("nodeSelector", {}).get(labels.NODE_POOL_LABEL)
        pool = copy.deepcopy(find(objects, "NodePool", pool_name)) if pool_name else None
        return cls(model, role, deployment, copy.deepcopy(find(objects, "ScaledObject", name)),
                   find(objects, "PodMonitor", name), support, pool)

    @property
    def zones(self) -> list[str]:
        """The zones the role's NodePool allows (what Karpenter's kwok provider must offer)."""
        if self.emitted_pool is None:
            return []
        return [v for r in self.emitted_pool["spec"]["template"]["spec"]["requirements"]
                if r["key"] == labels.ZONE_LABEL for v in r["values"]]

    def on_kwok_nodes(self) -> None:
        """Serve the role on nodes Karpenter's kwok provider launches from its emitted NodePool (module docstring)."""
        if self.emitted_pool is None:
            raise LookupError(f"{self.name}: its pods select no gpuscale NodePool")
        self.node_pool, changes = to_kwok(self.emitted_pool)
        self.changes += [f"NodePool {self.emitted_pool['metadata']['name']}: {c}" for c in changes]
        self.default_scheduled()

    def isolate(self, lane: str) -> None:
        """Run beside other copies of the role on one cluster: the namespaced objects in ``<namespace>-<lane>`` and
        the NodePool as ``<pool>-<lane>`` (its ``gpuscale.io/node-pool`` template label and the pods' nodeSelector
        with it), so no two scenarios share a Deployment, a ScaledObject or a node. The queries are unchanged: each
        lane has its own Prometheus, whose series carry the emitted namespace, as the PodMonitor labels them. Call
        before ``on_kwok_nodes``."""
        self.lane = lane
        namespace = f"{self.namespace}-{lane}"
        self.changes.append(f"namespace {self.namespace} -> {namespace} (the scenario's own lane)")
        self.support = [copy.deepcopy(o) for o in self.support]
        for obj in (self.deployment, self.scaled_object,
                    *(o for o in self.support if o["metadata"].get("namespace"))):
            obj["metadata"]["namespace"] = namespace
        if self.emitted_pool is None:
            return
        pool = copy.deepcopy(self.emitted_pool)
        old, new = pool["metadata"]["name"], f"{pool['metadata']['name']}-{lane}"
        pool["metadata"]["name"] = new
        template_labels = pool["spec"]["template"]["metadata"]["labels"]
        if template_labels.get(labels.NODE_POOL_LABEL) == old:
            template_labels[labels.NODE_POOL_LABEL] = new
        selector = self.deployment["spec"]["template"]["spec"].get("nodeSelector", {})
        if selector.get(labels.NODE_POOL_LABEL) == old:
            selector[labels.NODE_POOL_LABEL] = new
        self.emitted_pool = pool
        self.changes.append(f"NodePool {old} -> {new} (its {labels.NODE_POOL_LABEL} label and the pods' nodeSelector)")

    def default_scheduled(self) -> None:
        """The pods on kube-scheduler (KAI cannot be built here)."""
        self.deployment, changes = default_scheduled(self.deployment)
        self.changes += changes

    @property
    def name(self) -> str:
        return str(self.deployment["metadata"]["name"])

    @property
    def namespace(self) -> str:
        return str(self.deployment["metadata"]["namespace"])

    @property
    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.scaled_object["spec"]
        return spec

    def trigger(self, name: str) -> dict[str, Any]:
        for t in self.spec["triggers"]:
            if t.get("name") == name:
                return dict(t)
        raise LookupError(f"{self.name}: no trigger {name}; it has {[t.get('name') for t in self.spec['triggers']]}")

    def point_at(self, prometheus_url: str) -> None:
        for t in self.spec["triggers"]:
            if t["type"] == "prometheus":
                t["metadata"]["serverAddress"] = prometheus_url
        self.changes.append(f"triggers[*].metadata.serverAddress -> {prometheus_url}")

    def shorten_windows(self, seconds: int = FAST_WINDOW_S) -> None:
        spec = self.spec
        for key in ("cooldownPeriod", "initialCooldownPeriod"):
            if key in spec:
                self.changes.append(f"{key} {spec[key]} -> {seconds}")
                spec[key] = seconds
        down = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]
        self.changes.append(f"behavior.scaleDown.stabilizationWindowSeconds {down['stabilizationWindowSeconds']} -> "
                            f"{seconds}")
        down["stabilizationWindowSeconds"] = seconds

    def guard_windows(self) -> list[tuple[promql.Series, promql.Series]]:
        """The ``(sum, count)`` rate series of every histogram mean the role's ``Value`` triggers read (the latency
        guards), from the emitted queries' expression trees: when each count's rate is 0 no request finished in
        the window and the bare mean ``sum / count`` is 0/0."""
        out = []
        for t in self.spec["triggers"]:
            if t["type"] != "prometheus" or t.get("metricType") != "Value":
                continue
            for leaf in promql.parse(t["metadata"]["query"]).leaves():
                if leaf.window is not None and leaf.metric.endswith("_count"):
                    total = promql.Series(leaf.metric.removesuffix("_count") + "_sum", leaf.matchers, leaf.window)
                    out.append((total, leaf))
        return out

    def pod_name(self) -> str:
        """The simulated pod's name (its exporter path and ``pod`` label; no emitted query selects on it)."""
        return f"{self.name}-{self.lane}-sim-0" if self.lane else f"{self.name}-sim-0"

    def door_key(self) -> str:
        """The front door's series in the exporter (one per lane)."""
        door = front_door.epp_name(self.model)
        return f"{door}-{self.lane}" if self.lane else door

    def register(self, exporter: Exporter, prometheus: Prometheus) -> None:
        """The role's simulated pod series, scraped with the PodMonitor's labels and interval; and its front door's
        queue, when the ScaledObject has the door's trigger."""
        exporter.pod(self.pod_name(), self.model)
        exporter.idle(self.pod_name())
        labels = self.deployment["spec"]["template"]["metadata"]["labels"]
        target = pod_target(f"/pods/{self.pod_name()}/metrics", self.pod_monitor, self.pod_name(), labels)
        wanted = [target]
        if any(t.get("name") == front_door.TRIGGER_NAME for t in self.spec["triggers"]):
            door = front_door.epp_name(self.model)
            exporter.door(self.door_key())
            # the labels the door's ServiceMonitor gives its series: the emitted namespace (the query selects it)
            wanted.append(Target(f"/doors/{self.door_key()}/metrics",
                                 {"namespace": str(self.pod_monitor["metadata"]["namespace"]), "service": door},
                                 target.interval_s))
        prometheus.targets = [t for t in prometheus.targets if t.path not in {w.path for w in wanted}] + wanted
        prometheus.reload()

    def referenced_secrets(self) -> list[dict[str, Any]]:
        """A placeholder for each Secret key the Deployment's env reads (the Hugging Face token the user creates).
        KEDA resolves the scale target's container env before it builds the HPA and refuses the ScaledObject when a
        non-optional ``secretKeyRef`` is missing (``resolveEnv`` in ``pkg/scaling/resolver/scale_resolvers.go``,
        v2.20.2), so without them no HPA would exist."""
        keys: dict[str, set[str]] = {}
        for c in self.deployment["spec"]["template"]["spec"].get("containers", []):
            for e in c.get("env", []):
                ref = e.get("valueFrom", {}).get("secretKeyRef")
                if ref and not ref.get("optional"):
                    keys.setdefault(ref["name"], set()).add(ref["key"])
        return [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": n, "namespace": self.namespace},
                 "stringData": dict.fromkeys(sorted(k), "e2e-placeholder")} for n, k in sorted(keys.items())]

    def apply(self, kubectl: Kubectl) -> None:
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}}
        secrets = self.referenced_secrets()
        if secrets:
            self.changes.append(f"placeholder Secrets the env reads: {[s['metadata']['name'] for s in secrets]}")
        kubectl.apply([ns, *self.support, *secrets])
        if self.node_pool is not None:
            kubectl.apply([self.node_pool])
        kubectl.apply([self.deployment])
        kubectl.apply([self.scaled_object])

    def remove(self, kubectl: Kubectl, *, wait_nodes: bool = True) -> None:
        """Delete the role's ScaledObject, Deployment and NodePool, and (``wait_nodes``) wait, bounded, for the
        pool's nodes to go: a lane's own NodePool is deleted without the wait, no later scenario reuses its name."""
        kubectl.run(["delete", "scaledobject.keda.sh", self.name, "-n", self.namespace, "--ignore-not-found",
                     "--wait=true", "--timeout=60s"], check=False)
        kubectl.run(["delete", "deployment", self.name, "-n", self.namespace, "--ignore-not-found",
                     "--wait=true", "--timeout=60s"], check=False)
        if self.emitted_pool is None:
            return
        pool = self.emitted_pool["metadata"]["name"]
        kubectl.run(["delete", "nodepool.karpenter.sh", pool, "--ignore-not-found", f"--wait={str(wait_nodes).lower()}",
                     f"--timeout={NODES_GONE_S}s"], check=False)
        if not wait_nodes:
            return
        deadline = time.monotonic() + NODES_GONE_S
        while time.monotonic() < deadline and any(
                n["metadata"].get("labels", {}).get("karpenter.sh/nodepool") == pool for n in kubectl.items("nodes")):
            time.sleep(3)

    def replicas(self, kubectl: Kubectl) -> int:
        dep = kubectl.read(f"/apis/apps/v1/namespaces/{self.namespace}/deployments/{self.name}")
        return int(dep["spec"].get("replicas", 0))

    def pods(self, kubectl: Kubectl) -> list[dict[str, Any]]:
        sel = self.deployment["spec"]["selector"]["matchLabels"]
        selector = ",".join(f"{k}={v}" for k, v in sorted(sel.items()))
        found = kubectl.read(f"/api/v1/namespaces/{self.namespace}/pods", {"labelSelector": selector})
        return [p for p in found.get("items", []) if not p["metadata"].get("deletionTimestamp")]

    def ready(self, kubectl: Kubectl) -> int:
        """Pods Running with condition Ready True: what KEDA's fallback (``getReadyReplicasCount``, fallback.go
        L211-241) and the HPA's ``Value`` metrics count."""
        return sum(1 for p in self.pods(kubectl) if p.get("status", {}).get("phase") == "Running"
                   and any(c.get("type") == "Ready" and c.get("status") == "True"
                           for c in p["status"].get("conditions", [])))


def watch(probe: Callable[[], int], timeline: Timeline, phase: str, *, duration_s: float,
          until: Callable[[int], bool] | None = None, interval_s: float = 2.0) -> int:
    """Sample ``probe`` into ``timeline`` for ``duration_s`` or until ``until`` holds; return the last value."""
    deadline = time.monotonic() + duration_s
    value = probe()
    timeline.add(phase, value)
    while time.monotonic() < deadline and not (until is not None and until(value)):
        time.sleep(interval_s)
        value = probe()
        timeline.add(phase, value)
    return value


def scaled_object_status(kubectl: Kubectl, role: Role) -> dict[str, Any]:
    so = kubectl.read(f"/apis/keda.sh/v1alpha1/namespaces/{role.namespace}/scaledobjects/{role.name}")
    status = so.get("status", {})
    return {"conditions": [{k: c.get(k) for k in ("type", "status", "reason")} for c in status.get("conditions", [])],
            "health": status.get("health", {}), "lastActiveTime": status.get("lastActiveTime")}
