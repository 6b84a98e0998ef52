"""GpuNodePool under Pulumi mocks, from small specs: safe disruption, the user's cluster, Outputs in, Outputs out."""

from __future__ import annotations

import logging
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
import pytest
from pydantic import ValidationError

from gpuscale import labels, sizing
from gpuscale.components import GpuNodePool, GpuNodePoolArgs, NameClash
from gpuscale.spec.topology import GpuNodePoolSpec
from tests.components.support import capture, consumer, ints, k8s_object, named, one, run, stand_in
from tests.conftest import requires_shared
from tests.k8s_schema import assert_valid
from tests.specs import pd_spec, small_spec

NODEPOOL = "kubernetes:karpenter.sh/v1:NodePool"
NODECLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
L40S = GpuNodePoolSpec(name="l40s", instance_types=["g6e.xlarge"], gpu_limit=8)


def build(args: GpuNodePoolArgs) -> tuple[list[Any], dict[str, Any]]:
    outputs: dict[str, Any] = {}

    def program() -> None:
        chart = stand_in("karpenter-chart")
        pool = GpuNodePool(f"gpu-{args.pool.name}", args, opts=pulumi.ResourceOptions(depends_on=[chart]))
        capture(outputs, "node_pool_name", pool.node_pool_name)
        capture(outputs, "node_class_name", pool.node_class_name)

    return run(program), outputs


def test_from_spec_emits_a_safe_pool_for_the_named_cluster() -> None:
    spec = pd_spec()
    args = GpuNodePoolArgs.from_spec(spec, "h100", cluster_name="team-a", node_role_name="KarpenterNodeRole-team-a")
    records, outputs = build(args)
    np, nc = one(records, NODEPOOL), one(records, NODECLASS)
    assert (np.name, nc.name) == ("gpu-h100-nodepool", "gpu-h100-nodeclass")
    assert np.parent_urn == nc.parent_urn == one(records, "gpuscale:index:GpuNodePool").urn
    assert outputs == {"node_pool_name": "h100", "node_class_name": "h100"}
    pool = ints(np.inputs["spec"])
    assert (pool["disruption"]["consolidationPolicy"], pool["disruption"]["consolidateAfter"]) == ("WhenEmpty", "1h")
    assert pool["template"]["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    assert pool["limits"]["nvidia.com/gpu"] == 64
    # no grace period: with one, Karpenter's drift would force-evict serving pods past their PDBs
    assert "terminationGracePeriod" not in pool["template"]["spec"]
    assert {"key": labels.ZONE_LABEL, "operator": "In", "values": ["us-east-1a", "us-east-1b"]} in pool["template"]["spec"]["requirements"]
    node_class = ints(nc.inputs["spec"])
    # the user's cluster, not one derived from the environment name
    assert node_class["subnetSelectorTerms"] == [{"tags": {labels.KARPENTER_DISCOVERY_TAG: "team-a"}}]
    assert node_class["securityGroupSelectorTerms"] == [{"tags": {labels.KARPENTER_DISCOVERY_TAG: "team-a"}}]
    assert node_class["role"] == "KarpenterNodeRole-team-a"
    assert node_class["metadataOptions"]["httpTokens"] == "required"
    assert node_class["metadataOptions"]["httpPutResponseHopLimit"] == 1
    root = sizing.root_volume_gib(spec, spec.topology.pool("h100"))
    assert node_class["blockDeviceMappings"][0]["ebs"]["volumeSize"] == f"{root}Gi"


def test_outputs_from_other_resources_are_accepted_and_carried() -> None:
    """Cluster name, node role and subnet/security-group ids taken from other resources' Outputs."""
    outputs: dict[str, Any] = {}

    def program() -> None:
        cluster = aws.eks.Cluster("theirs", name="team-b", role_arn="arn:aws:iam::123456789012:role/eks",
                                  vpc_config=aws.eks.ClusterVpcConfigArgs(subnet_ids=["subnet-0a"]))
        role = aws.iam.Role("their-node-role", assume_role_policy="{}")
        subnet = aws.ec2.Subnet("their-subnet", vpc_id="vpc-0a", cidr_block="10.0.0.0/20")
        group = aws.ec2.SecurityGroup("their-sg", vpc_id="vpc-0a")
        args = GpuNodePoolArgs(pool=L40S, cluster_name=cluster.name, node_role_name=role.name, root_volume_gib=200,
                               subnet_ids=[subnet.id], security_group_ids=pulumi.Output.all(group.id))
        pool = GpuNodePool("l40s", args)
        capture(outputs, "subnet", subnet.id)
        capture(outputs, "group", group.id)
        consumer("reads-pool-name", pool.node_pool_name)

    records = run(program)
    nc = one(records, NODECLASS)
    spec = nc.inputs["spec"]
    assert spec["role"] == "their-node-role"
    assert spec["subnetSelectorTerms"] == [{"id": outputs["subnet"]}]
    assert spec["securityGroupSelectorTerms"] == [{"id": outputs["group"]}]
    for source in ("theirs", "their-node-role", "their-subnet", "their-sg"):
        assert named(records, source).urn in nc.dependencies, source
    # the pool name output comes from the NodePool itself: a consumer waits for it
    assert one(records, NODEPOOL).urn in named(records, "reads-pool-name").dependencies


def test_narrow_args_need_only_a_pool_a_cluster_and_a_role() -> None:
    args = GpuNodePoolArgs(pool=L40S.model_copy(update={"root_volume_gib": 150}), cluster_name="c", node_role_name="r")
    assert args.volume_gib == 150 and args.zones is None and args.stage == "prod"
    records, _ = build(args)
    spec = ints(one(records, NODEPOOL).inputs["spec"])
    assert not [r for r in spec["template"]["spec"]["requirements"] if r["key"] == labels.ZONE_LABEL]
    with pytest.raises(ValidationError, match="root_volume_gib is required"):
        GpuNodePoolArgs(pool=L40S, cluster_name="c", node_role_name="r")  # nothing to size the disk from


def test_plain_ids_select_exactly_those_subnets_and_bad_ones_are_refused() -> None:
    args = GpuNodePoolArgs(pool=L40S, cluster_name="c", node_role_name="r", root_volume_gib=100,
                           subnet_ids=["subnet-0a", "subnet-0b"], security_group_ids=["sg-0c"])
    records, _ = build(args)
    spec = one(records, NODECLASS).inputs["spec"]
    assert spec["subnetSelectorTerms"] == [{"id": "subnet-0a"}, {"id": "subnet-0b"}]
    assert spec["securityGroupSelectorTerms"] == [{"id": "sg-0c"}]
    with pytest.raises(ValidationError, match="'vpc-0a' is not a subnet id"):
        GpuNodePoolArgs(pool=L40S, cluster_name="c", node_role_name="r", root_volume_gib=100, subnet_ids=["vpc-0a"])
    with pytest.raises(ValidationError, match="not an EKS cluster name"):
        GpuNodePoolArgs(pool=L40S, cluster_name="team a", node_role_name="r", root_volume_gib=100)
    with pytest.raises(ValidationError, match="expected a string or a pulumi Output"):
        GpuNodePoolArgs(pool=L40S, cluster_name=42, node_role_name="r", root_volume_gib=100)  # type: ignore[arg-type]


def test_opts_depends_on_reaches_both_objects() -> None:
    records, _ = build(GpuNodePoolArgs(pool=L40S, cluster_name="c", node_role_name="r", root_volume_gib=100))
    chart = named(records, "karpenter-chart").urn
    np, nc = one(records, NODEPOOL), one(records, NODECLASS)
    assert chart in np.dependencies and chart in nc.dependencies
    assert nc.urn in np.dependencies


def test_two_pools_with_one_name_on_one_cluster_are_refused() -> None:
    args = GpuNodePoolArgs(pool=L40S, cluster_name="c", node_role_name="r", root_volume_gib=100)

    def twice() -> None:
        GpuNodePool("a", args)
        GpuNodePool("b", args)

    with pytest.raises(NameClash, match=r"GpuNodePool 'b' would create EC2NodeClass l40s, which GpuNodePool 'a' already"):
        run(twice)

    def renamed_or_elsewhere() -> None:
        GpuNodePool("a", args)
        GpuNodePool("b", args.model_copy(update={"name": "l40s-b"}))
        other = k8s.Provider("other-cluster", kubeconfig="{}")
        GpuNodePool("c", args, opts=pulumi.ResourceOptions(provider=other))

    records = run(renamed_or_elsewhere)
    assert sorted(r.inputs["metadata"]["name"] for r in records if r.type == NODEPOOL) == ["l40s", "l40s", "l40s-b"]
    renamed = [r for r in records if r.type == NODEPOOL and r.inputs["metadata"]["name"] == "l40s-b"]
    assert renamed[0].inputs["spec"]["template"]["spec"]["nodeClassRef"]["name"] == "l40s-b"
    # pods still select the pool by its label, whatever the object is called
    assert renamed[0].inputs["spec"]["template"]["metadata"]["labels"][labels.NODE_POOL_LABEL] == "l40s"


def test_prod_args_refuse_an_unpinned_ami() -> None:
    latest = GpuNodePoolSpec(name="x", instance_types=["g6e.xlarge"], gpu_limit=1, ami_alias="al2023@latest")
    with pytest.raises(ValidationError, match="in production drifts every node"):
        GpuNodePoolArgs(pool=latest, cluster_name="c", node_role_name="r", root_volume_gib=100)
    GpuNodePoolArgs(pool=latest, cluster_name="c", node_role_name="r", root_volume_gib=100, stage="dev")


def test_acknowledged_unsafe_pool_is_emitted_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    pool = GpuNodePoolSpec(
        name="risky", instance_types=["g6e.xlarge"], gpu_limit=2, consolidation_policy="WhenEmptyOrUnderutilized",
        consolidate_after="5m", acknowledge_underutilized_consolidation_evicts_inference=True,
    )
    args = GpuNodePoolArgs(pool=pool, cluster_name="c", node_role_name="r", root_volume_gib=100, cold_start_s=500)
    with caplog.at_level(logging.WARNING):
        records, _ = build(args)
    np = one(records, NODEPOOL)
    assert np.inputs["spec"]["disruption"]["consolidationPolicy"] == "WhenEmptyOrUnderutilized"
    assert np.inputs["metadata"]["annotations"][labels.ACK_UNSAFE_CONSOLIDATION_ANNOTATION] == "true"
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("evict in-flight inference" in m and "risky" in m for m in messages)
    assert any("consolidateAfter 5m is shorter than 1h" in m for m in messages)
    assert np.inputs["metadata"]["annotations"][labels.COLD_START_ANNOTATION] == "500"  # what the pack's floor reads


def test_a_pool_mixing_network_layer_counts_says_which_layers_its_topology_keeps(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pool = GpuNodePoolSpec(name="mixed", instance_types=["p5.48xlarge", "p5.4xlarge"], gpu_limit=16)
    with caplog.at_level(logging.WARNING):
        build(GpuNodePoolArgs(pool=pool, cluster_name="c", node_role_name="r", root_volume_gib=100, stage="dev"))
    (message,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "mixed" in r.getMessage()]
    assert "p5.48xlarge: 3, p5.4xlarge: 0" in message and "keeps the 0 layer(s)" in message


def test_safe_pool_logs_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    spec = small_spec()
    with caplog.at_level(logging.WARNING):
        build(GpuNodePoolArgs.from_spec(spec, "l40s", cluster_name="c", node_role_name="r"))
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and "GPU pool" in r.getMessage()]


@requires_shared
def test_emitted_objects_are_schema_valid() -> None:
    spec = pd_spec()
    records, _ = build(GpuNodePoolArgs.from_spec(spec, "h100", cluster_name="c", node_role_name="r",
                                                 subnet_ids=["subnet-0a"], security_group_ids=["sg-0b"]))
    assert_valid(*(k8s_object(r) for r in records if r.type in (NODEPOOL, NODECLASS)))
