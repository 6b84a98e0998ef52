"""IAM documents: the Karpenter controller policies are least-privilege and scoped to one cluster."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpuscale.manifests import iam

CLUSTER = "gpuscale-prod"
NODE_ROLE_ARN = "arn:aws:iam::123456789012:role/gpuscale-prod-karpenter-node"
QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:gpuscale-prod"
# RunInstances/CreateFleet only *reference* these (upstream grants them without a condition): nothing is changed
REFERENCED_ONLY = (
    "::image/",
    "::snapshot/",
    ":security-group/",
    ":subnet/",
    ":capacity-reservation/",
    ":placement-group/",
)


def context(**kw: Any) -> iam.ControllerPolicyContext:
    base: dict[str, Any] = {
        "cluster_name": CLUSTER,
        "region": "us-east-1",
        "account_id": "123456789012",
        "node_role_arn": NODE_ROLE_ARN,
        "queue_arn": QUEUE_ARN,
    }
    return iam.ControllerPolicyContext(**{**base, **kw})


def statements(docs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [st for doc in docs.values() for st in doc["Statement"]]


def as_list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else [v]


@pytest.mark.parametrize(
    ("action", "mutating"),
    [
        ("ec2:RunInstances", True),
        ("ec2:CreateTags", True),
        ("ec2:TerminateInstances", True),
        ("iam:PassRole", True),
        ("sqs:DeleteMessage", True),
        ("sqs:SendMessage", True),
        ("iam:AddRoleToInstanceProfile", True),
        ("ec2:*", True),
        ("*", True),
        ("ec2:DescribeInstances", False),
        ("iam:GetInstanceProfile", False),
        ("ssm:GetParameter", False),
        ("sqs:ReceiveMessage", False),
        ("iam:ListInstanceProfiles", False),
        ("pricing:GetProducts", False),
    ],
)
def test_action_classification(action: str, mutating: bool) -> None:
    assert iam.is_mutating(action) is mutating


def test_checker_flags_unconditioned_star_on_mutating_actions() -> None:
    bad = {"Statement": [{"Sid": "Bad", "Effect": "Allow", "Action": ["ec2:TerminateInstances"], "Resource": "*"}]}
    assert iam.unscoped_mutating_statements(bad) == [
        "statement Bad: ['ec2:TerminateInstances'] on Resource '*' without a cluster-tag condition"
    ]
    other_cluster = {
        "Statement": [
            {
                **bad["Statement"][0],
                "Condition": {"StringEquals": {"aws:ResourceTag/kubernetes.io/cluster/other": "owned"}},
            }
        ]
    }
    assert iam.unscoped_mutating_statements(other_cluster, CLUSTER)
    scoped = {
        "Statement": [
            {
                **bad["Statement"][0],
                "Condition": {"StringEquals": {f"aws:ResourceTag/kubernetes.io/cluster/{CLUSTER}": "owned"}},
            }
        ]
    }
    assert iam.unscoped_mutating_statements(scoped, CLUSTER) == []
    not_action = {"Statement": [{"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"}]}
    assert iam.unscoped_mutating_statements(not_action)
    deny = {"Statement": [{"Effect": "Deny", "Action": "sqs:*", "Principal": "*", "Resource": "*"}]}
    assert iam.unscoped_mutating_statements(deny) == []
    reads = {"Statement": [{"Effect": "Allow", "Action": ["ec2:DescribeSubnets"], "Resource": "*"}]}
    assert iam.unscoped_mutating_statements(reads) == []


@pytest.mark.parametrize("zonal_shift", [False, True])
def test_controller_policies_have_no_unscoped_mutating_statement(zonal_shift: bool) -> None:
    docs = iam.karpenter_controller_policies(context(zonal_shift=zonal_shift))
    for key, doc in docs.items():
        assert iam.unscoped_mutating_statements(doc, CLUSTER) == [], key


def test_every_mutating_wildcard_grant_is_conditioned_on_this_cluster() -> None:
    """Stricter than the Resource '*' rule: a mutating action on any wildcard ARN needs a condition naming the
    cluster, except RunInstances/CreateFleet on the resources a launch only references."""
    for st in statements(iam.karpenter_controller_policies(context())):
        mutating = [a for a in as_list(st["Action"]) if iam.is_mutating(a)]
        wild = [r for r in as_list(st["Resource"]) if r.endswith("*") and not any(t in r for t in REFERENCED_ONLY)]
        if mutating and wild:
            assert CLUSTER in json.dumps(st.get("Condition", {})), st["Sid"]
        if st["Sid"] == "AllowScopedEC2InstanceAccessActions":
            assert set(st["Action"]) == {"ec2:RunInstances", "ec2:CreateFleet"}
            assert all(any(t in r for t in REFERENCED_ONLY) for r in st["Resource"])


def test_condition_keys_interpolate_the_cluster_name() -> None:
    by_sid = {st["Sid"]: st for st in statements(iam.karpenter_controller_policies(context()))}
    assert by_sid["AllowScopedDeletion"]["Condition"]["StringEquals"] == {
        f"aws:ResourceTag/kubernetes.io/cluster/{CLUSTER}": "owned"
    }
    tags = by_sid["AllowScopedEC2InstanceActionsWithTags"]["Condition"]["StringEquals"]
    assert tags == {
        f"aws:RequestTag/kubernetes.io/cluster/{CLUSTER}": "owned",
        "aws:RequestTag/eks:eks-cluster-name": CLUSTER,
    }
    assert (
        by_sid["AllowAPIServerEndpointDiscovery"]["Resource"] == f"arn:aws:eks:us-east-1:123456789012:cluster/{CLUSTER}"
    )
    assert by_sid["AllowRegionalReadActions"]["Condition"] == {"StringEquals": {"aws:RequestedRegion": "us-east-1"}}


def test_pass_role_only_to_the_node_role_and_only_to_ec2() -> None:
    (st,) = [
        s for s in statements(iam.karpenter_controller_policies(context())) if "iam:PassRole" in as_list(s["Action"])
    ]
    assert st["Resource"] == NODE_ROLE_ARN
    assert st["Condition"] == {"StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]}}


def test_queue_actions_only_on_the_interruption_queue() -> None:
    sqs = [
        s
        for s in statements(iam.karpenter_controller_policies(context()))
        if any(a.startswith("sqs:") for a in as_list(s["Action"]))
    ]
    assert [s["Resource"] for s in sqs] == [QUEUE_ARN]
    assert set(sqs[0]["Action"]) == {"sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"}


def test_zonal_shift_statement_only_when_enabled_and_policies_fit_the_size_limit() -> None:
    assert iam.controller_policy_keys(False) == [
        "node-lifecycle",
        "iam-integration",
        "eks-integration",
        "interruption",
        "resource-discovery",
    ]
    assert "zonal-shift" in iam.karpenter_controller_policies(context(zonal_shift=True))
    for doc in iam.karpenter_controller_policies(context(zonal_shift=True)).values():
        # a customer-managed policy is capped at 6,144 characters (whitespace excluded)
        assert len(json.dumps(doc, separators=(",", ":"))) < 6144


def test_trust_policies() -> None:
    pod = iam.pod_identity_trust_policy(
        partition="aws", region="us-east-1", account_id="123456789012", cluster_name="gpuscale-prod",
    )["Statement"][0]
    assert pod["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert pod["Action"] == ["sts:AssumeRole", "sts:TagSession"]
    # only Pod Identity acting for this account's cluster: the cluster ARN session tag is the confused-deputy guard
    assert pod["Condition"] == {"StringEquals": {
        "aws:RequestTag/eks-cluster-arn": "arn:aws:eks:us-east-1:123456789012:cluster/gpuscale-prod",
    }}
    scoped = iam.pod_identity_trust_policy(
        partition="aws-cn", region="cn-north-1", account_id="1", cluster_name="c", namespace="kube-system",
        service_account="karpenter",
    )["Statement"][0]["Condition"]
    assert scoped == {"StringEquals": {
        "aws:RequestTag/eks-cluster-arn": "arn:aws-cn:eks:cn-north-1:1:cluster/c",
        "aws:RequestTag/kubernetes-namespace": "kube-system", "aws:RequestTag/kubernetes-service-account": "karpenter",
    }}
    # every key required is one EKS Pod Identity documents sending: aws:SourceAccount/SourceArn are not (item 11)
    for cond in (pod["Condition"], scoped):
        for op, keys in cond.items():
            assert op == "StringEquals"
            assert {k.removeprefix("aws:RequestTag/") for k in keys} <= iam.POD_IDENTITY_SESSION_TAGS
    node = iam.node_role_trust_policy()["Statement"][0]
    assert node["Principal"] == {"Service": "ec2.amazonaws.com"} and node["Action"] == ["sts:AssumeRole"]
    assert iam.node_role_trust_policy("amazonaws.com.cn")["Statement"][0]["Principal"] == {
        "Service": "ec2.amazonaws.com.cn"
    }
    assert iam.cluster_role_trust_policy()["Statement"][0]["Principal"] == {"Service": "eks.amazonaws.com"}


def test_secrets_encryption_policy_is_limited_to_the_key() -> None:
    (st,) = iam.secrets_encryption_policy("arn:aws:kms:us-east-1:1:key/k")["Statement"]
    assert st["Resource"] == "arn:aws:kms:us-east-1:1:key/k"
    assert not any(a in ("kms:*", "kms:CreateGrant") for a in st["Action"])


def test_queue_policy_allows_eventbridge_and_denies_plain_http() -> None:
    allow, deny = iam.interruption_queue_policy(QUEUE_ARN)["Statement"]
    assert allow["Effect"] == "Allow" and allow["Action"] == "sqs:SendMessage" and allow["Resource"] == QUEUE_ARN
    assert allow["Principal"] == {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]}
    assert deny["Effect"] == "Deny" and deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_event_patterns_cover_every_interruption_karpenter_handles() -> None:
    patterns = iam.interruption_event_patterns()
    assert {p["detail-type"][0] for p in patterns.values()} == {
        "AWS Health Event",
        "EC2 Spot Instance Interruption Warning",
        "EC2 Instance Rebalance Recommendation",
        "EC2 Instance State-change Notification",
        "EC2 Capacity Reservation Instance Interruption Warning",
    }
    assert patterns["scheduled-change"]["source"] == ["aws.health"]
    assert all(p["source"] == ["aws.ec2"] for k, p in patterns.items() if k != "scheduled-change")


def test_managed_policy_arns_follow_the_partition() -> None:
    assert (
        iam.managed_policy_arn("aws-cn", "AmazonEKSWorkerNodePolicy")
        == "arn:aws-cn:iam::aws:policy/AmazonEKSWorkerNodePolicy"
    )
    assert iam.eks_access_policy_arn("aws", "AmazonEKSClusterAdminPolicy") == (
        "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
    )
