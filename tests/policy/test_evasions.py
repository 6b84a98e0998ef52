"""Issue 23 items 13-14: ways a user's own program slipped a repacking GPU pool past the pack, run as such programs.

Each program is what a user would write with ``pulumi_kubernetes`` next to gpuscale's components, run under the
recording mocks; the pack's rules read what the program registered, as ``pulumi preview --policy-pack`` would.
"""

from __future__ import annotations

from typing import Any

import pulumi_kubernetes as k8s

from gpuscale import labels
from gpuscale.components import GpuNodePool, GpuNodePoolArgs
from gpuscale.policy import rules
from gpuscale.spec.topology import GpuNodePoolSpec
from gpuscale.synth.render import synthesize

Rows = list[tuple[str, dict[str, Any]]]


def run(program: Any) -> Rows:
    result = synthesize(program, region="us-east-1", stack="team-a")
    return [(r["type"], r["inputs"]) for r in result.resources]


def found(rows: Rows, rule: str) -> list[str]:
    return [msg for _, name, msg in rules.check_resources(rows) if name == rule]


def gpu_pool_program(patch_spec: dict[str, Any] | None, *, patched: str = "l40s") -> Any:
    def program() -> None:
        GpuNodePool("l40s", GpuNodePoolArgs(
            pool=GpuNodePoolSpec(name="l40s", instance_types=["g6e.xlarge"], gpu_limit=8, root_volume_gib=200),
            cluster_name="team-a", node_role_name="team-a-node", cold_start_s=300,
        ))
        if patch_spec is not None:
            k8s.apiextensions.CustomResourcePatch(
                "l40s-repack", api_version="karpenter.sh/v1", kind="NodePool",
                metadata={"name": patched}, spec=patch_spec,
            )
    return program


# --- 13: a NodePoolPatch that switches a GPU pool to WhenEmptyOrUnderutilized ----------------------------------


def test_a_patch_that_repacks_a_gpu_pool_of_this_stack_is_refused() -> None:
    rows = run(gpu_pool_program({"disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized"}}))
    assert rules.NODEPOOL_PATCH in [t for t, _ in rows]
    [msg] = found(rows, "gpu-nodepool-patch-consolidation")
    assert msg.startswith("GPU pool patch of l40s: consolidationPolicy WhenEmptyOrUnderutilized lets Karpenter evict")
    # the NodePool itself is compliant: only the merged object breaks the rule
    assert found(rows, "gpu-nodepool-consolidation") == []


def test_a_patch_that_shortens_consolidate_after_is_refused_and_one_that_lengthens_it_is_not() -> None:
    [msg] = found(run(gpu_pool_program({"disruption": {"consolidateAfter": "10m"}})), "gpu-nodepool-patch-consolidation")
    assert "consolidateAfter 10m is shorter than 1h" in msg
    assert found(run(gpu_pool_program({"disruption": {"consolidateAfter": "2h"}})), "gpu-nodepool-patch-consolidation") == []


def test_an_acknowledged_patch_is_accepted() -> None:
    def program() -> None:
        gpu_pool_program(None)()
        k8s.apiextensions.CustomResourcePatch(
            "l40s-repack", api_version="karpenter.sh/v1", kind="NodePool",
            metadata={"name": "l40s", "annotations": {labels.ACK_UNSAFE_CONSOLIDATION_ANNOTATION: "true"}},
            spec={"disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized"}},
        )
    assert found(run(program), "gpu-nodepool-patch-consolidation") == []


def test_a_patch_of_a_pool_created_elsewhere_is_taken_as_a_gpu_pool_unless_its_requirements_say_otherwise() -> None:
    repack = {"disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized"}}
    [msg] = found(run(gpu_pool_program(repack, patched="shared")), "gpu-nodepool-patch-consolidation")
    assert msg.startswith("GPU pool patch of (not in this stack) shared: consolidationPolicy WhenEmptyOrUnderutilized")
    cpu_only = {**repack, "template": {"spec": {"requirements": [
        {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m"]}]}}}
    assert found(run(gpu_pool_program(cpu_only, patched="shared")), "gpu-nodepool-patch-consolidation") == []


def test_a_patch_that_widens_a_cpu_pool_to_gpu_types_is_judged_on_the_merged_pool() -> None:
    def program() -> None:
        k8s.apiextensions.CustomResource(
            "general", api_version="karpenter.sh/v1", kind="NodePool", metadata={"name": "general"},
            spec={"template": {"spec": {"requirements": [
                {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m"]}]}},
                "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "5m"}},
        )
        k8s.apiextensions.CustomResourcePatch(
            "general-gpus", api_version="karpenter.sh/v1", kind="NodePool", metadata={"name": "general"},
            spec={"template": {"spec": {"requirements": [
                {"key": "karpenter.k8s.aws/instance-category", "operator": "NotIn", "values": ["t"]}]}}},
        )
    rows = run(program)
    assert found(rows, "gpu-nodepool-consolidation") == []  # a CPU pool may repack
    assert len(found(rows, "gpu-nodepool-patch-consolidation")) == 2  # the patched one launches g and p types


# --- 14: "GPU pool" by what the requirements admit -------------------------------------------------------------


def own_nodepool(requirements: list[dict[str, Any]]) -> Any:
    def program() -> None:
        k8s.apiextensions.CustomResource(
            "burst", api_version="karpenter.sh/v1", kind="NodePool", metadata={"name": "burst"},
            spec={"template": {"spec": {"requirements": requirements,
                                        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                         "name": "default"}}},
                  "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "1m"}},
        )
    return program


def test_a_pool_that_only_excludes_t_types_is_a_gpu_pool() -> None:
    rows = run(own_nodepool([{"key": "karpenter.k8s.aws/instance-category", "operator": "NotIn", "values": ["t"]}]))
    assert len(found(rows, "gpu-nodepool-consolidation")) == 2  # the policy and the 1m


def test_a_pool_with_no_restriction_is_a_gpu_pool_and_a_cpu_only_one_is_not() -> None:
    assert len(found(run(own_nodepool([])), "gpu-nodepool-consolidation")) == 2
    arch = [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]
    assert len(found(run(own_nodepool(arch)), "gpu-nodepool-consolidation")) == 2
    cpu = [{"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]}]
    assert found(run(own_nodepool(cpu)), "gpu-nodepool-consolidation") == []
    no_gpus = [{"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "DoesNotExist"}]
    assert found(run(own_nodepool(no_gpus)), "gpu-nodepool-consolidation") == []
