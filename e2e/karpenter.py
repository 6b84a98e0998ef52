"""Karpenter's core controllers with its kwok cloud provider, and the kwok controller that stands in for kubelets.

What stands in for AWS, and what is changed in the emitted objects (each scenario records it):

* EC2 -> the kwok provider (``sigs.k8s.io/karpenter/kwok`` v1.14.1). It offers the instance types of a JSON file
  (``--instance-types-file-path``, ``kwok/cloudprovider/helpers.go`` ``ConstructInstanceTypes``); the harness writes
  one entry per GPU type of gpuscale's catalogue, with the node capacity (``nvidia.com/gpu`` included) and the labels
  EKS and Karpenter set (``gpuscale.schedule.nodes``, the same functions ``gpuscale schedule`` builds its nodes from),
  offered on-demand and spot in every zone the NodePools name. Offering requirements become well-known labels and
  node labels (``newInstanceType``, ``addInstanceLabels``).
* EC2NodeClass -> KWOKNodeClass: the provider only provisions for its own class (``GetSupportedNodeClasses``), so each
  NodePool's ``nodeClassRef`` is swapped; the class is marked Ready (the NodePool readiness controller requires it,
  ``pkg/controllers/nodepool/readiness``), as Karpenter's own kwok e2e suite does.
* Pods use the default kube-scheduler (``schedulerName`` removed): KAI cannot be built here.
* Timing: only ``disruption.consolidateAfter``, where a scenario says so; the drift scenario moves the pool's drift
  window (its freeze budget's ``schedule``: the length, weekday rule, nodes and reasons stay as emitted) to the test's
  clock, and changes one template label to make the pool's NodeClaims drift (``drifted_template``).
"""

from __future__ import annotations

import copy
import datetime
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from e2e import acceptance
from e2e.build import binary, data_files
from e2e.controlplane import Controller
from e2e.kube import load_documents
from e2e.processes import free_port, http_ok
from gpuscale import labels
from gpuscale.manifests.karpenter import budgets_body
from gpuscale.schedule.nodes import capacity, instance_labels
from gpuscale.spec.catalogue import CATALOGUE, GpuInstanceType
from gpuscale.spec.topology import WEEKDAYS, DisruptionBudget, DriftWindow
from gpuscale.versions import E2E_KARPENTER, E2E_KWOK

NAMESPACE = "karpenter"
NODE_CLASS = "e2e-kwok"
KWOK_NODECLASS_GROUP = "karpenter.kwok.sh"
SPOT_PRICE_FRACTION = 0.6
KWOK_NODE_LEASE_S = 40
ROOT_VOLUME_BYTES = 500 * 1024**3
"""Ephemeral storage each kwok node reports (no EBS here)."""


def instance_types(zones: Iterable[str]) -> list[dict[str, Any]]:
    """The kwok provider's instance-type file: every catalogue GPU type, on-demand and spot in each zone."""
    zones = sorted(set(zones))
    out = []
    for it in sorted(CATALOGUE.values(), key=lambda t: t.name):
        out.append(_instance_type(it, zones))
    return out


def _instance_type(it: GpuInstanceType, zones: list[str]) -> dict[str, Any]:
    node_labels = instance_labels(it)
    static = [{"key": k, "operator": "In", "values": [v]} for k, v in sorted(node_labels.items())
              if k not in (labels.ZONE_LABEL, labels.KARPENTER_CAPACITY_TYPE_LABEL, "kubernetes.io/os",
                           "kubernetes.io/arch", "node.kubernetes.io/instance-type")]
    offerings = []
    for zone in zones:
        for capacity_type, factor in (("on-demand", 1.0), ("spot", SPOT_PRICE_FRACTION)):
            offerings.append({
                "Price": round(it.on_demand_usd_per_hour * factor, 4),
                "Available": True,
                "Requirements": [
                    {"key": labels.KARPENTER_CAPACITY_TYPE_LABEL, "operator": "In", "values": [capacity_type]},
                    {"key": labels.ZONE_LABEL, "operator": "In", "values": [zone]},
                    *static,
                ],
            })
    # the EFA devices Karpenter advertises on an EFA pool's node (one per efa-only interface its EC2NodeClass lists,
    # gpuscale.schedule.nodes.efa_devices): the provider knows no node class, so an EFA type offers all it has
    efa = {labels.EFA_RESOURCE: str(it.efa_interfaces)} if it.efa_interfaces else {}
    return {"name": it.name, "architecture": "amd64", "operatingSystems": ["linux"],
            "resources": {**capacity(it, ROOT_VOLUME_BYTES), **efa}, "offerings": offerings}


def kwok_nodeclass() -> dict[str, Any]:
    return {"apiVersion": f"{KWOK_NODECLASS_GROUP}/v1alpha1", "kind": "KWOKNodeClass",
            "metadata": {"name": NODE_CLASS}, "spec": {}}


def to_kwok(node_pool: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The NodePool with its ``nodeClassRef`` swapped to the KWOKNodeClass; and what was changed."""
    pool = copy.deepcopy(dict(node_pool))
    ref = pool["spec"]["template"]["spec"]["nodeClassRef"]
    changes = [f"nodeClassRef {ref['group']}/{ref['kind']}/{ref['name']} -> {KWOK_NODECLASS_GROUP}/KWOKNodeClass/"
               f"{NODE_CLASS}"]
    pool["spec"]["template"]["spec"]["nodeClassRef"] = {"group": KWOK_NODECLASS_GROUP, "kind": "KWOKNodeClass",
                                                        "name": NODE_CLASS}
    return pool, changes


DRIFT_LABEL = "gpuscale.io/e2e-drift"


def drifted_template(node_pool: Mapping[str, Any]) -> dict[str, Any]:
    """A merge patch that changes the NodePool's template (one label added), so its hash changes and every NodeClaim
    of the pool drifts: Karpenter v1.14.1 hashes ``spec.template`` (``pkg/apis/v1/nodepool.go`` ``Hash``) and marks a
    NodeClaim whose ``karpenter.sh/nodepool-hash`` differs ``Drifted`` (``NodePoolDrifted``,
    ``pkg/controllers/nodeclaim/disruption/drift.go`` ``areStaticFieldsDrifted``), as a new AMI pin does through the
    EC2NodeClass on EKS (which the kwok provider cannot drift)."""
    template_labels = dict(node_pool["spec"]["template"]["metadata"].get("labels", {}))
    template_labels[DRIFT_LABEL] = "1"
    return {"spec": {"template": {"metadata": {"labels": template_labels}}}}


def drift_window(node_pool: Mapping[str, Any]) -> tuple[int, DriftWindow]:
    """The index of the pool's drift freeze budget and the window it leaves open (``DriftWindow.from_freeze_budget``,
    the reading ``gpuscale diff`` uses)."""
    for i, budget in enumerate(node_pool["spec"]["disruption"].get("budgets", [])):
        if budget.get("nodes") == "0" and "Drifted" in budget.get("reasons", []) and budget.get("schedule"):
            window = DriftWindow.from_freeze_budget(budget["schedule"], budget["duration"])
            if window is None:
                raise ValueError(f"NodePool {node_pool['metadata']['name']}: budget {budget} is not a drift freeze")
            return i, window
    raise LookupError(f"NodePool {node_pool['metadata']['name']} emits no drift window (a Drifted budget of 0 nodes)")


def with_drift_window_at(node_pool: Mapping[str, Any], start: datetime.datetime) -> tuple[list[dict[str, Any]], str]:
    """The pool's budgets with its drift window moved to open at ``start`` (UTC, whole minutes; on ``start``'s
    weekday when the window has one), its length as emitted, built by the same ``DriftWindow.freeze_budget`` that
    emits it; and what was changed. Karpenter evaluates a budget's schedule in UTC (``Budget.IsActive``,
    ``pkg/apis/v1/nodepool.go`` v1.14.1: active while a cron hit lies within the last ``duration``)."""
    index, window = drift_window(node_pool)
    start = start.astimezone(datetime.UTC)
    moved = DriftWindow(start_utc=start.strftime("%H:%M"), duration=window.duration,
                        day=WEEKDAYS[(start.weekday() + 1) % 7] if window.day else None)
    budgets = [DisruptionBudget.model_validate(b) for b in node_pool["spec"]["disruption"]["budgets"]]
    before = budgets[index].schedule
    budgets[index] = moved.freeze_budget()
    change = (f"drift window {window.describe()} -> {moved.describe()} (freeze schedule {before} -> "
              f"{budgets[index].schedule}, duration {budgets[index].duration})")
    return budgets_body(budgets), change


def default_scheduled(workload: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A Deployment whose pods the default scheduler places (KAI is not built in this tier)."""
    out = copy.deepcopy(dict(workload))
    spec = out["spec"]["template"]["spec"]
    changes = []
    if spec.pop("schedulerName", None) is not None:
        changes.append("pod schedulerName removed (default-scheduler: KAI cannot be built here)")
    return out, changes


@dataclass
class Karpenter(Controller):
    zones: list[str] = field(default_factory=list)

    def start(self) -> None:
        assert self.plane.kubeconfig is not None
        self.directory.mkdir(parents=True, exist_ok=True)
        crds = [d for pattern in ("kwok/apis/crds/*.yaml", "kwok/charts/crds/*.yaml")
                for path in data_files(E2E_KARPENTER, pattern) for d in load_documents(path)
                if d.get("kind") == "CustomResourceDefinition"
                and d["metadata"]["name"].split(".", 1)[1] not in ("karpenter.sh",)]
        acceptance.install_crds(self.kubectl, crds)
        self.kubectl.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
                            kwok_nodeclass()])
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.kubectl.patch("kwoknodeclass", NODE_CLASS, {"status": {"conditions": [
            {"type": "Ready", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": now,
             "observedGeneration": 1}]}}, subresource="status")

        stages = [d for pattern in ("kustomize/stage/node/fast/*.yaml", "kustomize/stage/node/heartbeat-with-lease/*.yaml",
                                    "kustomize/stage/pod/fast/*.yaml")
                  for path in data_files(E2E_KWOK, pattern) for d in load_documents(path)]
        stage_file = self.directory / "kwok-stages.yaml"
        stage_file.write_text(yaml.safe_dump_all(stages, sort_keys=False), encoding="utf-8")
        kwok = self.supervisor.start("kwok", [
            str(binary(E2E_KWOK, "kwok")), f"--kubeconfig={self.plane.kubeconfig}", f"--config={stage_file}",
            "--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            "--node-ip=127.0.0.1", f"--server-address=127.0.0.1:{free_port()}", "--cidr=10.244.0.0/16",
            # the heartbeat-with-lease stage only rewrites node status every 10-20 min: the node's Lease is the
            # heartbeat, and kwok renews one only with a lease duration. Without it the node lifecycle controller marks
            # every node NotReady 40-50 s after it registers, and its pods NotReady, which nothing marks Ready again
            # (seen in the drift scenario). 40 s is kwok v0.8.0's own default for a KwokConfiguration
            # (pkg/apis/config/v1alpha1 zz_generated.defaults.go), which a --config of Stages alone does not get.
            f"--node-lease-duration-seconds={KWOK_NODE_LEASE_S}",
        ])

        types_file = self.directory / "instance-types.json"
        types_file.write_text(json.dumps(instance_types(self.zones), indent=1), encoding="utf-8")
        health = free_port()
        env = {"KUBECONFIG": str(self.plane.kubeconfig), "SYSTEM_NAMESPACE": NAMESPACE,
               "DISABLE_LEADER_ELECTION": "true", "METRICS_PORT": str(free_port()), "HEALTH_PROBE_PORT": str(health),
               "INSTANCE_TYPES_FILE_PATH": str(types_file), "LOG_LEVEL": "debug",
               "DISABLE_CLUSTER_STATE_OBSERVABILITY": "true"}
        karpenter = self.supervisor.start("karpenter", [str(binary(E2E_KARPENTER, "karpenter-kwok"))], env=env)
        # the probe binds every interface (no bind-address option): the private network namespace keeps it local
        self.supervisor.wait_ready(karpenter, lambda: http_ok(f"http://127.0.0.1:{health}/readyz"), timeout_s=120)
        if not kwok.alive:
            self.supervisor.wait_ready(kwok, lambda: False, timeout_s=0)
