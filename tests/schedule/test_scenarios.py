"""Scheduling scenarios decided by the real KAI Scheduler (v0.17.0) over what gpuscale emits.

Each scenario runs on the small fixture spec and on a shipped stack (or, where the shipped stacks lack the
ingredient, on ``prod-variant``: prod plus an LWS gang, a preemptible batch model and a pool without network labels).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from gpuscale import labels
from gpuscale.manifests.kai import expected_podgroup
from gpuscale.manifests.kai_wiring import TOPOLOGY_NAME
from gpuscale.schedule.replay import Verdict, replay
from gpuscale.schedule.report import build_report
from gpuscale.schedule.snapshot import RoleKey, Snapshot, build_snapshot, replica_targets
from gpuscale.schedule.stack import Scheduled, schedule_waves
from gpuscale.sizing import replica_shape
from tests.schedule.conftest import synthesized

GANG: RoleKey = ("llama-70b", "aggregated")
FILLER: RoleKey = ("filler-8b", "aggregated")
SERVE: RoleKey = ("serve-8b", "aggregated")
BATCH: RoleKey = ("batch-70b", "aggregated")
QUOTA_REASON = "NonPreemptibleOverQuota"
STACKS = ("dev", "staging", "prod")


def run(name: str, waves: list[dict[RoleKey, int]], binary: Path) -> Scheduled:
    s = synthesized(name)
    return schedule_waves(s.spec, s.sizing, s.objects, s.charts, waves, binary=binary)


def nodes_of(scheduled: Scheduled, key: RoleKey) -> list[list[str]]:
    """Node of every pod, replica by replica ('' while pending)."""
    rp = next(r for r in scheduled.snapshot.roles if (r.model, r.role) == key)
    return [[scheduled.verdict.pod(rp.namespace, p).node for p in replica] for replica in rp.replicas]


def node_label(scheduled: Scheduled, node: str, key: str) -> str:
    found = next(n for n in scheduled.snapshot.input["cluster"]["nodes"] if n["metadata"]["name"] == node)
    return str(found["metadata"]["labels"][key])


def free_gpus(scheduled: Scheduled, pool: str) -> dict[str, int]:
    """GPUs left on each node of ``pool`` after the scheduling."""
    gpus_per_pod = {(rp.namespace, p): rp.gpus_per_pod for rp in scheduled.snapshot.roles for r in rp.replicas for p in r}
    free = {n["metadata"]["name"]: int(n["status"]["allocatable"][labels.GPU_RESOURCE])
            for n in scheduled.snapshot.input["cluster"]["nodes"] if n["metadata"]["labels"][labels.NODE_POOL_LABEL] == pool}
    for pod in scheduled.verdict.pods:
        if pod.node in free:
            free[pod.node] -= gpus_per_pod[(pod.namespace, pod.name)]
    return free


def assert_no_partial_replica(scheduled: Scheduled) -> None:
    for rp in scheduled.snapshot.roles:
        for replica in nodes_of(scheduled, (rp.model, rp.role)):
            assert all(replica) or not any(replica), f"{rp.model}/{rp.role}: replica split {replica}"


# ------------------------------------------------------------------ all warm minimums bind


@pytest.mark.parametrize("name", ["fixture", *STACKS])
def test_every_warm_minimum_binds(kai_binary: Path, name: str) -> None:
    # the fixture's `plain` pool (g6, no network-node-layer labels) included: its pods name a Topology without them
    scheduled = run(name, [replica_targets(synthesized(name).sizing, "warm")], kai_binary)
    report = scheduled.report
    assert report.ok, [(r.model, r.role, r.bound, r.reasons) for r in report.roles]
    assert all(r.bound == r.requested == r.warm_minimum for r in report.roles)
    assert report.evictions == ()
    assert_no_partial_replica(scheduled)


@pytest.mark.parametrize("name", STACKS)
def test_peak_replicas_of_the_shipped_stacks_all_bind(kai_binary: Path, name: str) -> None:
    scheduled = run(name, [replica_targets(synthesized(name).sizing, "peak")], kai_binary)
    assert [(r.model, r.role) for r in scheduled.report.roles if r.pending] == []


# ------------------------------------------------------------------ gangs: all or none


def test_a_gang_of_8_gpus_stays_whole_pending_when_7_are_free(kai_binary: Path) -> None:
    # pool `gang`: 3 nodes x 4 GPUs; 5 one-GPU fillers leave 7 GPUs free, 3 + 4: one 4-GPU pod would fit, not two
    scheduled = run("fixture", [{FILLER: 5}, {GANG: 1}], kai_binary)
    assert sum(1 for r in nodes_of(scheduled, FILLER) if all(r)) == 5
    free = free_gpus(scheduled, "gang")
    assert sum(free.values()) == 7 and max(free.values()) == 4  # one of the two 4-GPU pods would fit
    assert nodes_of(scheduled, GANG) == [["", ""]]
    gang = scheduled.report.role(*GANG)
    assert gang.bound == 0 and not gang.ok
    # both queues are within quota: the nodes, not the queues, keep it out
    assert gang.reasons and not any(r.startswith(("OverLimit", QUOTA_REASON)) for r in gang.reasons)


def test_the_same_gang_binds_whole_when_8_are_free(kai_binary: Path) -> None:
    scheduled = run("fixture", [{FILLER: 4}, {GANG: 1}], kai_binary)
    (replica,) = nodes_of(scheduled, GANG)
    assert all(replica) and len(set(replica)) == 2  # two 4-GPU pods, two nodes
    assert sum(free_gpus(scheduled, "gang").values()) == 0


def test_gang_replicas_of_the_shipped_variant_are_never_split(kai_binary: Path) -> None:
    # l40s: 4 nodes x 4 GPUs hold two 8-GPU groups; the third has no GPU left and must not start half
    scheduled = run("prod-variant", [{("llama-70b-bf16", "aggregated"): 3}], kai_binary)
    assert [all(r) for r in nodes_of(scheduled, ("llama-70b-bf16", "aggregated"))] == [True, True, False]
    assert_no_partial_replica(scheduled)


# ------------------------------------------------------------------ quota, borrowing and reclaim


def test_preemptible_queue_borrows_idle_gpus_and_is_reclaimed_by_in_quota_inference(kai_binary: Path) -> None:
    # pool `shared`: 8 GPUs. batch (preemptible, quota 2) takes all 8; then serve (non-preemptible, quota 4) wants 6.
    scheduled = run("fixture", [{("batch-8b", "aggregated"): 8}, {SERVE: 6}], kai_binary)
    first_wave = [s for s in scheduled.verdict.sessions if s.wave == 0]
    assert sum(len(s.binds) for s in first_wave) == 8  # borrowed 6 GPUs over its quota of 2
    reclaimed = {e.pod for e in scheduled.report.evictions}
    assert len(reclaimed) == 4 and {e.action for e in scheduled.report.evictions} == {"reclaim"}
    assert all(p.startswith("batch-8b-") for p in reclaimed)
    serve = scheduled.report.role(*SERVE)
    assert (serve.bound, serve.pending) == (4, 2)  # its quota, not one GPU more
    assert serve.reasons and all(r.startswith(QUOTA_REASON) for r in serve.reasons)
    assert scheduled.report.queue("serve").gpus_bound == 4 and scheduled.report.queue("batch").gpus_bound == 4


def test_prod_inference_reclaims_the_training_queue_up_to_its_ceilings(kai_binary: Path) -> None:
    # h100: 64 GPUs. batch-70b (training, preemptible, quota 16) fills them, as training jobs outside the autoscaler's
    # ceiling (6) can; llama-70b-fp8 (chat) scales to its peak replicas and then to its ceilings, which sizing shares out
    # of chat's quota 40 with llama-70b-bf16 (issue 12: summed bounds), so KAI reclaims them all and none stays Pending
    sizing = synthesized("prod-variant").sizing
    peak = {k: v for k, v in replica_targets(sizing, "peak").items() if k[0] == "llama-70b-fp8"}
    ceiling = {k: v for k, v in replica_targets(sizing, "max").items() if k[0] == "llama-70b-fp8"}
    scheduled = run("prod-variant", [{BATCH: 16}, peak, ceiling], kai_binary)
    report = scheduled.report
    assert sum(len(s.binds) for s in scheduled.verdict.sessions if s.wave == 0) == 16
    assert report.evictions and {e.action for e in report.evictions} == {"reclaim"}
    assert {e.pod.rsplit("-", 2)[0] for e in report.evictions} == {"batch-70b-aggregated"}
    fp8_gpus = sum(ceiling.values()) * 4
    assert report.queue("chat").gpus_bound == fp8_gpus <= report.queue("chat").gpu_quota
    assert [r for r in report.roles if r.model == "llama-70b-fp8" and r.pending] == []
    assert report.queue("training").gpus_bound == 64 - fp8_gpus


def test_prod_at_its_ceilings_binds_every_replica_within_chats_quota(kai_binary: Path) -> None:
    # issue 12 item 5: prefill and decode ceilings (4 GPUs each) are sized together out of chat's quota 40; before,
    # each role was checked alone (9 + 9 replicas = 72 GPUs) and 8 replicas stayed Pending over quota
    sizing = synthesized("prod").sizing
    scheduled = run("prod", [replica_targets(sizing, "max")], kai_binary)
    report = scheduled.report
    assert report.ok and [(r.model, r.role) for r in report.roles if r.pending] == []
    chat = sum(r.max_replicas * m.shape.gpus for m in sizing.models if m.model == "llama-70b-fp8" for r in m.roles)
    assert report.queue("chat").gpus_bound == chat <= report.queue("chat").gpu_quota


# ------------------------------------------------------------------ topology


def test_a_multi_node_group_lands_in_one_zone_and_one_network_block(kai_binary: Path) -> None:
    scheduled = run("fixture", [{GANG: 1}], kai_binary)
    (replica,) = nodes_of(scheduled, GANG)
    assert all(replica)
    for key in (labels.ZONE_LABEL, f"{labels.NETWORK_NODE_LAYER_PREFIX}3"):
        assert len({node_label(scheduled, n, key) for n in replica}) == 1, key


def test_every_group_of_the_shipped_variant_stays_in_one_zone(kai_binary: Path) -> None:
    scheduled = run("prod-variant", [{("llama-70b-bf16", "aggregated"): 2}], kai_binary)
    for replica in nodes_of(scheduled, ("llama-70b-bf16", "aggregated")):
        assert all(replica)
        assert len({node_label(scheduled, n, labels.ZONE_LABEL) for n in replica}) == 1


def test_kai_keeps_a_zone_bound_gang_pending_rather_than_split_it_across_zones(kai_binary: Path) -> None:
    # the three gang-pool nodes moved into three zones (as if launched apart): no zone holds two, so nothing binds
    s = synthesized("fixture")
    snapshot = build_snapshot(s.spec, s.sizing, s.objects, s.charts, [{GANG: 1}])
    moved = copy.deepcopy(snapshot.input)
    gang_nodes = [n for n in moved["cluster"]["nodes"] if n["metadata"]["labels"][labels.NODE_POOL_LABEL] == "gang"]
    for i, node in enumerate(gang_nodes):
        node["metadata"]["labels"][labels.ZONE_LABEL] = f"zone-{i}"
    verdict: Verdict = replay(Snapshot(moved, snapshot.roles, snapshot.nodes_per_pool, []), binary=kai_binary)
    report = build_report(s.spec, snapshot, verdict)
    assert report.role(*GANG).bound == 0 and report.role(*GANG).reasons
    assert all(not verdict.pod("inference", p).node for p in ("llama-70b-aggregated-0", "llama-70b-aggregated-0-1"))


def test_the_full_topology_would_keep_g6_pods_off_their_nodes(kai_binary: Path) -> None:
    # Why the g6 pool gets its own Topology: pointed at the full one (network-node-layer levels its nodes never carry),
    # KAI v0.17.0 leaves those nodes out of the topology tree (topology_plugin.go addNodeDataToTopology via common.go
    # isNodePartOfTopology) and offers the pod none of them (job_filtering.go subSetNodesFn): it stays Pending.
    s = synthesized("fixture")
    snapshot = build_snapshot(s.spec, s.sizing, s.objects, s.charts, [{("plain-8b", "aggregated"): 1}])
    edited = copy.deepcopy(snapshot.input)
    # the pods and their owners (the podgrouper reads the top owner's annotations)
    plain = [o for o in [*(p for wave in edited["waves"] for p in wave), *edited["owners"]]
             if o["metadata"]["name"].startswith("plain-8b-")
             and labels.KAI_TOPOLOGY_ANNOTATION in o["metadata"].get("annotations", {})]
    assert plain and all(o["metadata"]["annotations"][labels.KAI_TOPOLOGY_ANNOTATION] != TOPOLOGY_NAME for o in plain)
    for o in plain:
        o["metadata"]["annotations"][labels.KAI_TOPOLOGY_ANNOTATION] = TOPOLOGY_NAME
    verdict = replay(Snapshot(edited, snapshot.roles, snapshot.nodes_per_pool, []), binary=kai_binary)
    assert build_report(s.spec, snapshot, verdict).role("plain-8b", "aggregated").bound == 0


def test_pods_on_a_pool_without_network_labels_still_bind(kai_binary: Path) -> None:
    scheduled = run("fixture", [{("plain-8b", "aggregated"): 1}], kai_binary)
    assert scheduled.report.role("plain-8b", "aggregated").bound == 1


def test_shipped_variant_pods_on_g6_nodes_still_bind(kai_binary: Path) -> None:
    scheduled = run("prod-variant", [replica_targets(synthesized("prod-variant").sizing, "warm")], kai_binary)
    assert scheduled.report.role("search-8b", "aggregated").bound >= 1


def test_the_verdict_names_the_kai_configuration_the_chart_installs(kai_binary: Path) -> None:
    scheduled = run("dev", [replica_targets(synthesized("dev").sizing, "peak")], kai_binary)
    v = scheduled.verdict
    assert v.kai_version == "v0.17.0"
    assert v.scheduler_config.startswith("actions: allocate, consolidation, reclaim, preempt, stalegangeviction")
    assert "gpu: binpack" in v.scheduler_config  # the chart's placementStrategy reached the nodeplacement plugin
    assert "--scheduler-name=kai-scheduler" in v.scheduler_args
    assert json.loads(scheduled.snapshot.to_json())["chart"]["shardName"] == "default"


def test_a_wave_cut_short_by_the_session_budget_says_so(kai_binary: Path) -> None:
    s = synthesized("fixture")
    snapshot = build_snapshot(s.spec, s.sizing, s.objects, s.charts, [{("batch-8b", "aggregated"): 8}, {SERVE: 6}],
                              max_sessions_per_wave=1)
    verdict = replay(snapshot, binary=kai_binary)
    assert verdict.unsettled_waves == [0, 1]  # each wave's only session bound pods, so none is known to be final
    assert any("may not be final" in n for n in build_report(s.spec, snapshot, verdict).notes)


@pytest.mark.parametrize(("name", "keys"), [
    ("fixture", [GANG, SERVE, ("batch-8b", "aggregated")]),
    ("prod", [("llama-70b-fp8", "prefill"), ("llama-70b-fp8", "decode"), ("search-8b", "aggregated")]),
])
def test_kais_podgrouper_creates_the_podgroups_gpuscale_expects(kai_binary: Path, name: str, keys: list[RoleKey]) -> None:
    s = synthesized(name)
    scheduled = run(name, [dict.fromkeys(keys, 1)], kai_binary)
    for model_name, role in keys:
        model = next(m for m in s.spec.models if m.name == model_name)
        expected = expected_podgroup(s.spec, model, role, replica_shape(model, s.spec.topology.pool(model.node_pool)))  # type: ignore[arg-type]
        rp = next(r for r in scheduled.snapshot.roles if (r.model, r.role) == (model_name, role))
        group = scheduled.verdict.pod(rp.namespace, rp.replicas[0][0]).pod_group
        assert scheduled.verdict.pod_group(rp.namespace, group).spec == expected["spec"], f"{model_name}/{role}"
