"""CpuNodePool under Pulumi mocks: the general-purpose pool may repack and carries no GPU taint."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pulumi

from gpuscale import labels, versions
from gpuscale.components.cpu_node_pool import CpuNodePool, CpuNodePoolArgs
from gpuscale.spec.platform import PlatformSpec
from gpuscale.synth.mocks import RecordedResource
from tests.conftest import requires_shared
from tests.k8s_schema import assert_valid

Run = Callable[..., list[RecordedResource]]
NODEPOOL = "kubernetes:karpenter.sh/v1:NodePool"
NODECLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"


def ints(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [ints(v) for v in value]
    return value


def build(run_pulumi: Run, args: CpuNodePoolArgs) -> tuple[dict[str, RecordedResource], dict[str, Any]]:
    outputs: dict[str, Any] = {}

    def program() -> None:
        chart = pulumi.CustomResource("test:index:Chart", "karpenter-chart", {})
        pool = CpuNodePool("cpu", args, node_role_name="gpuscale-prod-karpenter-node", depends_on=[chart])
        pool.node_pool_name.apply(lambda v: outputs.__setitem__("node_pool_name", v))
        pool.node_class_name.apply(lambda v: outputs.__setitem__("node_class_name", v))

    return {r.type: r for r in run_pulumi(program)}, outputs


def test_cpu_pool_repacks_without_gpu_taint(run_pulumi: Run, prod_spec: PlatformSpec) -> None:
    by_type, outputs = build(run_pulumi, CpuNodePoolArgs.from_spec(prod_spec))
    np = ints(by_type[NODEPOOL].inputs)
    assert outputs == {"node_pool_name": "cpu", "node_class_name": "cpu"}
    assert np["metadata"]["name"] == "cpu"
    assert np["spec"]["disruption"]["consolidationPolicy"] == "WhenEmptyOrUnderutilized"
    assert np["spec"]["disruption"]["consolidateAfter"] == "5m"
    assert "taints" not in np["spec"]["template"]["spec"]
    assert np["spec"]["limits"]["cpu"] == prod_spec.topology.cpu_pool.cpu_limit
    assert labels.GPU_RESOURCE not in np["spec"]["limits"]
    assert np["spec"]["template"]["spec"]["nodeClassRef"]["name"] == "cpu"


def test_cpu_nodeclass_uses_the_node_role_imdsv2_and_discovery(run_pulumi: Run, prod_spec: PlatformSpec) -> None:
    by_type, _ = build(run_pulumi, CpuNodePoolArgs.from_spec(prod_spec))
    nc = by_type[NODECLASS]
    spec = ints(nc.inputs["spec"])
    assert spec["role"] == "gpuscale-prod-karpenter-node"
    assert (
        spec["metadataOptions"]["httpTokens"] == "required" and spec["metadataOptions"]["httpPutResponseHopLimit"] == 1
    )
    assert spec["amiSelectorTerms"] == [{"alias": versions.EKS_AL2023_AMI_ALIAS}]
    assert spec["subnetSelectorTerms"] == [{"tags": {labels.KARPENTER_DISCOVERY_TAG: "gpuscale-prod"}}]
    assert spec["tags"]["team"] == "ml-platform"
    chart = by_type["test:index:Chart"]
    assert chart.urn in nc.dependencies and nc.urn in by_type[NODEPOOL].dependencies
    component = by_type["gpuscale:index:CpuNodePool"]
    assert nc.parent_urn == by_type[NODEPOOL].parent_urn == component.urn


@requires_shared
def test_cpu_objects_are_schema_valid(run_pulumi: Run, prod_spec: PlatformSpec) -> None:
    by_type, _ = build(run_pulumi, CpuNodePoolArgs.from_spec(prod_spec))
    assert_valid(
        *(
            ints({k: by_type[t].inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")})
            for t in (NODEPOOL, NODECLASS)
        )
    )
