"""InferencePlatform from small specs under mocks: composition, the caller's providers, names, dependencies, refusals."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pulumi
import pulumi_aws as aws
import pytest

from gpuscale.components import InferencePlatform, InferencePlatformArgs
from gpuscale.components.inference_platform import AwsAssumeRole
from gpuscale.problems import Problems
from gpuscale.spec.platform import PlatformSpec
from gpuscale.stackfile import validate_config
from tests.components.support import Records, ancestors, named, of_type, one, run, stack_config, stand_in
from tests.specs import environment, pd_raw, pd_spec, small_spec

SECRET_SIG = "4dabf18193072939515e22adb298388d"
ROLE = "arn:aws:iam::123456789012:role/deployer"


def build(spec: PlatformSpec, name: str = "p", opts: pulumi.ResourceOptions | None = None) -> Records:
    return run(lambda: InferencePlatform(name, InferencePlatformArgs(spec=spec), opts=opts))


@pytest.fixture(scope="module")
def pd_run() -> tuple[Records, dict[str, Any]]:
    outputs: dict[str, Any] = {}

    def program() -> None:
        p = InferencePlatform("p", InferencePlatformArgs(spec=pd_spec()))
        p.model_endpoints.apply(lambda v: outputs.__setitem__("endpoints", v))
        pulumi.CustomResource("test:index:Consumer", "reads-endpoints", {"value": p.model_endpoints})

    return run(program), outputs


@pytest.fixture(scope="module")
def pd_records(pd_run: tuple[Records, dict[str, Any]]) -> Records:
    return pd_run[0]


def test_every_layer_is_composed(pd_records: Records) -> None:
    types = Counter(r.type for r in pd_records)
    assert types["gpuscale:index:InferencePlatform"] == 1
    assert types["kubernetes:karpenter.sh/v1:NodePool"] == 2  # the GPU pool + the CPU pool
    assert types["kubernetes:scheduling.run.ai/v2:Queue"] == 3  # dept, chat, batch
    assert types["kubernetes:kai.scheduler/v1alpha1:Topology"] == 1
    assert types["gpuscale:index:VllmService"] == 1 and types["gpuscale:index:PdRouter"] == 1
    assert types["gpuscale:index:RoleAutoscaler"] == 2
    assert one(pd_records, "aws:eks/cluster:Cluster").inputs["name"] == "p-t"  # <component>-<environment>


def test_every_child_is_parented_under_the_platform(pd_records: Records) -> None:
    platform = one(pd_records, "gpuscale:index:InferencePlatform")
    orphans = [r.name for r in pd_records if r is not platform and r.type != "test:index:Consumer"
               and platform.urn not in ancestors(pd_records, r)]
    assert orphans == []


def test_custom_resources_wait_for_their_charts_and_namespaces(pd_records: Records) -> None:
    charts = {r.name: r.urn for r in of_type(pd_records, "kubernetes:helm.sh/v4:Chart")}
    waits = {
        "kubernetes:karpenter.sh/v1:NodePool": charts["p-karpenter-chart"],
        "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass": charts["p-karpenter-chart"],
        "kubernetes:scheduling.run.ai/v2:Queue": charts["p-kai-chart"],
        "kubernetes:kai.scheduler/v1alpha1:Topology": charts["p-kai-chart"],
        "kubernetes:keda.sh/v1alpha1:ScaledObject": charts["p-keda-chart"],
        "kubernetes:monitoring.coreos.com/v1:PodMonitor": charts["p-prometheus-chart"],
        "kubernetes:apps/v1:Deployment": charts["p-kai-chart"],
    }
    for typ, chart in waits.items():
        records = of_type(pd_records, typ)
        assert records and all(chart in r.dependencies for r in records), typ  # the object itself, not its parent
    ns = named(pd_records, "p-ns-inference").urn
    assert all(ns in r.dependencies for r in of_type(pd_records, "kubernetes:apps/v1:Deployment"))
    topology = one(pd_records, "kubernetes:kai.scheduler/v1alpha1:Topology")
    assert topology.urn in one(pd_records, "kubernetes:apps/v1:Deployment", "p-m70b-decode").dependencies


def test_keda_triggers_read_the_installed_prometheus_and_wait_for_it(pd_records: Records) -> None:
    prometheus = named(pd_records, "p-prometheus-chart").urn
    for so in of_type(pd_records, "kubernetes:keda.sh/v1alpha1:ScaledObject"):
        assert prometheus in so.dependencies
        assert so.inputs["spec"]["triggers"][0]["metadata"]["serverAddress"] == pd_spec().observability.prometheus_url


def test_gpuscale_creates_an_aws_provider_only_when_the_caller_brings_none(pd_records: Records) -> None:
    provider = one(pd_records, "pulumi:providers:aws")
    assert provider.name == "p-aws" and provider.inputs["region"] == "us-east-1"
    assert json.loads(provider.inputs["defaultTags"])["tags"]["gpuscale.io/environment"] == "t"
    assert "profile" not in provider.inputs and "assumeRoles" not in provider.inputs

    def program() -> None:
        mine = aws.Provider("mine", region="us-east-1", assume_roles=[aws.ProviderAssumeRoleArgs(role_arn=ROLE)])
        InferencePlatform("p", InferencePlatformArgs(spec=small_spec()), opts=pulumi.ResourceOptions(providers=[mine]))

    records = run(program)
    (only,) = of_type(records, "pulumi:providers:aws")
    assert only.name == "mine"
    aws_resources = [r for r in records if r.type.startswith("aws:")]
    assert aws_resources and all(r.provider.startswith(only.urn) for r in aws_resources)


def test_its_own_provider_and_the_kubeconfig_carry_the_given_profile_and_roles() -> None:
    roles = [AwsAssumeRole(role_arn="arn:aws:iam::123456789012:role/hop", session_name="ci"), AwsAssumeRole(role_arn=ROLE)]
    with stack_config({"aws:profile": "from-config"}):  # components read no config: the program passes it in
        records = run(lambda: InferencePlatform("p", InferencePlatformArgs(
            spec=small_spec(), aws_profile="ops", aws_assume_roles=roles)))
    provider = one(records, "pulumi:providers:aws")
    assert provider.inputs["profile"] == "ops"
    assert json.loads(provider.inputs["assumeRoles"]) == [
        {"roleArn": "arn:aws:iam::123456789012:role/hop", "sessionName": "ci"}, {"roleArn": ROLE}]
    k8s_provider = one(records, "pulumi:providers:kubernetes")
    exec_config = json.loads(k8s_provider.inputs["kubeconfig"]["value"])["users"][0]["user"]["exec"]
    assert exec_config["args"][-2:] == ["--role-arn", ROLE]  # the last role is the one that deploys
    assert exec_config["env"] == [{"name": "AWS_PROFILE", "value": "ops"}]


def test_two_platforms_from_one_spec_share_no_physical_name() -> None:
    spec = small_spec()

    def program() -> None:
        InferencePlatform("a", InferencePlatformArgs(spec=spec))
        InferencePlatform("b", InferencePlatformArgs(spec=spec))

    records = run(program)
    aws_names = [(r.type, r.inputs["name"]) for r in records if r.type.startswith("aws:") and "name" in r.inputs]
    assert sorted(aws_names) == [("aws:eks/cluster:Cluster", "a-t"), ("aws:eks/cluster:Cluster", "b-t"),
                                 ("aws:kms/alias:Alias", "alias/a-t-secrets"), ("aws:kms/alias:Alias", "alias/b-t-secrets")]
    roles = of_type(records, "aws:iam/role:Role")
    assert roles and all("name" not in r.inputs for r in roles)  # auto-named: unique in the account
    assert one(records, "aws:eks/cluster:Cluster", "b-cluster-cluster").inputs["name"] == "b-t"


def test_opts_depends_on_reaches_the_cluster_and_the_name_can_be_chosen() -> None:
    def program() -> None:
        first = stand_in("network-ready")
        InferencePlatform("p", InferencePlatformArgs(spec=small_spec(), cluster_name="inference-eu"),
                          opts=pulumi.ResourceOptions(depends_on=[first]))

    records = run(program)
    cluster = one(records, "aws:eks/cluster:Cluster")
    assert cluster.inputs["name"] == "inference-eu"
    assert named(records, "network-ready").urn in cluster.dependencies
    assert named(records, "network-ready").urn in one(records, "aws:ec2/vpc:Vpc").dependencies


def test_existing_subnets_are_given_to_the_node_pools_by_id() -> None:
    env = {**environment(), "networking": {"vpc_id": "vpc-0a", "private_subnet_ids": ["subnet-0a", "subnet-0b"]}}
    records = build(small_spec(environment=env))
    assert not of_type(records, "aws:ec2/vpc:Vpc")
    for nc in of_type(records, "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"):
        assert nc.inputs["spec"]["subnetSelectorTerms"] == [{"id": "subnet-0a"}, {"id": "subnet-0b"}]
        assert nc.inputs["spec"]["securityGroupSelectorTerms"] == [{"tags": {"karpenter.sh/discovery": "p-t"}}]


def test_a_controllers_namespace_is_refused_with_its_path() -> None:
    raw = pd_raw()
    raw["models"][0]["serving"]["namespace"] = "kai-scheduler"
    spec = PlatformSpec.model_validate(raw)  # structurally fine ...
    with pytest.raises(Problems) as info:
        build(spec)  # ... but the pods would run among KAI's own
    (line,) = info.value.lines()
    assert line.startswith("gpuscale:models[0].serving.namespace: namespace 'kai-scheduler' belongs to Kubernetes")


def test_cross_layer_refusal_names_the_numbers_and_the_path() -> None:
    raw = pd_raw()
    raw["models"][0]["autoscaling"]["decode"]["max_replicas"] = 40
    spec = PlatformSpec.model_validate(raw)  # each section alone is fine ...
    with pytest.raises(Problems) as info:
        build(spec)  # ... but the serving layer asks for more than the queue and the pool can give
    at = "gpuscale:models[0].autoscaling.decode.max_replicas: "
    problems = info.value.lines()
    # summed over both roles sharing the pool (and chat's quota), naming the bound
    assert any(p.startswith(at + "max_replicas m70b/prefill 4 x 2 + m70b/decode 40 x 2 = 88 GPUs exceed node pool h100 "
                            "gpu_limit 64; Karpenter stops launching") for p in problems)
    with pytest.raises(Problems) as loaded:  # the stack-file loader (CLI and pulumi up alike) refuses the same
        validate_config(raw, "t")
    assert loaded.value.lines() == problems


def test_model_endpoints_come_from_the_services(pd_run: tuple[Records, dict[str, Any]]) -> None:
    records, outputs = pd_run
    assert outputs["endpoints"] == {"m70b": "http://m70b.inference.svc.cluster.local:8000"}
    assert named(records, "p-m70b-router-service").urn in named(records, "reads-endpoints").dependencies
