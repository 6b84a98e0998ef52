"""KarpenterController under Pulumi mocks: roles, Pod Identity, interruption queue and rules, the chart."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
import pytest

from gpuscale import versions
from gpuscale.components import NameClash
from gpuscale.components.karpenter_controller import KarpenterController, KarpenterControllerArgs
from gpuscale.manifests import iam
from gpuscale.synth.mocks import RecordedResource
from tests.components.support import named as named_in
from tests.components.support import run
from tests.specs import environment, small_spec

Run = Callable[..., list[RecordedResource]]
CLUSTER = "team-a"
TAGS = {"team": "ml-platform", "cost-center": "inference-prod"}
CHART = "kubernetes:helm.sh/v4:Chart"
OUTPUTS = (
    "node_role_name",
    "node_role_arn",
    "controller_role_arn",
    "interruption_queue_name",
    "interruption_queue_arn",
)


def build(run_pulumi: Run, args: KarpenterControllerArgs) -> tuple[list[RecordedResource], dict[str, Any]]:
    outputs: dict[str, Any] = {}

    def program() -> None:
        k = KarpenterController("karpenter", args)
        for attr in OUTPUTS:
            getattr(k, attr).apply(lambda v, attr=attr: outputs.__setitem__(attr, v))
        outputs["chart_type"] = type(k.chart).__name__

    return run_pulumi(program), outputs


def of_type(records: list[RecordedResource], typ: str) -> list[RecordedResource]:
    return [r for r in records if r.type == typ]


def named(records: list[RecordedResource], name: str) -> RecordedResource:
    (r,) = [r for r in records if r.name == name]
    return r


@pytest.fixture
def built(run_pulumi: Run) -> tuple[list[RecordedResource], dict[str, Any]]:
    spec = small_spec(environment={**environment(), "tags": TAGS})
    return build(run_pulumi, KarpenterControllerArgs.from_spec(spec, cluster_name=CLUSTER))


def test_node_role_trusts_ec2_has_the_four_policies_and_an_ec2_linux_access_entry(
    built: tuple[list[RecordedResource], dict[str, Any]],
) -> None:
    records, outputs = built
    role = named(records, "karpenter-node-role")
    assert "name" not in role.inputs  # auto-named: two installations in one account never collide
    assert outputs["node_role_name"] == "karpenter-node-role"  # the mocks name it after the logical name
    assert json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]["Principal"] == {"Service": "ec2.amazonaws.com"}
    attached = {
        r.inputs["policyArn"].rsplit("/", 1)[-1]
        for r in of_type(records, "aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if r.inputs["role"] == outputs["node_role_name"]
    }
    assert attached == set(iam.KARPENTER_NODE_MANAGED_POLICIES)
    (entry,) = of_type(records, "aws:eks/accessEntry:AccessEntry")
    assert entry.inputs["type"] == "EC2_LINUX"
    assert entry.inputs["principalArn"] == outputs["node_role_arn"]
    assert entry.inputs["clusterName"] == CLUSTER
    assert "kubernetesGroups" not in entry.inputs


def test_controller_role_is_bound_by_pod_identity_to_the_chart_service_account(
    built: tuple[list[RecordedResource], dict[str, Any]],
) -> None:
    records, outputs = built
    role = named(records, "karpenter-controller-role")
    trust = json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]
    assert trust["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert trust["Action"] == ["sts:AssumeRole", "sts:TagSession"]
    # only on behalf of this account's cluster, for Karpenter's own service account
    equals = trust["Condition"]["StringEquals"]
    assert set(equals) == {"aws:RequestTag/eks-cluster-arn", "aws:RequestTag/kubernetes-namespace",
                           "aws:RequestTag/kubernetes-service-account"}
    assert equals["aws:RequestTag/eks-cluster-arn"].endswith(f":cluster/{CLUSTER}")
    assert equals["aws:RequestTag/kubernetes-service-account"] == "karpenter"
    assert set(trust["Condition"]) == {"StringEquals"}  # no key Pod Identity does not send
    (assoc,) = of_type(records, "aws:eks/podIdentityAssociation:PodIdentityAssociation")
    assert assoc.inputs["roleArn"] == outputs["controller_role_arn"]
    assert assoc.inputs["clusterName"] == CLUSTER
    (chart,) = of_type(records, CHART)
    assert assoc.inputs["serviceAccount"] == chart.inputs["values"]["serviceAccount"]["name"] == "karpenter"
    assert assoc.inputs["namespace"] == chart.inputs["namespace"] == "kube-system"


def test_controller_policies_are_least_privilege_and_wired_to_role_and_queue(
    built: tuple[list[RecordedResource], dict[str, Any]],
) -> None:
    records, outputs = built
    policies = {
        r.name.removeprefix("karpenter-"): json.loads(r.inputs["policy"])
        for r in of_type(records, "aws:iam/policy:Policy")
    }
    assert set(policies) == set(iam.controller_policy_keys(zonal_shift=False))
    for key, doc in policies.items():
        assert iam.unscoped_mutating_statements(doc, CLUSTER) == [], key
    statements = [st for doc in policies.values() for st in doc["Statement"]]
    (pass_role,) = [st for st in statements if st["Action"] == "iam:PassRole"]
    assert pass_role["Resource"] == outputs["node_role_arn"]
    (queue_access,) = [st for st in statements if st["Sid"] == "AllowInterruptionQueueActions"]
    assert queue_access["Resource"] == outputs["interruption_queue_arn"]
    attached = {
        r.inputs["policyArn"]
        for r in of_type(records, "aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if r.inputs["role"] == "karpenter-controller-role"
    }
    assert len(attached) == len(policies)


def test_interruption_queue_and_its_rules(built: tuple[list[RecordedResource], dict[str, Any]]) -> None:
    records, outputs = built
    (queue,) = of_type(records, "aws:sqs/queue:Queue")
    assert "name" not in queue.inputs and outputs["interruption_queue_name"] == "karpenter-queue"
    assert queue.inputs["messageRetentionSeconds"] == 300
    assert queue.inputs["sqsManagedSseEnabled"] is True
    (policy,) = of_type(records, "aws:sqs/queuePolicy:QueuePolicy")
    doc = json.loads(policy.inputs["policy"])
    assert {st["Resource"] for st in doc["Statement"]} == {outputs["interruption_queue_arn"]}
    assert any(st["Sid"] == "DenyHTTP" for st in doc["Statement"])
    rules = {r.name: r for r in of_type(records, "aws:cloudwatch/eventRule:EventRule")}
    targets = of_type(records, "aws:cloudwatch/eventTarget:EventTarget")
    assert {json.loads(r.inputs["eventPattern"])["detail-type"][0] for r in rules.values()} >= {
        "AWS Health Event",
        "EC2 Spot Instance Interruption Warning",
        "EC2 Instance Rebalance Recommendation",
        "EC2 Instance State-change Notification",
    }
    assert len(targets) == len(rules) == 5
    assert all(
        t.inputs["arn"] == outputs["interruption_queue_arn"] and t.inputs["targetId"] == iam.INTERRUPTION_TARGET_ID
        for t in targets
    )
    assert {t.inputs["rule"] for t in targets} == set(rules)  # mocks name a rule after its logical name


def test_chart_is_pinned_and_wired_to_the_cluster_and_queue(
    built: tuple[list[RecordedResource], dict[str, Any]],
) -> None:
    records, outputs = built
    (chart,) = of_type(records, CHART)
    assert chart.inputs["chart"] == versions.KARPENTER.chart == "oci://public.ecr.aws/karpenter/karpenter"
    assert chart.inputs["version"] == versions.KARPENTER.version == "1.14.1"
    assert chart.inputs["name"] == "karpenter"  # explicit release name, like every other chart
    settings = chart.inputs["values"]["settings"]
    assert settings["clusterName"] == CLUSTER
    assert settings["interruptionQueue"] == outputs["interruption_queue_name"]
    # the controller starts only once it can get credentials and its nodes can join
    assert named(records, "karpenter-pod-identity").urn in chart.dependencies
    assert named(records, "karpenter-node-access").urn in chart.dependencies
    assert outputs["chart_type"] == "Chart"


def test_children_are_parented_and_tagged(built: tuple[list[RecordedResource], dict[str, Any]]) -> None:
    records, _ = built
    (component,) = of_type(records, "gpuscale:index:KarpenterController")
    children = [r for r in records if r is not component]
    assert all(r.parent_urn == component.urn and r.name.startswith("karpenter-") for r in children)
    for r in children:
        if r.type in (
            "aws:iam/role:Role",
            "aws:iam/policy:Policy",
            "aws:sqs/queue:Queue",
            "aws:cloudwatch/eventRule:EventRule",
            "aws:eks/accessEntry:AccessEntry",
            "aws:eks/podIdentityAssociation:PodIdentityAssociation",
        ):
            assert r.inputs["tags"] == TAGS, r.name


def test_zonal_shift_adds_its_read_only_policy_and_setting(run_pulumi: Run) -> None:
    records, _ = build(run_pulumi, KarpenterControllerArgs(cluster_name=CLUSTER, zonal_shift=True))
    names = {r.name for r in of_type(records, "aws:iam/policy:Policy")}
    assert "karpenter-zonal-shift" in names
    (chart,) = of_type(records, CHART)
    assert chart.inputs["values"]["settings"]["enableZonalShift"] is True


def test_the_cluster_name_may_be_an_output_and_every_aws_name_is_unique_per_installation() -> None:
    """Two controllers (two clusters) in one account: the cluster name from a resource, no physical-name clash."""

    def program() -> None:
        for name in ("a", "b"):
            cluster = aws.eks.Cluster(f"cluster-{name}", name=f"team-{name}", role_arn="arn:aws:iam::123456789012:role/x",
                                      vpc_config=aws.eks.ClusterVpcConfigArgs(subnet_ids=["subnet-0a"]))
            on_cluster = pulumi.ResourceOptions(provider=k8s.Provider(f"k8s-{name}", kubeconfig="{}"))
            KarpenterController(f"karpenter-{name}", KarpenterControllerArgs(cluster_name=cluster.name), opts=on_cluster)

    records = run(program)
    chart = named_in(records, "karpenter-b-chart")
    assert chart.inputs["values"]["settings"]["clusterName"] == "team-b"
    assert named_in(records, "cluster-b").urn in chart.dependencies
    explicit = [r.inputs["name"] for r in records if r.type.startswith("aws:") and "name" in r.inputs
                and r.type != "aws:eks/cluster:Cluster"]
    assert explicit == []  # IAM roles, policies and queues are auto-named from unique logical names
    scoped = {json.loads(r.inputs["policy"])["Statement"][0]["Resource"] for r in records
              if r.type == "aws:iam/policy:Policy" and r.name.endswith("eks-integration")}
    assert scoped == {f"arn:aws:eks:us-east-1:123456789012:cluster/team-{n}" for n in "ab"}


def test_two_controllers_on_one_cluster_are_refused() -> None:
    def twice() -> None:
        KarpenterController("a", KarpenterControllerArgs(cluster_name=CLUSTER))
        KarpenterController("b", KarpenterControllerArgs(cluster_name=CLUSTER))

    with pytest.raises(NameClash, match="one Karpenter per cluster"):
        run(twice)
