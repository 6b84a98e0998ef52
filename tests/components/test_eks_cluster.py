"""EksCluster under Pulumi mocks: network, encrypted control plane, access, system nodes, add-ons, provider, kubeconfig."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_aws as aws
import pytest
from pydantic import ValidationError

from gpuscale import labels
from gpuscale.components import EksCluster, EksClusterArgs, ExistingSubnets, NameClash
from gpuscale.spec.platform import PlatformSpec
from gpuscale.synth.replacements import CONFIGMAP_MUTABLE_OPTION, option_on
from tests.components.support import Records, capture, named, of_type, one, run, stack_config
from tests.specs import environment, small_spec

SECRET_SIG = "4dabf18193072939515e22adb298388d"
ADMIN = "arn:aws:iam::123456789012:role/platform-admins"
TAGS = {"team": "ml-platform", "cost-center": "inference"}
# resources whose AWS API has no tags argument
UNTAGGABLE = {
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
    "aws:iam/rolePolicy:RolePolicy",
    "aws:kms/alias:Alias",
    "aws:ec2/routeTableAssociation:RouteTableAssociation",
    "aws:ec2/tag:Tag",
    "aws:eks/accessPolicyAssociation:AccessPolicyAssociation",
}
OUTPUTS = ("cluster_name", "cluster_arn", "endpoint", "kubeconfig", "node_security_group_id", "private_subnet_ids")


def prod_spec() -> PlatformSpec:
    # a private-only endpoint: acknowledged, as if pulumi ran inside the VPC (a new VPC is refused without it)
    env = {**environment(name="p", stage="prod"), "endpoint_public_access": False, "public_access_cidrs": [],
           "acknowledge_private_endpoint_runs_inside_vpc": True, "admin_principal_arns": [ADMIN], "tags": TAGS, "networking": {"vpc_cidr": "10.40.0.0/16"}}
    return small_spec(environment=env, topology={
        "zones": ["us-east-1a", "us-east-1b", "us-east-1c"],
        "gpu_pools": [{"name": "l40s", "instance_types": ["g6e.xlarge"], "gpu_limit": 16}],
    })


def build(args: EksClusterArgs, opts: pulumi.ResourceOptions | None = None) -> tuple[Records, dict[str, Any]]:
    outputs: dict[str, Any] = {}

    def program() -> None:
        c = EksCluster("eks", args, opts=opts)
        for attr in OUTPUTS:
            capture(outputs, attr, getattr(c, attr))

    return run(program), outputs


@pytest.fixture(scope="module")
def prod() -> tuple[Records, dict[str, Any]]:
    return build(EksClusterArgs.from_spec(prod_spec(), cluster_name="inference-p"))


def test_control_plane_is_encrypted_private_and_api_authenticated(prod: tuple[Records, dict[str, Any]]) -> None:
    records, _ = prod
    cluster = one(records, "aws:eks/cluster:Cluster").inputs
    assert cluster["name"] == "inference-p" and cluster["version"] == "1.36"
    assert cluster["accessConfig"]["authenticationMode"] == "API"
    # pulumi up runs outside the new VPC: public endpoint for the declared CI CIDR only, private for the nodes
    assert cluster["vpcConfig"]["endpointPrivateAccess"] is True
    assert cluster["vpcConfig"]["endpointPublicAccess"] is False  # private-only, acknowledged in prod_spec()
    assert "publicAccessCidrs" not in cluster["vpcConfig"]
    assert cluster["encryptionConfig"]["resources"] == ["secrets"]
    assert cluster["encryptionConfig"]["provider"]["keyArn"].startswith("arn:aws:kms:us-east-1:")
    assert one(records, "aws:kms/key:Key").inputs["enableKeyRotation"] is True
    assert one(records, "aws:kms/alias:Alias").inputs["name"] == "alias/inference-p-secrets"
    assert cluster["bootstrapSelfManagedAddons"] is False
    assert cluster["deletionProtection"] is True
    assert {"audit", "authenticator"} <= set(cluster["enabledClusterLogTypes"])


def test_iam_roles_are_auto_named_so_two_clusters_never_share_one(prod: tuple[Records, dict[str, Any]]) -> None:
    records, _ = prod
    roles = of_type(records, "aws:iam/role:Role")
    assert len(roles) == 3 and all("name" not in r.inputs for r in roles)  # cluster, system nodes, EBS CSI driver  # Pulumi appends a random suffix
    role = named(records, "eks-cluster-role")
    assert json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]["Principal"] == {"Service": "eks.amazonaws.com"}
    policy = json.loads(one(records, "aws:iam/rolePolicy:RolePolicy").inputs["policy"])
    cluster = one(records, "aws:eks/cluster:Cluster").inputs
    assert policy["Statement"][0]["Resource"] == cluster["encryptionConfig"]["provider"]["keyArn"]


def test_new_vpc_private_subnets_are_discoverable_and_prod_has_a_nat_per_zone(
    prod: tuple[Records, dict[str, Any]],
) -> None:
    records, outputs = prod
    subnets = of_type(records, "aws:ec2/subnet:Subnet")
    private = [s for s in subnets if "-private-" in s.name]
    public = [s for s in subnets if "-public-" in s.name]
    assert sorted(s.inputs["availabilityZone"] for s in private) == ["us-east-1a", "us-east-1b", "us-east-1c"]
    assert len(public) == 3
    assert all(s.inputs["tags"][labels.KARPENTER_DISCOVERY_TAG] == "inference-p" for s in private)
    assert not any(labels.KARPENTER_DISCOVERY_TAG in s.inputs["tags"] for s in public)
    assert not any(s.inputs.get("mapPublicIpOnLaunch") for s in public)
    assert len(of_type(records, "aws:ec2/natGateway:NatGateway")) == 3
    assert one(records, "aws:ec2/vpc:Vpc").inputs["cidrBlock"] == "10.40.0.0/16"
    cluster = one(records, "aws:eks/cluster:Cluster").inputs
    assert sorted(cluster["vpcConfig"]["subnetIds"]) == sorted(outputs["private_subnet_ids"])
    assert len(outputs["private_subnet_ids"]) == 3


def test_dev_public_endpoint_is_limited_to_its_cidrs_and_uses_one_nat() -> None:
    records, _ = build(EksClusterArgs.from_spec(small_spec(), cluster_name="dev-c"))
    cluster = one(records, "aws:eks/cluster:Cluster").inputs
    assert cluster["vpcConfig"]["endpointPublicAccess"] is True
    assert cluster["vpcConfig"]["publicAccessCidrs"] == ["203.0.113.0/24"]
    assert len(of_type(records, "aws:ec2/natGateway:NatGateway")) == 1
    assert len(of_type(records, "aws:ec2/routeTable:RouteTable")) == 1 + 2  # public + one per private subnet
    assert cluster["deletionProtection"] is False


def test_existing_subnets_may_be_an_output_list_and_are_used_as_given() -> None:
    """A network stack's subnets (here: Subnets of this program, as an Output of a list) need no VPC and no tags."""
    outputs: dict[str, Any] = {}

    def program() -> None:
        subnets = [aws.ec2.Subnet(f"net-{z}", vpc_id="vpc-0a", cidr_block=f"10.0.{i}.0/24") for i, z in enumerate("ab")]
        ids = pulumi.Output.all(*[s.id for s in subnets])
        c = EksCluster("eks", EksClusterArgs(cluster_name="c", zones=["us-east-1a"], stage="dev",
                                             network=ExistingSubnets(private_subnet_ids=ids)))
        capture(outputs, "ids", ids)
        capture(outputs, "private_subnet_ids", c.private_subnet_ids)

    records = run(program)
    assert not of_type(records, "aws:ec2/vpc:Vpc")
    assert [t.name for t in of_type(records, "aws:ec2/tag:Tag")] == ["eks-node-sg-discovery"]  # subnets: not ours
    assert outputs["private_subnet_ids"] == outputs["ids"]
    cluster = one(records, "aws:eks/cluster:Cluster")
    assert cluster.inputs["vpcConfig"]["subnetIds"] == outputs["ids"]
    assert named(records, "net-a").urn in cluster.dependencies
    assert one(records, "aws:eks/nodeGroup:NodeGroup").inputs["subnetIds"] == outputs["ids"]


def test_admin_principals_may_be_outputs_when_named() -> None:
    def program() -> None:
        admins = aws.iam.Role("ops", assume_role_policy="{}")
        EksCluster("eks", EksClusterArgs(cluster_name="c", zones=["us-east-1a"], stage="dev",
                                         admin_principal_arns={"ops": admins.arn}))

    records = run(program)
    entry = named(records, "eks-admin-ops")
    assert entry.inputs["principalArn"] == "arn:aws:iam::123456789012:role/ops"
    assert named(records, "ops").urn in entry.dependencies
    with pytest.raises(ValidationError, match=r"needs a name for its access entry; pass \{name: arn\}"):
        EksClusterArgs(cluster_name="c", zones=["a"], admin_principal_arns=[pulumi.Output.from_input(ADMIN)])
    with pytest.raises(ValidationError, match="not an IAM role or user ARN"):
        EksClusterArgs(cluster_name="c", zones=["a"], admin_principal_arns=["platform-admins"])


def test_admins_get_access_entries_with_cluster_admin_policy(prod: tuple[Records, dict[str, Any]]) -> None:
    records, _ = prod
    entry = one(records, "aws:eks/accessEntry:AccessEntry")
    assoc = one(records, "aws:eks/accessPolicyAssociation:AccessPolicyAssociation").inputs
    assert entry.inputs["principalArn"] == assoc["principalArn"] == ADMIN
    assert entry.inputs["type"] == "STANDARD"
    assert entry.name.startswith("eks-admin-") and len(entry.name) == len("eks-admin-") + 8  # keyed by the ARN's hash
    assert assoc["policyArn"] == "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
    assert assoc["accessScope"] == {"type": "cluster"}


def test_node_security_group_is_tagged_for_karpenter(prod: tuple[Records, dict[str, Any]]) -> None:
    records, outputs = prod
    tag = named(records, "eks-node-sg-discovery")
    assert tag.inputs == {"resourceId": outputs["node_security_group_id"], "key": "karpenter.sh/discovery",
                          "value": "inference-p"}


def test_system_node_group_is_on_demand_tainted_and_imdsv2_only(prod: tuple[Records, dict[str, Any]]) -> None:
    records, outputs = prod
    ng = one(records, "aws:eks/nodeGroup:NodeGroup").inputs
    assert ng["capacityType"] == "ON_DEMAND"
    assert ng["labels"] == {labels.SYSTEM_NODE_LABEL: labels.SYSTEM_NODE_ROLE}
    assert ng["taints"] == [{"key": "CriticalAddonsOnly", "value": "true", "effect": "NO_SCHEDULE"}]
    assert ng["scalingConfig"]["minSize"] >= 2
    assert sorted(ng["subnetIds"]) == sorted(outputs["private_subnet_ids"])
    lt = one(records, "aws:ec2/launchTemplate:LaunchTemplate")
    assert ng["launchTemplate"]["id"].startswith(lt.name)
    assert lt.inputs["metadataOptions"]["httpTokens"] == "required"
    assert lt.inputs["metadataOptions"]["httpPutResponseHopLimit"] == 1
    assert lt.inputs["blockDeviceMappings"][0]["ebs"]["encrypted"] == "true"


def test_core_addons_versions_and_ordering(prod: tuple[Records, dict[str, Any]]) -> None:
    records, _ = prod
    addons = {a.inputs["addonName"]: a for a in of_type(records, "aws:eks/addon:Addon")}
    assert set(addons) == {"vpc-cni", "kube-proxy", "eks-pod-identity-agent", "coredns", "aws-ebs-csi-driver"}
    # the EBS CSI driver (Prometheus' volume) gets its own Pod Identity role, trusted for its service account only
    (assoc,) = addons["aws-ebs-csi-driver"].inputs["podIdentityAssociations"]
    assert assoc["serviceAccount"] == "ebs-csi-controller-sa"
    assert all(a.inputs["addonVersion"] == "v0.0.0-synth" for a in addons.values())  # from getAddonVersion
    node_group = one(records, "aws:eks/nodeGroup:NodeGroup")
    assert {addons[n].urn for n in ("vpc-cni", "kube-proxy", "eks-pod-identity-agent")} <= set(node_group.dependencies)
    assert node_group.urn in addons["coredns"].dependencies


def kubeconfig_user(records: Records) -> dict[str, Any]:
    provider = one(records, "pulumi:providers:kubernetes")
    assert provider.inputs["kubeconfig"][SECRET_SIG]  # marked secret
    exec_config: dict[str, Any] = json.loads(provider.inputs["kubeconfig"]["value"])["users"][0]["user"]["exec"]
    return exec_config


def test_kubernetes_provider_uses_a_secret_exec_kubeconfig_and_waits_for_nodes(
    prod: tuple[Records, dict[str, Any]],
) -> None:
    records, outputs = prod
    provider = one(records, "pulumi:providers:kubernetes")
    doc = json.loads(provider.inputs["kubeconfig"]["value"])
    assert doc["users"][0]["user"]["exec"]["args"] == [
        "eks", "get-token", "--cluster-name", "inference-p", "--region", "us-east-1", "--output", "json",
    ]
    assert "env" not in doc["users"][0]["user"]["exec"]  # no profile anywhere: the default credential chain
    assert doc["clusters"][0]["cluster"]["server"] == outputs["endpoint"]
    assert json.loads(outputs["kubeconfig"]) == doc
    assert one(records, "aws:eks/nodeGroup:NodeGroup").urn in provider.dependencies
    # dashboards (ConfigMaps) update in place rather than being replaced (components/kubernetes_provider.py)
    assert option_on(provider.inputs, CONFIGMAP_MUTABLE_OPTION)


def test_kubeconfig_carries_the_deploying_role_and_profile() -> None:
    args = EksClusterArgs(cluster_name="c", zones=["us-east-1a"], stage="dev",
                          kubeconfig_role_arn="arn:aws:iam::123456789012:role/deployer", kubeconfig_profile="ops")
    exec_config = kubeconfig_user(build(args)[0])
    assert exec_config["args"][-2:] == ["--role-arn", "arn:aws:iam::123456789012:role/deployer"]
    assert exec_config["env"] == [{"name": "AWS_PROFILE", "value": "ops"}]


def test_kubeconfig_profile_defaults_to_the_aws_providers_and_never_reads_config() -> None:
    plain = EksClusterArgs(cluster_name="c", zones=["us-east-1a"], stage="dev")

    def with_provider() -> None:
        mine = aws.Provider("mine", region="us-east-1", profile="team-b")
        EksCluster("eks", plain, opts=pulumi.ResourceOptions(provider=mine))

    assert kubeconfig_user(run(with_provider))["env"] == [{"name": "AWS_PROFILE", "value": "team-b"}]
    with stack_config({"aws:profile": "from-config"}):  # a reusable component: the program passes the profile in
        records, _ = build(plain)
    assert "env" not in kubeconfig_user(records)


def test_two_clusters_of_one_name_on_one_provider_are_refused() -> None:
    args = EksClusterArgs(cluster_name="c", zones=["us-east-1a"], stage="dev")

    def twice() -> None:
        EksCluster("a", args)
        EksCluster("b", args)

    with pytest.raises(NameClash, match="EksCluster 'b' would create EKS cluster c, which EksCluster 'a' already"):
        run(twice)


def test_outputs_and_children(prod: tuple[Records, dict[str, Any]]) -> None:
    records, outputs = prod
    component = one(records, "gpuscale:index:EksCluster")
    assert outputs["cluster_name"] == "inference-p"
    assert outputs["cluster_arn"] == "arn:aws:eks:us-east-1:123456789012:cluster/inference-p"
    assert outputs["node_security_group_id"].startswith("sg-")
    children = [r for r in records if r is not component]
    assert all(r.parent_urn == component.urn and r.name.startswith("eks-") for r in children)


def test_spec_tags_on_every_taggable_aws_resource(prod: tuple[Records, dict[str, Any]]) -> None:
    records, _ = prod
    taggable = [r for r in records if r.type.startswith("aws:") and r.type not in UNTAGGABLE]
    assert len(taggable) > 20
    for r in taggable:
        assert TAGS.items() <= r.inputs.get("tags", {}).items(), r.name
