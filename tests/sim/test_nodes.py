"""Layer 1: provisioning latency (Karpenter vs Cluster Autoscaler), startup, consolidation choices."""

from __future__ import annotations

import random
import statistics

from gpuscale.sim import nodes as N
from gpuscale.spec.topology import GpuNodePoolSpec, ProvisioningSpec


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
    n.state, n.free, n.pods, n.last_change = N.READY, 8 - used, used // 4, last_change
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
