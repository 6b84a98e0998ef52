"""CpuNodePool under Pulumi mocks: the general-purpose pool may repack and carries no GPU taint."""

from __future__ import annotations

from typing import Any

import pulumi

from gpuscale import labels, versions
from gpuscale.components import CpuNodePool, CpuNodePoolArgs
from tests.components.support import capture, ints, k8s_object, named, one, run, stand_in
from tests.conftest import requires_shared
from tests.k8s_schema import assert_valid
from tests.specs import small_spec

NODEPOOL = "kubernetes:karpenter.sh/v1:NodePool"
NODECLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"


def build(args: CpuNodePoolArgs) -> tuple[list[Any], dict[str, Any]]:
    outputs: dict[str, Any] = {}

    def program() -> None:
        chart = stand_in("karpenter-chart")
        pool = CpuNodePool("cpu", args, opts=pulumi.ResourceOptions(depends_on=[chart]))
        capture(outputs, "node_pool_name", pool.node_pool_name)
        capture(outputs, "node_class_name", pool.node_class_name)

    return run(program), outputs


def small_args(**extra: Any) -> CpuNodePoolArgs:
    return CpuNodePoolArgs.from_spec(small_spec(), cluster_name="team-a", node_role_name="team-a-node", **extra)


def test_cpu_pool_repacks_without_gpu_taint() -> None:
    spec = small_spec()
    records, outputs = build(small_args())
    np = ints(one(records, NODEPOOL).inputs)
    assert outputs == {"node_pool_name": "cpu", "node_class_name": "cpu"}
    assert np["metadata"]["name"] == "cpu"
    assert np["spec"]["disruption"]["consolidationPolicy"] == "WhenEmptyOrUnderutilized"
    assert np["spec"]["disruption"]["consolidateAfter"] == "5m"
    assert "taints" not in np["spec"]["template"]["spec"]
    assert np["spec"]["limits"]["cpu"] == spec.topology.cpu_pool.cpu_limit
    assert labels.GPU_RESOURCE not in np["spec"]["limits"]
    assert np["spec"]["template"]["spec"]["nodeClassRef"]["name"] == "cpu"


def test_cpu_nodeclass_uses_the_node_role_imdsv2_and_the_named_cluster() -> None:
    records, _ = build(small_args())
    nc = one(records, NODECLASS)
    spec = ints(nc.inputs["spec"])
    assert spec["role"] == "team-a-node"
    assert spec["metadataOptions"]["httpTokens"] == "required" and spec["metadataOptions"]["httpPutResponseHopLimit"] == 1
    assert spec["amiSelectorTerms"] == [{"alias": versions.EKS_AL2023_AMI_ALIAS}]
    assert spec["subnetSelectorTerms"] == [{"tags": {labels.KARPENTER_DISCOVERY_TAG: "team-a"}}]
    chart = named(records, "karpenter-chart")
    assert chart.urn in nc.dependencies and nc.urn in one(records, NODEPOOL).dependencies
    component = one(records, "gpuscale:index:CpuNodePool")
    assert nc.parent_urn == one(records, NODEPOOL).parent_urn == component.urn


def test_explicit_subnets_replace_discovery() -> None:
    records, _ = build(small_args(subnet_ids=["subnet-0a"], security_group_ids=["sg-0b"]))
    spec = one(records, NODECLASS).inputs["spec"]
    assert spec["subnetSelectorTerms"] == [{"id": "subnet-0a"}]
    assert spec["securityGroupSelectorTerms"] == [{"id": "sg-0b"}]


@requires_shared
def test_cpu_objects_are_schema_valid() -> None:
    records, _ = build(small_args())
    assert_valid(*(k8s_object(one(records, t)) for t in (NODEPOOL, NODECLASS)))
