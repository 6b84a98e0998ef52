"""Layer 1: provisioning latency (Karpenter vs Cluster Autoscaler), startup, consolidation choices."""

from __future__ import annotations

import random
import statistics

from gpuscale import sizing
from gpuscale.first_answer import image_pull_s
from gpuscale.sim import nodes as N
from gpuscale.sim.scenarios import build_scenario
from gpuscale.sim.states import NodeState
from gpuscale.spec.catalogue import CATALOGUE
from gpuscale.spec.topology import GpuNodePoolSpec, ProvisioningSpec
from gpuscale.stackfile import read_stack_config, validate_config
from tests.conftest import stack_path
from tests.sim.conftest import run_scenario, spec_of


def test_karpenter_about_90_s_cluster_autoscaler_about_3_min() -> None:
    prov = ProvisioningSpec()
    k, ca = N.karpenter(prov), N.cluster_autoscaler(prov)
    rng = random.Random(1)
    kd = [k.sample_launch_delay(rng) + k.sample_boot(rng) for _ in range(2000)]
    cd = [ca.sample_launch_delay(rng) + ca.sample_boot(rng) + rng.uniform(0, ca.scan_interval_s) for _ in range(2000)]
    assert 75 <= statistics.mean(kd) <= 100 and max(kd) <= k.worst_case_s
    assert 160 <= statistics.mean(cd) <= 200 and max(cd) <= ca.worst_case_s
    assert ca.node_ready_s == (90.0, 120.0) and k.node_ready_s == (45.0, 60.0)


def test_spec_figures_are_used_for_the_named_provisioner() -> None:
    prov = ProvisioningSpec(node_provisioner="cluster-autoscaler", node_ready_s=(100, 200))
    assert N.provisioner_of(prov).kind == "cluster-autoscaler"
    assert N.cluster_autoscaler(prov).node_ready_s == (100, 200)
    assert N.karpenter(prov).node_ready_s == N.KARPENTER_READY_S


def test_consolidation_of_pool() -> None:
    pool = GpuNodePoolSpec(name="h", instance_types=["p5.48xlarge"], gpu_limit=64)
    c = N.consolidation_of(pool)
    assert (c.policy, c.consolidate_after_s, c.evicts) == ("WhenEmpty", 3600.0, False)
    risky = GpuNodePoolSpec(
        name="h", instance_types=["p5.48xlarge"], gpu_limit=64, consolidation_policy="WhenEmptyOrUnderutilized",
        consolidate_after="0s", acknowledge_underutilized_consolidation_evicts_inference=True,
    )
    assert N.consolidation_of(risky).evicts


def node(nid: int, used: int, last_change: float = 0.0) -> N.Node:
    n = N.Node(nid, 8, 0.0)
    n.state, n.free, n.pods, n.last_change = NodeState.READY, 8 - used, used // 4, last_change
    return n


def test_when_empty_waits_consolidate_after_and_never_evicts() -> None:
    spec = N.when_empty(3600)
    nodes = [node(1, 0, last_change=100.0), node(2, 4)]
    assert N.consolidation_candidate(nodes, 3000.0, spec, -1e9, lambda n: True) is None
    assert N.consolidation_candidate(nodes, 3701.0, spec, -1e9, lambda n: True) == (nodes[0], False)
    assert N.consolidation_candidate([node(2, 4)], 1e6, spec, -1e9, lambda n: True) is None


def test_underutilized_evicts_the_cheapest_node_to_empty() -> None:
    spec = N.when_empty_or_underutilized()
    nodes = [node(1, 8), node(2, 4), node(3, 4)]
    cand = N.consolidation_candidate(nodes, 10.0, spec, -1e9, lambda n: n.free > 0)
    assert cand is not None and cand[1] and cand[0].nid in (2, 3)
    assert N.consolidation_candidate(nodes, 10.0, spec, -1e9, lambda n: False) is None


def test_cluster_autoscaler_waits_after_a_scale_up() -> None:
    spec = N.cluster_autoscaler_scale_down()
    nodes = [node(1, 0)]
    assert N.consolidation_candidate(nodes, 700.0, spec, 200.0, lambda n: True) is None
    assert N.consolidation_candidate(nodes, 900.0, spec, 200.0, lambda n: True) == (nodes[0], False)


def test_startup_is_sizings_cold_start_and_a_stated_pull_time_wins() -> None:
    spec = spec_of("dev")
    sc = build_scenario("stack", spec, duration_s=60.0)
    cold = sizing.size_platform(spec).model(sc.setup.model).cold_start
    st = sc.setup.startup
    assert (st.image_pull_s, st.weights_s, st.engine_init_s) == (cold.image_pull_s, cold.weights_s, cold.engine_init_s)
    assert st.image_pull_s == image_pull_s("soci-parallel", CATALOGUE[sc.setup.instance_type])  # dev's image_pull
    raw = read_stack_config(stack_path("dev"))
    raw["topology"]["provisioning"] = {"image_pull_s": 42}
    stated = build_scenario("stack", validate_config(raw, "dev"), duration_s=60.0)
    assert stated.setup.startup.image_pull_s == 42


def test_weights_reload_from_the_node_only_with_a_node_cache() -> None:
    hub = build_scenario("stack", spec_of("dev"), duration_s=60.0).setup.startup  # hf:// into a per-pod emptyDir
    streamed = build_scenario("stack", spec_of("tiny-aggregated"), duration_s=60.0).setup.startup  # s3:// streamed
    assert hub.local_weights_s is None and streamed.local_weights_s is None
    raw = read_stack_config(stack_path("dev"))
    raw["models"][0]["cold_start"] = {"weights_cache": "node-nvme"}
    cached = build_scenario("stack", validate_config(raw, "dev"), duration_s=60.0).setup.startup
    assert cached.local_weights_s is not None and cached.local_weights_s < cached.weights_s


def test_spot_interruptions_drain_nodes_and_replace_capacity() -> None:
    res = run_scenario("tiny-aggregated", "stack", 900.0, 2, ("gpuscale",), 20.0)
    r = res.result("gpuscale")
    calm = run_scenario("tiny-aggregated", "stack", 900.0, 2, ("gpuscale",), 0.0).result("gpuscale")
    assert calm.interruptions == 0 and calm.evictions == 0
    assert r.interruptions > 0
    # each interrupted node's replicas are evicted and placed again; a node a scale-down emptied holds none (it waits
    # out consolidate_after), so at most as many interrupted nodes as replicas removed evict nothing
    interrupted = {e.detail.split(":")[0].split()[1] for e in r.events if e.kind == "interrupt"}
    evicted = {e.detail.split(" from node ")[1].split()[0] for e in r.events if e.kind == "evict" and "(interruption)" in e.detail}
    removed = sum(int(a) - int(b) for a, b in (e.detail.split()[-3::2] for e in r.events if e.kind == "scale") if int(a) > int(b))
    assert evicted <= interrupted and len(interrupted) - len(evicted) <= removed
    assert r.evictions >= len(evicted) > 0
    assert r.nodes.launched > calm.nodes.launched  # replacement nodes
    assert any(e.kind == "interrupt" for e in r.events)
    assert r.arrived == r.completed + r.dropped + r.lost_in_flight
