"""Run one role's emitted Deployment and ScaledObject under the real KEDA and HPA, driven by the synthetic exporter.

What is changed in the emitted objects, and only this (each scenario records it in its report):

* every Prometheus trigger's ``serverAddress`` points at the local Prometheus (the stack's in-cluster Prometheus
  Service does not exist here);
* timing fields, so a scenario ends in minutes: ``cooldownPeriod``, ``initialCooldownPeriod`` and the HPA's
  scale-down ``stabilizationWindowSeconds`` are shortened to ``FAST_WINDOW_S`` (scale-down policies, thresholds,
  activation, fallback and queries are as emitted);
* the Deployment's pods are left Pending (no nodes in the KEDA scenarios): KEDA and the HPA act on the scale
  subresource; every trigger the scenarios move is ``AverageValue``, which the HPA divides by the target without
  reading pods (``pkg/controller/podautoscaler/replica_calculator.go`` ``GetExternalPerPodMetricReplicas``).

The role's vLLM pods are one simulated series set in the exporter, labelled as the role's PodMonitor would label them.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from e2e.exporter import Exporter
from e2e.kube import Kubectl
from e2e.prometheus import Prometheus, pod_target
from e2e.report import Timeline
from gpuscale.manifests import front_door
from gpuscale.manifests.vllm import workload_name

FAST_WINDOW_S = 20


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
    changes: list[str] = field(default_factory=list)

    @classmethod
    def from_synth(cls, objects: list[dict[str, Any]], model: str, role: str) -> Role:
        name = workload_name(model, role)  # type: ignore[arg-type]
        return cls(model, role, copy.deepcopy(find(objects, "Deployment", name)),
                   copy.deepcopy(find(objects, "ScaledObject", name)), find(objects, "PodMonitor", name))

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

    def pod_name(self) -> str:
        return f"{self.name}-sim-0"

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
            exporter.door(door)
            from e2e.prometheus import Target

            wanted.append(Target(f"/doors/{door}/metrics", {"namespace": self.namespace, "service": door},
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
        kubectl.apply([ns, *secrets, self.deployment])
        kubectl.apply([self.scaled_object])

    def remove(self, kubectl: Kubectl) -> None:
        kubectl.run(["delete", "scaledobject.keda.sh", self.name, "-n", self.namespace, "--ignore-not-found",
                     "--wait=true", "--timeout=60s"], check=False)
        kubectl.run(["delete", "deployment", self.name, "-n", self.namespace, "--ignore-not-found",
                     "--wait=true", "--timeout=60s"], check=False)

    def replicas(self, kubectl: Kubectl) -> int:
        dep = kubectl.get("deployment", self.name, namespace=self.namespace)
        return int(dep["spec"].get("replicas", 0))


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
    so = kubectl.get("scaledobject.keda.sh", role.name, namespace=role.namespace)
    status = so.get("status", {})
    return {"conditions": [{k: c.get(k) for k in ("type", "status", "reason")} for c in status.get("conditions", [])],
            "health": status.get("health", {})}
