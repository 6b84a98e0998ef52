"""EksCluster under Pulumi mocks: network, encrypted control plane, access, system nodes, add-ons, provider."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from gpuscale import labels
from gpuscale.components.eks_cluster import EksCluster, EksClusterArgs
from gpuscale.spec.environment import ExistingSubnetsSpec
from gpuscale.spec.platform import PlatformSpec
from gpuscale.synth.mocks import RecordedResource

SECRET_SIG = "4dabf18193072939515e22adb298388d"
# resources whose AWS API has no tags argument
UNTAGGABLE = {
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
    "aws:iam/rolePolicy:RolePolicy",
    "aws:kms/alias:Alias",
    "aws:ec2/routeTableAssociation:RouteTableAssociation",
    "aws:ec2/tag:Tag",
    "aws:eks/accessPolicyAssociation:AccessPolicyAssociation",
}

Run = Callable[..., list[RecordedResource]]


def build(run_pulumi: Run, args: EksClusterArgs) -> tuple[list[RecordedResource], dict[str, Any]]:
    outputs: dict[str, Any] = {}

    def program() -> None:
        c = EksCluster("eks", args)
        for attr in (
            "cluster_name",
            "cluster_arn",
            "endpoint",
            "kubeconfig",
            "node_security_group_id",
            "private_subnet_ids",
        ):
            getattr(c, attr).apply(lambda v, attr=attr: outputs.__setitem__(attr, v))
        outputs["provider_type"] = type(c.provider).__name__

    return run_pulumi(program, region=args.environment.aws_region), outputs


def of_type(records: list[RecordedResource], typ: str) -> list[RecordedResource]:
    return [r for r in records if r.type == "aws:" + typ or r.type == typ]


def one(records: list[RecordedResource], typ: str) -> RecordedResource:
    (r,) = of_type(records, typ)
    return r


@pytest.fixture
def prod(run_pulumi: Run, prod_spec: PlatformSpec) -> tuple[list[RecordedResource], dict[str, Any]]:
    return build(run_pulumi, EksClusterArgs.from_spec(prod_spec))


def test_control_plane_is_encrypted_private_and_api_authenticated(
    prod: tuple[list[RecordedResource], dict[str, Any]],
) -> None:
    records, _ = prod
    cluster = one(records, "eks/cluster:Cluster").inputs
    key = one(records, "kms/key:Key")
    assert cluster["name"] == "gpuscale-prod" and cluster["version"] == "1.36"
    assert cluster["accessConfig"]["authenticationMode"] == "API"
    # pulumi up runs outside the new VPC: public endpoint for the declared CI CIDR only, private for the nodes
    assert cluster["vpcConfig"]["endpointPrivateAccess"] is True
    assert cluster["vpcConfig"]["endpointPublicAccess"] is True
    assert cluster["vpcConfig"]["publicAccessCidrs"] == ["198.51.100.0/24"]
    assert cluster["encryptionConfig"]["resources"] == ["secrets"]
    assert cluster["encryptionConfig"]["provider"]["keyArn"].startswith("arn:aws:kms:us-east-1:")
    assert key.inputs["enableKeyRotation"] is True
    assert cluster["bootstrapSelfManagedAddons"] is False
    assert cluster["deletionProtection"] is True
    assert {"audit", "authenticator"} <= set(cluster["enabledClusterLogTypes"])


def test_cluster_role_may_only_use_its_own_key(prod: tuple[list[RecordedResource], dict[str, Any]]) -> None:
    records, _ = prod
    (role,) = [r for r in of_type(records, "iam/role:Role") if r.name == "eks-cluster-role"]
    assert json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]["Principal"] == {"Service": "eks.amazonaws.com"}
    policy = json.loads(one(records, "iam/rolePolicy:RolePolicy").inputs["policy"])
    cluster = one(records, "eks/cluster:Cluster").inputs
    assert policy["Statement"][0]["Resource"] == cluster["encryptionConfig"]["provider"]["keyArn"]


def test_new_vpc_private_subnets_are_discoverable_and_prod_has_a_nat_per_zone(
    prod: tuple[list[RecordedResource], dict[str, Any]],
) -> None:
    records, outputs = prod
    subnets = of_type(records, "ec2/subnet:Subnet")
    private = [s for s in subnets if "-private-" in s.name]
    public = [s for s in subnets if "-public-" in s.name]
    assert sorted(s.inputs["availabilityZone"] for s in private) == ["us-east-1a", "us-east-1b", "us-east-1c"]
    assert len(public) == 3
    assert all(s.inputs["tags"][labels.KARPENTER_DISCOVERY_TAG] == "gpuscale-prod" for s in private)
    assert not any(labels.KARPENTER_DISCOVERY_TAG in s.inputs["tags"] for s in public)
    assert not any(s.inputs.get("mapPublicIpOnLaunch") for s in public)
    assert len(of_type(records, "ec2/natGateway:NatGateway")) == 3
    assert one(records, "ec2/vpc:Vpc").inputs["cidrBlock"] == "10.40.0.0/16"
    cluster = one(records, "eks/cluster:Cluster").inputs
    assert sorted(cluster["vpcConfig"]["subnetIds"]) == sorted(outputs["private_subnet_ids"])
    assert len(outputs["private_subnet_ids"]) == 3


def test_dev_public_endpoint_is_limited_to_its_cidrs_and_uses_one_nat(run_pulumi: Run, dev_spec: PlatformSpec) -> None:
    records, _ = build(run_pulumi, EksClusterArgs.from_spec(dev_spec))
    vpc_config = one(records, "eks/cluster:Cluster").inputs["vpcConfig"]
    assert vpc_config["endpointPublicAccess"] is True
    assert vpc_config["endpointPrivateAccess"] is True
    assert vpc_config["publicAccessCidrs"] == ["203.0.113.0/24"]
    assert len(of_type(records, "ec2/natGateway:NatGateway")) == 1
    assert len(of_type(records, "ec2/routeTable:RouteTable")) == 1 + 2  # public + one per private subnet
    assert one(records, "eks/cluster:Cluster").inputs["deletionProtection"] is False


def test_existing_subnets_are_tagged_not_created(run_pulumi: Run, dev_spec: PlatformSpec) -> None:
    env = dev_spec.environment.model_copy(
        update={
            "networking": ExistingSubnetsSpec(
                vpc_id="vpc-0abc",
                private_subnet_ids=["subnet-0a", "subnet-0b"],
            )
        }
    )
    records, outputs = build(run_pulumi, EksClusterArgs(environment=env, zones=dev_spec.topology.zones))
    assert not of_type(records, "ec2/vpc:Vpc") and not of_type(records, "ec2/subnet:Subnet")
    tagged = {t.inputs["resourceId"]: t.inputs for t in of_type(records, "ec2/tag:Tag")}
    assert tagged["subnet-0a"]["key"] == tagged["subnet-0b"]["key"] == labels.KARPENTER_DISCOVERY_TAG
    assert tagged["subnet-0a"]["value"] == "gpuscale-dev"
    assert outputs["private_subnet_ids"] == ["subnet-0a", "subnet-0b"]


def test_node_security_group_is_tagged_for_karpenter(prod: tuple[list[RecordedResource], dict[str, Any]]) -> None:
    records, outputs = prod
    (tag,) = [t for t in of_type(records, "ec2/tag:Tag") if t.name == "eks-node-sg-discovery"]
    assert tag.inputs == {
        "resourceId": outputs["node_security_group_id"],
        "key": "karpenter.sh/discovery",
        "value": "gpuscale-prod",
    }


def test_admins_get_access_entries_with_cluster_admin_policy(
    prod: tuple[list[RecordedResource], dict[str, Any]],
) -> None:
    records, _ = prod
    entry = one(records, "eks/accessEntry:AccessEntry").inputs
    assoc = one(records, "eks/accessPolicyAssociation:AccessPolicyAssociation").inputs
    assert entry["principalArn"] == assoc["principalArn"] == "arn:aws:iam::123456789012:role/platform-admins"
    assert entry["type"] == "STANDARD"
    assert assoc["policyArn"] == "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
    assert assoc["accessScope"] == {"type": "cluster"}


def test_system_node_group_is_on_demand_tainted_and_imdsv2_only(
    prod: tuple[list[RecordedResource], dict[str, Any]],
) -> None:
    records, outputs = prod
    ng = one(records, "eks/nodeGroup:NodeGroup").inputs
    assert ng["capacityType"] == "ON_DEMAND"
    assert ng["labels"] == {labels.SYSTEM_NODE_LABEL: labels.SYSTEM_NODE_ROLE}
    assert ng["taints"] == [{"key": "CriticalAddonsOnly", "value": "true", "effect": "NO_SCHEDULE"}]
    assert ng["scalingConfig"]["minSize"] >= 2
    assert sorted(ng["subnetIds"]) == sorted(outputs["private_subnet_ids"])
    lt = one(records, "ec2/launchTemplate:LaunchTemplate")
    assert ng["launchTemplate"]["id"].startswith(lt.name)
    assert lt.inputs["metadataOptions"]["httpTokens"] == "required"
    assert lt.inputs["metadataOptions"]["httpPutResponseHopLimit"] == 1
    assert lt.inputs["blockDeviceMappings"][0]["ebs"]["encrypted"] == "true"


def test_core_addons_versions_and_ordering(prod: tuple[list[RecordedResource], dict[str, Any]]) -> None:
    records, _ = prod
    addons = {a.inputs["addonName"]: a for a in of_type(records, "eks/addon:Addon")}
    assert set(addons) == {"vpc-cni", "kube-proxy", "eks-pod-identity-agent", "coredns", "aws-ebs-csi-driver"}
    assert all(a.inputs["addonVersion"] == "v0.0.0-synth" for a in addons.values())  # from getAddonVersion
    node_group = one(records, "eks/nodeGroup:NodeGroup")
    # networking and Pod Identity before any node; CoreDNS once nodes exist
    assert {addons[n].urn for n in ("vpc-cni", "kube-proxy", "eks-pod-identity-agent")} <= set(node_group.dependencies)
    assert node_group.urn in addons["coredns"].dependencies


def test_ebs_csi_driver_gets_its_own_pod_identity_role(prod: tuple[list[RecordedResource], dict[str, Any]]) -> None:
    # Prometheus keeps its TSDB on an EBS volume; EKS installs no CSI driver or default StorageClass itself
    records, _ = prod
    (addon,) = [a for a in of_type(records, "eks/addon:Addon") if a.inputs["addonName"] == "aws-ebs-csi-driver"]
    role = next(r for r in records if r.name == "eks-ebs-csi-role")
    (assoc,) = addon.inputs["podIdentityAssociations"]
    assert assoc["serviceAccount"] == "ebs-csi-controller-sa"
    trust = json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]
    assert trust["Condition"]["StringEquals"]["aws:RequestTag/kubernetes-service-account"] == "ebs-csi-controller-sa"
    attach = next(r for r in records if r.name == "eks-ebs-csi-policy")
    assert attach.inputs["policyArn"] == "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"


def test_kubernetes_provider_uses_a_secret_exec_kubeconfig_and_waits_for_nodes(
    prod: tuple[list[RecordedResource], dict[str, Any]],
) -> None:
    records, outputs = prod
    provider = one(records, "pulumi:providers:kubernetes")
    kubeconfig = provider.inputs["kubeconfig"]
    assert kubeconfig[SECRET_SIG]  # marked secret
    doc = json.loads(kubeconfig["value"])
    assert doc["users"][0]["user"]["exec"]["args"][:4] == ["eks", "get-token", "--cluster-name", "gpuscale-prod"]
    assert doc["clusters"][0]["cluster"]["server"] == outputs["endpoint"]
    assert json.loads(outputs["kubeconfig"]) == doc
    assert one(records, "eks/nodeGroup:NodeGroup").urn in provider.dependencies
    assert outputs["provider_type"] == "Provider"


def test_outputs_and_children(prod: tuple[list[RecordedResource], dict[str, Any]]) -> None:
    records, outputs = prod
    (component,) = [r for r in records if r.type == "gpuscale:index:EksCluster"]
    assert outputs["cluster_name"] == "gpuscale-prod"
    assert outputs["cluster_arn"] == "arn:aws:eks:us-east-1:123456789012:cluster/gpuscale-prod"
    assert outputs["node_security_group_id"].startswith("sg-")
    children = [r for r in records if r is not component]
    assert all(r.parent_urn == component.urn for r in children)
    assert all(r.name.startswith("eks-") for r in children)


def test_spec_tags_on_every_taggable_aws_resource(prod: tuple[list[RecordedResource], dict[str, Any]]) -> None:
    records, _ = prod
    taggable = [r for r in records if r.type.startswith("aws:") and r.type not in UNTAGGABLE]
    assert len(taggable) > 20
    for r in taggable:
        assert {"team": "ml-platform", "cost-center": "inference-prod"}.items() <= r.inputs.get("tags", {}).items(), (
            r.name
        )
