"""Karpenter v1.14.1 (kwok provider) over the prod stack's emitted ``l40s`` NodePool and the ``search-8b`` Deployment
that targets it. ``e2e.karpenter`` says what stands in for EC2 and what is changed (the node class reference, the
default scheduler for the pods; ``consolidateAfter`` only in the consolidation scenario, the drift window's place in
the day and one template label only in the drift scenario)."""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from e2e.acceptance import manifest_objects
from e2e.karpenter import default_scheduled, drifted_template, to_kwok, with_drift_window_at
from e2e.report import Timeline
from e2e.scaling import find
from gpuscale import labels
from gpuscale.schedule.chart import priority_classes
from gpuscale.schedule.nodes import parse_quantity

POOL = "l40s"
WORKLOAD = "search-8b-aggregated"
LAUNCH_S = 240
"""Batching (up to 10 s), launch, kwok registration and scheduling on a loaded 2-core machine."""
FAST_CONSOLIDATE_AFTER = "30s"
DISRUPTION_POLL_S = 10
"""Karpenter's disruption loop runs every 10 s (``pollingPeriod``, ``pkg/controllers/disruption/controller.go``
v1.14.1)."""
DRIFT_HOLD_S = 6 * DISRUPTION_POLL_S
"""How long drifted nodes are watched outside the window: six passes of the disruption loop."""
FROZEN_FOR = datetime.timedelta(minutes=30)
"""Outside the window: it opens this long after the scenario starts (longer than the scenario's frozen phase)."""
OPENED_AGO = datetime.timedelta(minutes=2)
INITIALIZED_LABEL = "karpenter.sh/initialized"
"""``v1.NodeInitializedLabelKey`` (``pkg/apis/v1/labels.go`` v1.14.1): set once the node is Ready with its resources."""


class Setup:
    def __init__(self, harness: Any, synth: Any, consolidate_after: str | None = None) -> None:
        self.harness = harness
        self.kubectl = harness.kubectl
        objects = manifest_objects(synth)
        self.pool, self.changes = to_kwok(find(objects, "NodePool", POOL))
        if consolidate_after is not None:
            before = self.pool["spec"]["disruption"]["consolidateAfter"]
            self.pool["spec"]["disruption"]["consolidateAfter"] = consolidate_after
            self.changes.append(f"disruption.consolidateAfter {before} -> {consolidate_after}")
        self.deployment, more = default_scheduled(find(objects, "Deployment", WORKLOAD))
        self.changes += more
        self.deployment["spec"]["replicas"] = 0
        ns = self.deployment["metadata"]["namespace"]
        sa = self.deployment["spec"]["template"]["spec"].get("serviceAccountName")
        charts = yaml.safe_load((synth.parent / "charts.yaml").read_text())["charts"]
        kai = next(c for c in charts if c["chart"].endswith("kai-scheduler"))
        self.support = [o for o in objects if o["kind"] == "Namespace" and o["metadata"]["name"] == ns]
        self.support += [o for o in objects if o["kind"] == "ServiceAccount" and o["metadata"]["name"] == sa]
        self.support += priority_classes(kai["values"])  # the KAI chart's classes the pods name
        self.pdb = find(objects, "PodDisruptionBudget", WORKLOAD)
        self.support.append(self.pdb)
        self.namespace = ns

    @property
    def allowed_types(self) -> list[str]:
        for r in self.pool["spec"]["template"]["spec"]["requirements"]:
            if r["key"] == "node.kubernetes.io/instance-type":
                return list(r["values"])
        raise LookupError("the NodePool has no instance-type requirement")

    def apply(self) -> None:
        self.kubectl.apply(self.support)
        self.kubectl.apply([self.pool])
        self.kubectl.apply([self.deployment])

    def scale(self, replicas: int) -> None:
        self.kubectl.run(["scale", "deployment", WORKLOAD, "-n", self.namespace, f"--replicas={replicas}"])

    def nodes(self) -> list[dict[str, Any]]:
        return [n for n in self.kubectl.items("nodes")
                if n["metadata"].get("labels", {}).get("karpenter.sh/nodepool") == POOL]

    def pods(self) -> list[dict[str, Any]]:
        return [p for p in self.kubectl.items("pods", namespace=self.namespace)
                if p["metadata"].get("labels", {}).get(labels.ROLE_LABEL) == "aggregated"
                and p["metadata"].get("labels", {}).get(labels.MODEL_LABEL) == "search-8b"
                and not p["metadata"].get("deletionTimestamp")]

    def running(self) -> list[dict[str, Any]]:
        return [p for p in self.pods() if p.get("status", {}).get("phase") == "Running" and p["spec"].get("nodeName")]

    def ready(self) -> list[dict[str, Any]]:
        return [p for p in self.running() if any(c["type"] == "Ready" and c["status"] == "True"
                                                 for c in p["status"].get("conditions", []))]

    def node_claims(self) -> list[dict[str, Any]]:
        return [c for c in self.kubectl.items("nodeclaims.karpenter.sh")
                if c["metadata"].get("labels", {}).get("karpenter.sh/nodepool") == POOL]

    def teardown(self) -> None:
        self.kubectl.run(["delete", "deployment", WORKLOAD, "-n", self.namespace, "--ignore-not-found",
                          "--wait=true", "--timeout=120s"], check=False)
        self.kubectl.run(["delete", "nodepool.karpenter.sh", POOL, "--ignore-not-found", "--wait=true",
                          "--timeout=180s"], check=False)
        deadline = time.monotonic() + 180
        while self.nodes() and time.monotonic() < deadline:
            time.sleep(3)


@pytest.fixture
def pool(harness: Any, synth_dir: Any, request: pytest.FixtureRequest) -> Iterator[Setup]:
    synth = synth_dir("prod")
    param = getattr(request, "param", None)
    setup = Setup(harness, synth, param if param != "drift" else None)
    if param == "drift":  # frozen when the scenario starts: the window opens FROZEN_FOR later
        setup.pool["spec"]["disruption"]["budgets"], change = with_drift_window_at(
            setup.pool, datetime.datetime.now(datetime.UTC) + FROZEN_FOR)
        setup.changes.append(change)
    zones = [v for r in setup.pool["spec"]["template"]["spec"]["requirements"]
             if r["key"] == labels.ZONE_LABEL for v in r["values"]]
    harness.ensure_karpenter(zones)
    setup.teardown()
    setup.apply()
    yield setup
    setup.teardown()


def node_summary(node: dict[str, Any]) -> dict[str, Any]:
    meta = node["metadata"]
    return {"name": meta["name"], "instance_type": meta["labels"].get("node.kubernetes.io/instance-type"),
            "gpus": node["status"].get("capacity", {}).get(labels.GPU_RESOURCE),
            "taints": node["spec"].get("taints", []),
            "labels": {k: v for k, v in meta["labels"].items() if k.startswith(("gpuscale.io/", "nvidia.com/",
                                                                                 "karpenter.sh/nodepool"))}}


def test_a_pending_gpu_pod_gets_a_node_of_an_allowed_type_with_the_pool_s_taint_and_labels(
        pool: Setup, scenario: Any) -> None:
    scenario.observed["changes"] = pool.changes
    pool.scale(1)
    timeline = Timeline()
    deadline = time.monotonic() + LAUNCH_S
    while not pool.running() and time.monotonic() < deadline:
        timeline.add("launch", len(pool.nodes()))
        time.sleep(3)
    running = pool.running()
    scenario.observed.update(nodes=[node_summary(n) for n in pool.nodes()], timeline=timeline.samples)
    assert running, f"no pod running after {LAUNCH_S} s; nodes {scenario.observed['nodes']}"
    node = next(n for n in pool.nodes() if n["metadata"]["name"] == running[0]["spec"]["nodeName"])
    meta = node["metadata"]
    assert meta["labels"]["node.kubernetes.io/instance-type"] in pool.allowed_types
    for key, value in pool.pool["spec"]["template"]["metadata"]["labels"].items():
        assert meta["labels"].get(key) == value, key
    taints = {(t["key"], t.get("value"), t["effect"]) for t in node["spec"].get("taints", [])}
    for t in pool.pool["spec"]["template"]["spec"]["taints"]:
        assert (t["key"], t.get("value"), t["effect"]) in taints
    assert parse_quantity(node["status"]["capacity"][labels.GPU_RESOURCE]) >= 1


def test_the_pool_s_gpu_limit_stops_launches(pool: Setup, scenario: Any) -> None:
    limit = parse_quantity(pool.pool["spec"]["limits"][labels.GPU_RESOURCE])
    wanted = int(limit) + 4
    scenario.observed.update(changes=pool.changes, gpu_limit=limit, replicas=wanted)
    pool.scale(wanted)
    timeline = Timeline()
    stable_since, last = time.monotonic(), -1
    deadline = time.monotonic() + LAUNCH_S + 120
    while time.monotonic() < deadline:
        count = len(pool.nodes())
        timeline.add("launch", count)
        if count != last:
            stable_since, last = time.monotonic(), count
        elif count > 0 and time.monotonic() - stable_since > 45:
            break
        time.sleep(3)
    nodes = pool.nodes()
    gpus = sum(parse_quantity(n["status"]["capacity"].get(labels.GPU_RESOURCE, 0)) for n in nodes)
    pending = [p for p in pool.pods() if not p["spec"].get("nodeName")]
    scenario.observed.update(nodes=len(nodes), node_gpus=gpus, pending_pods=len(pending), timeline=timeline.samples)
    assert nodes, "no node launched"
    assert gpus <= limit, f"{gpus} GPUs launched, limit {limit}"
    assert gpus == limit, f"launches stopped at {gpus} GPUs before the limit {limit} with {len(pending)} pods pending"
    assert len(pending) == wanted - int(limit)


@pytest.mark.parametrize("pool", [FAST_CONSOLIDATE_AFTER], indirect=True)
def test_when_empty_removes_the_empty_node_and_never_the_serving_one(pool: Setup, scenario: Any) -> None:
    scenario.observed["changes"] = pool.changes
    pool.scale(2)
    deadline = time.monotonic() + LAUNCH_S
    while len(pool.running()) < 2 and time.monotonic() < deadline:
        time.sleep(3)
    assert len(pool.running()) == 2, f"two replicas did not start: {[node_summary(n) for n in pool.nodes()]}"
    pool.scale(1)
    deadline = time.monotonic() + 60
    while len(pool.pods()) > 1 and time.monotonic() < deadline:
        time.sleep(2)
    serving = pool.running()[0]
    serving_node, serving_uid = serving["spec"]["nodeName"], serving["metadata"]["uid"]
    timeline = Timeline()
    consolidate_after = float(parse_quantity(FAST_CONSOLIDATE_AFTER.rstrip("s")))
    # the removal: consolidateAfter, a disruption pass, the node's drain and deletion on a loaded machine
    watch_s = consolidate_after + 150
    # after it, the serving node stays watched for as long as an empty node took to become a candidate, and three
    # disruption passes more: any decision to take it would show within that
    keep_s = consolidate_after + 3 * DISRUPTION_POLL_S
    deadline = time.monotonic() + watch_s
    removed_at = None
    while time.monotonic() < deadline:
        names = sorted(n["metadata"]["name"] for n in pool.nodes())
        uids = [p["metadata"]["uid"] for p in pool.running()]
        timeline.add("empty", {"nodes": names, "serving_pod_running": serving_uid in uids})
        if len(names) == 1 and removed_at is None:
            removed_at = timeline.samples[-1]["t_s"]
            deadline = time.monotonic() + keep_s
        time.sleep(3)
    final = sorted(n["metadata"]["name"] for n in pool.nodes())
    scenario.observed.update(serving_node=serving_node, empty_node_removed_after_s=removed_at,
                             watched_after_removal_s=round(timeline.samples[-1]["t_s"] - (removed_at or 0), 1),
                             final_nodes=final, timeline=timeline.samples)
    assert removed_at is not None, f"the empty node was not removed within {watch_s} s"
    assert final == [serving_node], f"nodes at the end {final}; the serving pod's node {serving_node}"
    assert all(s["value"]["serving_pod_running"] and serving_node in s["value"]["nodes"] for s in timeline.samples), \
        "the serving pod or its node went away"


def _condition(obj: dict[str, Any], kind: str) -> bool:
    return any(c["type"] == kind and c["status"] == "True" for c in obj.get("status", {}).get("conditions", []))


def _disrupting(node: dict[str, Any]) -> bool:
    """Karpenter has taken the node for disruption: its ``karpenter.sh/disrupted`` taint (``pkg/apis/v1/taints.go``)
    or a deletion under way."""
    return bool(node["metadata"].get("deletionTimestamp")) or any(
        t["key"] == "karpenter.sh/disrupted" for t in node["spec"].get("taints", []))


def _budget_sample(pool: Setup) -> dict[str, Any]:
    """The pool's nodes and those that count against its disruption budget as Karpenter counts them
    (``BuildDisruptionBudgetMapping``, ``pkg/controllers/disruption/helpers.go`` L266-294 v1.14.1: among the
    initialized nodes, L274-276, i.e. labelled ``karpenter.sh/initialized=true``, ``StateNode.Initialized``,
    ``pkg/controllers/state/statenode.go`` L350-357, a node taken for disruption, or not Ready, unless its NodeClaim
    is ``InstanceTerminating``, i.e. already gone from the cloud). A replacement that has registered but is not
    initialized yet does not count (the first whole run on the SLO-derived tree counted one, and failed on it)."""
    nodes = pool.nodes()
    terminating = {c.get("status", {}).get("nodeName") for c in pool.node_claims()
                   if _condition(c, "InstanceTerminating")}
    consuming = [n["metadata"]["name"] for n in nodes if n["metadata"]["name"] not in terminating
                 and n["metadata"].get("labels", {}).get(INITIALIZED_LABEL) == "true"
                 and (_disrupting(n) or not _condition(n, "Ready"))]
    return {"nodes": sorted(n["metadata"]["name"] for n in nodes),
            "disrupting": sorted(n["metadata"]["name"] for n in nodes if _disrupting(n)),
            "consuming_budget": sorted(consuming), "ready_pods": len(pool.ready())}


@pytest.mark.parametrize("pool", ["drift"], indirect=True)
def test_drift_waits_for_the_window_then_rolls_one_node_at_a_time_within_the_pdb(pool: Setup, scenario: Any) -> None:
    replicas = 2
    min_available = int(pool.pdb["spec"]["minAvailable"])
    scenario.observed.update(changes=pool.changes, replicas=replicas, pdb_min_available=min_available,
                             budgets=pool.pool["spec"]["disruption"]["budgets"])
    assert any(b.get("nodes") == "1" and not b.get("reasons") for b in pool.pool["spec"]["disruption"]["budgets"]), \
        "the pool emits no one-node budget"
    pool.scale(replicas)
    deadline = time.monotonic() + LAUNCH_S
    while len(pool.ready()) < replicas and time.monotonic() < deadline:
        time.sleep(3)
    assert len(pool.ready()) == replicas, f"{replicas} replicas not ready: {[node_summary(n) for n in pool.nodes()]}"
    old = sorted(n["metadata"]["name"] for n in pool.nodes())
    assert len(old) == replicas, f"expected one node per replica, got {old}"
    claims_before = sorted(c["metadata"]["name"] for c in pool.node_claims())

    pool.kubectl.patch("nodepool.karpenter.sh", POOL, drifted_template(pool.pool))
    deadline = time.monotonic() + 90
    while not (claims := pool.node_claims()) or not all(_condition(c, "Drifted") for c in claims):
        assert time.monotonic() < deadline, f"NodeClaims not Drifted 90 s after the template change: {claims}"
        time.sleep(2)
    frozen = Timeline()
    deadline = time.monotonic() + DRIFT_HOLD_S
    while time.monotonic() < deadline:
        frozen.add("frozen", {**_budget_sample(pool), "claims": len(pool.node_claims())})
        time.sleep(3)
    scenario.observed.update(old_nodes=old, frozen_timeline=frozen.samples)
    for sample in frozen.samples:
        value = sample["value"]
        assert value["nodes"] == old and not value["disrupting"] and value["claims"] == len(claims_before), \
            f"drift disrupted outside the window at {sample['t_s']} s: {value}"

    budgets, change = with_drift_window_at(pool.pool, datetime.datetime.now(datetime.UTC) - OPENED_AGO)
    pool.changes.append(change)
    pool.kubectl.patch("nodepool.karpenter.sh", POOL, {"spec": {"disruption": {"budgets": budgets}}})
    rolling = Timeline()
    deadline = time.monotonic() + 2 * LAUNCH_S + 120
    while time.monotonic() < deadline:
        sample = _budget_sample(pool)
        rolling.add("open", sample)
        if not set(old) & set(sample["nodes"]) and sample["ready_pods"] == replicas:
            break
        time.sleep(2)
    values = rolling.values("open")
    # each old node's disruption: from the first sample it is taken (tainted or deleting) to the last one it exists;
    # samples are a few seconds apart (kubectl calls), so an overlap shorter than that could be missed
    spans = {}
    for name in old:
        taken = [s["t_s"] for s in rolling.samples if name in s["value"]["disrupting"]]
        seen = [s["t_s"] for s in rolling.samples if name in s["value"]["nodes"]]
        spans[name] = (taken[0] if taken else None, seen[-1] if seen else None)
    scenario.observed.update(roll_timeline=rolling.samples, disruption_spans_s=spans,
                             max_consuming_budget_at_once=max(len(v["consuming_budget"]) for v in values),
                             min_ready_pods=min(v["ready_pods"] for v in values),
                             final_nodes=values[-1]["nodes"])
    assert not set(old) & set(values[-1]["nodes"]), f"drifted nodes still there after the window opened: {values[-1]}"
    assert values[-1]["ready_pods"] == replicas, f"replicas not ready on the new nodes: {values[-1]}"
    assert all(taken is not None for taken, _ in spans.values()), f"a node left without being seen disrupted: {spans}"
    over = [s for s in rolling.samples if len(s["value"]["consuming_budget"]) > 1]
    assert not over, f"more than one node against the one-node budget: {over[:3]}"
    first, second = sorted(spans.values(), key=lambda s: s[0] or 0)
    assert first[0] is not None and second[0] is not None and second[0] > first[0], \
        f"both nodes taken in the same sample: {spans}"
    assert min(v["ready_pods"] for v in values) >= min_available, "ready pods fell below the PDB's minAvailable"
