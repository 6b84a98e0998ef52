"""The snapshot gpuscale hands to KAI: nodes, pods and the KAI install, checked without running the scheduler."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from gpuscale import labels
from gpuscale.schedule import chart, nodes
from gpuscale.schedule.snapshot import SnapshotError, build_snapshot, kai_chart_values, replica_targets
from gpuscale.spec.catalogue import CATALOGUE
from tests.schedule.conftest import synthesized

LAYERS = [f"{labels.NETWORK_NODE_LAYER_PREFIX}{i}" for i in (1, 2, 3)]


def _nodes(snapshot_input: dict[str, Any], pool: str) -> list[dict[str, Any]]:
    return [n for n in snapshot_input["cluster"]["nodes"] if n["metadata"]["labels"][labels.NODE_POOL_LABEL] == pool]


@pytest.fixture(scope="module")
def fixture_snapshot() -> dict[str, Any]:
    s = synthesized("fixture")
    return build_snapshot(s.spec, s.sizing, s.objects, s.charts, [replica_targets(s.sizing, "warm")]).input


def test_node_count_follows_the_pool_gpu_limit(fixture_snapshot: dict[str, Any]) -> None:
    s = synthesized("fixture")
    for pool in s.spec.topology.gpu_pools:
        pool_nodes = _nodes(fixture_snapshot, pool.name)
        per_node = int(pool_nodes[0]["status"]["allocatable"][labels.GPU_RESOURCE])
        assert len(pool_nodes) * per_node == pool.gpu_limit  # every limit here is a whole number of nodes
        assert {n["metadata"]["labels"]["node.kubernetes.io/instance-type"] for n in pool_nodes} == set(pool.instance_types)


def test_network_layer_labels_only_where_ec2_reports_a_topology(fixture_snapshot: dict[str, Any]) -> None:
    for pool, labelled in (("gang", True), ("shared", True), ("plain", False)):
        for node in _nodes(fixture_snapshot, pool):
            node_labels = node["metadata"]["labels"]
            it = CATALOGUE[node_labels["node.kubernetes.io/instance-type"]]
            assert (it.network_node_layers == 3) is labelled
            assert all((layer in node_labels) is labelled for layer in LAYERS)


def test_network_layer_labels_follow_the_catalogue_layer_count() -> None:
    # The replay's nodes and the KAI Topology read the same catalogue field: a 4-layer type gets 4 labels, 0 gets none.
    four = CATALOGUE["p5.48xlarge"].model_copy(update={"network_node_layers": 4})
    got = nodes.network_node_labels(four, "us-east-1a", 5)
    assert sorted(got) == [f"{labels.NETWORK_NODE_LAYER_PREFIX}{i}" for i in (1, 2, 3, 4)]
    assert got[f"{labels.NETWORK_NODE_LAYER_PREFIX}4"] == f"nn-us-east-1a-4-{5 // nodes.NETWORK_BLOCK_NODES}"
    assert nodes.network_node_labels(CATALOGUE["g6.xlarge"], "us-east-1a", 0) == {}


def test_nodes_carry_the_pool_labels_taints_and_a_karpenter_allocatable(fixture_snapshot: dict[str, Any]) -> None:
    node = _nodes(fixture_snapshot, "shared")[0]
    node_labels = node["metadata"]["labels"]
    assert node_labels[labels.KARPENTER_NODEPOOL_LABEL] == "shared"
    assert node_labels[labels.GPU_PRESENT_LABEL] == "true"
    assert node_labels[labels.HOSTNAME_LABEL] == node["metadata"]["name"]
    assert node_labels["karpenter.k8s.aws/instance-gpu-name"] == "l40s"
    assert node["spec"]["taints"] == [{"key": labels.GPU_TAINT_KEY, "value": labels.GPU_TAINT_VALUE, "effect": labels.GPU_TAINT_EFFECT}]
    alloc, cap = node["status"]["allocatable"], node["status"]["capacity"]
    # g6e.xlarge: 4 vCPU (80m kube-reserved), 32 GiB less 7.5 % VM overhead, 58 ENI pods (11*58+255 MiB), 100Mi eviction
    assert alloc["cpu"] == "3920m" and alloc["pods"] == "58"
    assert alloc["memory"] == f"{32768 - 2458 - (11 * 58 + 255) - 100}Mi"
    assert nodes.parse_quantity(alloc["memory"]) < nodes.parse_quantity(cap["memory"])


def test_efa_pools_offer_the_efa_devices_their_pods_request() -> None:
    # prod's h100 pool is an EFA pool: its nodes offer one device per efa-only interface, and the decode pods' request
    # (their share of the node's devices) fits; the l40s pool has no EFA and offers none
    s = synthesized("prod")
    snapshot = build_snapshot(s.spec, s.sizing, s.objects, s.charts, [replica_targets(s.sizing, "warm")]).input
    p5 = CATALOGUE["p5.48xlarge"]
    for node in _nodes(snapshot, "h100"):
        assert node["status"]["allocatable"][labels.EFA_RESOURCE] == str(p5.efa_interfaces)
        assert node["status"]["capacity"][labels.EFA_RESOURCE] == str(p5.efa_interfaces)
    assert all(labels.EFA_RESOURCE not in n["status"]["allocatable"] for n in _nodes(snapshot, "l40s"))
    pods = [p for wave in snapshot["waves"] for p in wave if p["metadata"]["name"].startswith("llama-70b-fp8-decode")]
    asked = {c["resources"]["limits"][labels.EFA_RESOURCE] for p in pods for c in p["spec"]["containers"]}
    assert pods and asked == {str(p5.efa_interfaces * s.sizing.model("llama-70b-fp8").shape.gpus_per_pod // p5.gpus_per_node)}


def test_a_gang_pool_fills_one_zone_per_gang(fixture_snapshot: dict[str, Any]) -> None:
    zones = [n["metadata"]["labels"][labels.ZONE_LABEL] for n in _nodes(fixture_snapshot, "gang")]
    assert zones == ["us-east-1a", "us-east-1a", "us-east-1b"]  # 2-node gangs: blocks of 2 nodes per zone
    assert [n["metadata"]["labels"][labels.ZONE_LABEL] for n in _nodes(fixture_snapshot, "shared")][:2] == [
        "us-east-1a", "us-east-1b"]


def test_leader_worker_set_pods_are_named_and_labelled_as_lws_names_them(fixture_snapshot: dict[str, Any]) -> None:
    pods = [p for wave in fixture_snapshot["waves"] for p in wave if p["metadata"]["name"].startswith("llama-70b-")]
    by_name = {p["metadata"]["name"]: p for p in pods}
    assert sorted(by_name) == ["llama-70b-aggregated-0", "llama-70b-aggregated-0-1"]
    leader, worker = by_name["llama-70b-aggregated-0"], by_name["llama-70b-aggregated-0-1"]
    key = hashlib.sha1(b"inference/llama-70b-aggregated-0").hexdigest()
    for pod, index in ((leader, "0"), (worker, "1")):
        assert pod["metadata"]["labels"][labels.LWS_WORKER_INDEX_LABEL] == index
        assert pod["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/group-index"] == "0"
        assert pod["metadata"]["labels"][labels.LWS_GROUP_KEY_LABEL] == key
        assert pod["metadata"]["annotations"]["leaderworkerset.sigs.k8s.io/size"] == "2"
    assert worker["metadata"]["annotations"]["leaderworkerset.sigs.k8s.io/leader-name"] == "llama-70b-aggregated-0"
    owners = {o["metadata"]["uid"]: o for o in fixture_snapshot["owners"]}
    # worker -> worker StatefulSet -> leader pod; leader -> leader StatefulSet -> LeaderWorkerSet
    worker_sts = owners[worker["metadata"]["ownerReferences"][0]["uid"]]
    assert worker_sts["metadata"]["name"] == "llama-70b-aggregated-0"
    assert worker_sts["metadata"]["ownerReferences"][0]["uid"] == leader["metadata"]["uid"]
    leader_sts = owners[leader["metadata"]["ownerReferences"][0]["uid"]]
    assert owners[leader_sts["metadata"]["ownerReferences"][0]["uid"]]["kind"] == "LeaderWorkerSet"


def test_api_server_merges_match_label_keys_and_resolves_priority(fixture_snapshot: dict[str, Any]) -> None:
    leader = next(p for wave in fixture_snapshot["waves"] for p in wave if p["metadata"]["name"] == "llama-70b-aggregated-0")
    term = leader["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    key = leader["metadata"]["labels"][labels.LWS_GROUP_KEY_LABEL]
    assert {"key": labels.LWS_GROUP_KEY_LABEL, "operator": "In", "values": [key]} in term["labelSelector"]["matchExpressions"]
    assert leader["spec"]["priority"] == chart.PRIORITY_CLASSES[leader["spec"]["priorityClassName"]]


def test_deployment_pods_are_owned_through_a_replicaset(fixture_snapshot: dict[str, Any]) -> None:
    pod = next(p for wave in fixture_snapshot["waves"] for p in wave if p["metadata"]["name"].startswith("serve-8b-"))
    owners = {o["metadata"]["uid"]: o for o in fixture_snapshot["owners"]}
    rs = owners[pod["metadata"]["ownerReferences"][0]["uid"]]
    assert rs["kind"] == "ReplicaSet" and pod["metadata"]["name"].startswith(rs["metadata"]["name"] + "-")
    assert pod["metadata"]["labels"]["pod-template-hash"] == rs["metadata"]["name"].rsplit("-", 1)[1]
    assert owners[rs["metadata"]["ownerReferences"][0]["uid"]]["metadata"]["name"] == "serve-8b-aggregated"


def test_kai_install_renders_the_chart_values_gpuscale_sets() -> None:
    install = chart.kai_install(kai_chart_values(synthesized("fixture").charts))
    assert install["schedulingShard"]["placementStrategy"] == {"gpu": "binpack", "cpu": "binpack"}
    assert install["kaiConfig"]["global"]["queueLabelKey"] == labels.KAI_QUEUE_LABEL
    assert install["shardName"] == "default"
    with pytest.raises(chart.UnsupportedChartValues, match="default queue"):
        chart.kai_install({"defaultQueue": {"createDefaultQueue": True}})


def test_waves_only_scale_up_and_name_existing_roles() -> None:
    s = synthesized("fixture")
    with pytest.raises(SnapshotError, match="scales it down"):
        build_snapshot(s.spec, s.sizing, s.objects, s.charts, [{("serve-8b", "aggregated"): 2}, {("serve-8b", "aggregated"): 1}])
    with pytest.raises(SnapshotError, match="no KAI-scheduled workload for nope/aggregated"):
        build_snapshot(s.spec, s.sizing, s.objects, s.charts, [{("nope", "aggregated"): 1}])


def test_the_go_module_pins_the_same_kai_release_as_the_chart() -> None:
    from gpuscale import versions
    from gpuscale.schedule.binary import SOURCE_DIR

    module = "github.com/kai-scheduler/KAI-scheduler"
    go_mod = (SOURCE_DIR / "go.mod").read_text()
    pinned = {line.split()[1] for line in go_mod.splitlines() if line.strip().startswith(module + " ")}
    assert pinned == {versions.KAI_SCHEDULER.version}
    assert f'const kaiVersion = "{versions.KAI_SCHEDULER.version}"' in (SOURCE_DIR / "main.go").read_text()
    sums = (SOURCE_DIR / "go.sum").read_text()
    assert f"{module} {versions.KAI_SCHEDULER.version} h1:" in sums  # builds never trust the network for KAI's hash


def test_every_replayed_pod_and_its_workload_carry_the_sized_preemption_delay(fixture_snapshot: dict[str, Any]) -> None:
    s = synthesized("fixture")
    pods = [p for wave in fixture_snapshot["waves"] for p in wave]
    assert pods
    # an LWS worker is owned through its StatefulSet by the leader pod: follow pods as well as owners
    owners = {o["metadata"]["uid"]: o for o in [*fixture_snapshot["owners"], *pods]}
    for pod in pods:
        expected = f"{s.sizing.model(pod['metadata']['labels'][labels.MODEL_LABEL]).preemption_delay_s}s"
        assert pod["metadata"]["annotations"][labels.KAI_PREEMPTION_DELAY_ANNOTATION] == expected
        # KAI reads the owners first: the chain's top (Deployment or LeaderWorkerSet) must carry the same value
        owner = owners[pod["metadata"]["ownerReferences"][0]["uid"]]
        while owner["metadata"].get("ownerReferences"):
            owner = owners[owner["metadata"]["ownerReferences"][0]["uid"]]
        assert owner["kind"] in ("Deployment", "LeaderWorkerSet")
        assert owner["metadata"]["annotations"][labels.KAI_PREEMPTION_DELAY_ANNOTATION] == expected
