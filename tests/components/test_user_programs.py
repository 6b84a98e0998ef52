"""Pulumi users' programs (issue 23), each written as a user would from the README and the docstrings, run under
the recording mock monitor: what reaches the engine, and what is refused with which message."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
import pytest
from pydantic import ValidationError

import gpuscale.components as components
from gpuscale.components import (
    AlertRules,
    AlertRulesArgs,
    Dashboards,
    DashboardsArgs,
    FrontDoorArgs,
    GpuNodePool,
    GpuNodePoolArgs,
    InferencePlatform,
    InferencePlatformArgs,
    ModelOnCluster,
    ModelOnClusterArgs,
    NameClash,
    QueueTree,
    QueueTreeArgs,
    Refused,
    RoleAutoscaler,
    RoleAutoscalerArgs,
    UnknownName,
    VllmService,
    VllmServiceArgs,
)
from gpuscale.feasibility import checked_sizing
from gpuscale.sizing import size_platform
from gpuscale.spec.platform import PlatformSpec
from gpuscale.spec.teams import QueueSpec
from gpuscale.spec.topology import GpuNodePoolSpec
from tests.components.support import Records, named, one, run, stand_in
from tests.conftest import REPO
from tests.specs import environment, small_raw, small_spec

# --- 1. opts.depends_on reaches every child -------------------------------------------------------------------------

def test_depends_on_reaches_an_efa_pools_placement_group() -> None:
    def program() -> None:
        chart = stand_in("karpenter-chart")
        GpuNodePool("h100", GpuNodePoolArgs(
            pool=GpuNodePoolSpec(name="h100", instance_types=["p5.48xlarge"], gpu_limit=16, efa=True,
                                 root_volume_gib=500),
            cluster_name="team-a", node_role_name="KarpenterNodeRole-team-a", zones=["us-east-1a"],
        ), opts=pulumi.ResourceOptions(depends_on=[chart]))

    records = run(program)
    group = one(records, "aws:ec2/placementGroup:PlacementGroup")
    assert named(records, "karpenter-chart").urn in group.dependencies


# --- 3. a name that is an Output is claimed too ---------------------------------------------------------------------

def test_two_services_for_one_model_in_an_output_namespace_are_refused() -> None:
    spec = small_spec()
    sizing = size_platform(spec)

    def program() -> None:
        ns = k8s.core.v1.Namespace("llm", metadata={"name": "team-a-llm"})
        for name in ("llama", "llama-again"):
            VllmService(name, VllmServiceArgs.from_platform(spec, sizing, "m8b", namespace=ns.metadata.name))

    with pytest.raises(NameClash, match=r"VllmService 'llama-again' would create workload team-a-llm/m8b-aggregated, "
                                        r"which VllmService 'llama' already creates"):
        run(program)


def test_the_same_model_in_two_output_namespaces_is_fine() -> None:
    spec = small_spec()
    sizing = size_platform(spec)

    def program() -> None:
        for ns_name in ("team-a-llm", "team-b-llm"):
            ns = k8s.core.v1.Namespace(ns_name, metadata={"name": ns_name})
            VllmService(ns_name, VllmServiceArgs.from_platform(spec, sizing, "m8b", namespace=ns.metadata.name))

    records = run(program)
    assert {r.inputs["metadata"]["namespace"] for r in records if r.type == "kubernetes:apps/v1:Deployment"} == {
        "team-a-llm", "team-b-llm"}


# --- 5. every public component takes (name, args, opts=None) --------------------------------------------------------

def every_component() -> list[type[pulumi.ComponentResource]]:
    """Every ComponentResource defined in gpuscale.components, exported or not."""
    found = []
    for info in pkgutil.iter_modules(components.__path__):
        module = importlib.import_module(f"gpuscale.components.{info.name}")
        found += [c for _, c in inspect.getmembers(module, inspect.isclass)
                  if issubclass(c, pulumi.ComponentResource) and c.__module__ == module.__name__]
    return found


def test_every_component_takes_name_args_opts() -> None:
    exported = {getattr(components, n) for n in components.__all__}
    assert {c for c in every_component() if c.__name__ != "EfaDevicePlugin"} <= exported  # public unless internal
    assert len(every_component()) >= 18
    for component in every_component():
        params = list(inspect.signature(component.__init__).parameters.values())[1:]
        shape = [(p.name, p.kind, p.default) for p in params]
        assert shape == [
            ("name", inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.empty),
            ("args", inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.empty),
            ("opts", inspect.Parameter.POSITIONAL_OR_KEYWORD, None),
        ], component.__name__


def test_the_readmes_positional_form_builds_a_device_plugin() -> None:
    def program() -> None:
        components.NvidiaDevicePlugin("nvidia", components.NvidiaDevicePluginArgs(),
                                      pulumi.ResourceOptions(provider=k8s.Provider("c", kubeconfig="{}")))

    assert one(run(program), "gpuscale:index:NvidiaDevicePlugin")


# --- 2. a Kubernetes provider given to InferencePlatform is refused, not dropped -----------------------------------

def test_a_kubernetes_provider_given_to_the_platform_is_refused_with_the_reason() -> None:
    def program() -> None:
        mine = k8s.Provider("existing", kubeconfig="{}")
        InferencePlatform("p", InferencePlatformArgs(spec=small_spec()), opts=pulumi.ResourceOptions(providers=[mine]))

    with pytest.raises(Refused, match=r"a Kubernetes provider in opts cannot be used: the platform creates the EKS "
                                      r"cluster") as info:
        run(program)
    assert isinstance(info.value, pulumi.RunError)  # pulumi up prints the message alone


def test_an_aws_provider_alone_is_used() -> None:
    def program() -> None:
        mine = aws.Provider("mine", region="us-east-1")
        InferencePlatform("p", InferencePlatformArgs(spec=small_spec()), opts=pulumi.ResourceOptions(providers=[mine]))

    records = run(program)
    assert [r.name for r in records if r.type == "pulumi:providers:aws"] == ["mine"]


# --- 4. one cluster name twice, each platform with the provider gpuscale creates -----------------------------------

def test_two_platforms_with_one_cluster_name_are_refused_with_their_own_providers() -> None:
    def program() -> None:
        InferencePlatform("a", InferencePlatformArgs(spec=small_spec(), cluster_name="inference"))
        InferencePlatform("b", InferencePlatformArgs(spec=small_spec(), cluster_name="inference"))

    with pytest.raises(NameClash, match=r"EksCluster 'b-cluster' would create EKS cluster inference, which EksCluster "
                                        r"'a-cluster' already creates through a provider of aws for the same region "
                                        r"us-east-1, profile \(default\)"):
        run(program)


def test_one_cluster_name_in_two_regions_or_accounts_is_fine() -> None:
    def program() -> None:
        InferencePlatform("a", InferencePlatformArgs(spec=small_spec(), cluster_name="inference"))
        InferencePlatform("b", InferencePlatformArgs(spec=small_spec(), cluster_name="inference", aws_profile="other"))
        eu = small_spec(environment=environment(region="eu-west-1"), topology={
            "zones": ["eu-west-1a"], "gpu_pools": [{"name": "l40s", "instance_types": ["g6e.xlarge"], "gpu_limit": 16}]})
        InferencePlatform("c", InferencePlatformArgs(spec=eu, cluster_name="inference"))

    clusters = [r for r in run(program) if r.type == "aws:eks/cluster:Cluster"]
    assert [c.inputs["name"] for c in clusters] == ["inference"] * 3


# --- 6. a typo in a name given to from_platform / from_spec --------------------------------------------------------

def test_a_typo_in_a_model_role_or_pool_name_is_refused_with_the_valid_names() -> None:
    spec = small_spec()
    sizing = size_platform(spec)
    with pytest.raises(UnknownName, match=r"gpuscale:models\[\]\.name: no model 'm8'; the spec defines 'm8b'"):
        VllmServiceArgs.from_platform(spec, sizing, "m8")
    with pytest.raises(UnknownName, match=r"no model 'm8'; the spec defines 'm8b'"):
        FrontDoorArgs.from_platform(spec, sizing, "m8")
    with pytest.raises(UnknownName, match=r"gpuscale:models\[0\]\.serving\.mode: no role of 'm8b' \(serving\.mode "
                                          r"aggregated\) 'decode'; the spec defines 'aggregated'"):
        RoleAutoscalerArgs.from_platform(spec, sizing, "m8b", "decode")
    with pytest.raises(UnknownName, match=r"gpuscale:topology\.gpu_pools\[\]\.name: no GPU pool 'l40'; the spec "
                                          r"defines 'l40s'"):
        GpuNodePoolArgs.from_spec(spec, "l40", cluster_name="team-a", node_role_name="r")


# --- 7. checks of what a program does not create do not run for the pieces it uses ----------------------------------

def test_one_model_on_an_existing_cluster_is_not_refused_for_a_private_endpoint() -> None:
    env = {**environment(), "endpoint_public_access": False, "public_access_cidrs": []}
    spec = PlatformSpec.model_validate(small_raw(environment=env))  # nothing here creates a VPC or a cluster
    sizing = checked_sizing(spec)

    def program() -> None:
        on_cluster = pulumi.ResourceOptions(provider=k8s.Provider("existing", context="team-a"))
        VllmService("llama", VllmServiceArgs.from_platform(spec, sizing, "m8b", cluster_name="team-a"), opts=on_cluster)

    assert one(run(program), "gpuscale:index:VllmService")

    with pytest.raises(Refused) as info:  # the platform creates both: refused, with the full YAML path
        run(lambda: InferencePlatform("p", InferencePlatformArgs(spec=spec)))
    assert info.value.lines()[0].startswith("gpuscale:environment.endpoint_public_access: the EKS endpoint would be "
                                            "private-only")


# --- 8. no silent Prometheus URL ------------------------------------------------------------------------------------

def test_an_autoscaler_on_an_existing_cluster_needs_the_prometheus_url() -> None:
    spec = small_spec()  # observability left out, as on a cluster gpuscale did not build
    sizing = size_platform(spec)
    with pytest.raises(Refused, match=r"gpuscale:observability\.prometheus_url: no Prometheus URL: the default is the "
                                      r"kube-prometheus-stack an InferencePlatform installs"):
        RoleAutoscalerArgs.from_platform(spec, sizing, "m8b", "aggregated")
    given = RoleAutoscalerArgs.from_platform(spec, sizing, "m8b", "aggregated", prometheus_url="http://prom.obs:9090")
    assert given.prometheus_url == "http://prom.obs:9090"
    in_spec = small_spec(observability={"prometheus_url": "http://prom.obs:9090"})
    assert RoleAutoscalerArgs.from_platform(in_spec, size_platform(in_spec), "m8b", "aggregated").autoscaler \
        .prometheus_url == "http://prom.obs:9090"


def test_a_stack_without_gpuscales_prometheus_must_name_its_own() -> None:
    with pytest.raises(ValidationError, match=r"install_prometheus_stack is false, so the default URL"):
        small_spec(observability={"install_prometheus_stack": False})


# --- 9. a team's queue under a department another stack created ----------------------------------------------------

def test_a_team_queue_goes_under_an_existing_department_queue() -> None:
    team = QueueSpec(name="team-b", gpu_quota=4, gpu_limit=8)

    def program() -> None:
        department = pulumi.Output.from_input("research")  # as StackReference("acme/platform/prod") would hand it
        QueueTree("team-b", QueueTreeArgs(teams=[team], parent_queue=department))
        QueueTree("team-c", QueueTreeArgs(teams=[team.model_copy(update={"name": "team-c"})], parent_queue="research"))

    queues = {r.name: r.inputs["spec"] for r in run(program) if r.type == "kubernetes:scheduling.run.ai/v2:Queue"}
    assert queues["team-b-team-b"]["parentQueue"] == queues["team-c-team-c"]["parentQueue"] == "research"
    assert queues["team-b-team-b"]["resources"]["gpu"]["quota"] == 4
    with pytest.raises(ValidationError, match="parent_queue"):
        QueueTreeArgs(teams=[team], parent_queue="Research Dept")


# --- 10. the short form: one model on an existing cluster -----------------------------------------------------------

def example_call() -> ast.Call:
    """The ``ModelOnClusterArgs(...)`` call of ``examples/add_model.py``, the shipped short form."""
    tree = ast.parse((REPO / "examples" / "add_model.py").read_text())
    (call,) = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "ModelOnClusterArgs"]
    return call


def example_argument(name: str) -> ast.expr:
    (value,) = [k.value for k in example_call().keywords if k.arg == name]
    return value


SHORT_MODEL: dict[str, Any] = ast.literal_eval(example_argument("model"))
POOL = GpuNodePoolSpec(name="l40s", instance_types=["g6e.xlarge", "g6e.2xlarge"], gpu_limit=8)
TEAM = QueueSpec(name="team-b", gpu_quota=4, gpu_limit=8)
LONG_SPEC: dict[str, Any] = {  # what examples/add_model.py said before the short form
    "environment": {"name": "team-b", "stage": "dev", "aws_region": "eu-west-1", "endpoint_public_access": True,
                    "public_access_cidrs": ["203.0.113.0/24"]},
    "topology": {"zones": ["eu-west-1a", "eu-west-1b"],
                 "gpu_pools": [{"name": "l40s", "instance_types": ["g6e.xlarge", "g6e.2xlarge"], "gpu_limit": 8}]},
    "teams": [{"name": "team-b", "gpu_quota": 4, "gpu_limit": 8}],
    "models": [{**SHORT_MODEL, "queue": "team-b", "node_pool": "l40s"}],
}


def values(data: object) -> int:
    """Values a user types: every scalar (a list's items each count)."""
    if isinstance(data, dict):
        return sum(values(v) for v in data.values())
    if isinstance(data, list):
        return sum(values(v) for v in data)
    return 1


def short_form(**extra: Any) -> ModelOnClusterArgs:
    return ModelOnClusterArgs(model=SHORT_MODEL, pool=POOL, team=TEAM, aws_region="eu-west-1",
                              prometheus_url="http://prometheus.monitoring.svc:9090", **extra)


def test_the_short_form_emits_what_the_long_form_did_from_fewer_values() -> None:
    on_cluster = {"namespace": "team-b-llm", "cluster_name": "team-b"}

    def short() -> None:
        ModelOnCluster("llama-8b", short_form(**on_cluster))

    def long() -> None:
        spec = PlatformSpec.model_validate(LONG_SPEC)
        sizing = checked_sizing(spec)
        queues = QueueTree("llama-8b-queue", QueueTreeArgs.from_spec(spec))
        service = VllmService("llama-8b", VllmServiceArgs.from_platform(spec, sizing, "llama-8b", **on_cluster),
                              opts=pulumi.ResourceOptions(depends_on=[queues]))
        RoleAutoscaler("llama-8b-aggregated", RoleAutoscalerArgs.from_platform(
            spec, sizing, "llama-8b", "aggregated", namespace="team-b-llm",
            prometheus_url="http://prometheus.monitoring.svc:9090"), opts=pulumi.ResourceOptions(depends_on=[service]))
        AlertRules("llama-8b-alerts", AlertRulesArgs.for_model(spec, sizing, "llama-8b", namespace="team-b-llm"),
                   opts=pulumi.ResourceOptions(depends_on=[service]))
        Dashboards("llama-8b-dashboards", DashboardsArgs.for_model(spec, sizing, "llama-8b", namespace="team-b-llm"))

    def objects(records: Records) -> dict[tuple[str, str], Any]:
        return {(r.type, r.name): r.inputs for r in records if r.custom}

    assert objects(run(short)) == objects(run(long))
    long_values = values(LONG_SPEC) + 5  # + model name x2, namespace, cluster name, Prometheus URL in the calls
    # the example as shipped: the model, the pool's and the team's fields, and the other required arguments
    nested = {"model", "pool", "team"}
    required = [str(k.arg) for k in example_call().keywords if k.arg not in nested and k.arg != "parent_queue"]
    pool, team = (example_argument(n) for n in ("pool", "team"))
    assert isinstance(pool, ast.Call) and isinstance(team, ast.Call)
    short_values = (values(SHORT_MODEL) + sum(values(ast.literal_eval(k.value)) for k in [*pool.keywords, *team.keywords])
                    + len(required))
    assert sorted(required) == ["aws_region", "cluster_name", "namespace", "prometheus_url"]
    assert GpuNodePoolSpec.model_validate({str(k.arg): ast.literal_eval(k.value) for k in pool.keywords}) == POOL
    assert QueueSpec.model_validate({str(k.arg): ast.literal_eval(k.value) for k in team.keywords}) == TEAM
    assert (long_values, short_values) == (40, 30)


def test_the_short_form_refuses_at_its_own_paths() -> None:
    slow = {**SHORT_MODEL, "slo": {**SHORT_MODEL["slo"], "ttft_p99_s": -1}}
    with pytest.raises(Refused, match=r"ModelOnClusterArgs\.model\.slo\.ttft_p99_s: "):
        ModelOnCluster("m", ModelOnClusterArgs(model=slow, pool=POOL, team=TEAM, aws_region="eu-west-1",
                                               prometheus_url="http://p:9090"))
    with pytest.raises(Refused, match=r"ModelOnClusterArgs\.model\.queue: leave it out, it is team\.name"):
        ModelOnCluster("m", ModelOnClusterArgs(model={**SHORT_MODEL, "queue": "other"}, pool=POOL, team=TEAM,
                                               aws_region="eu-west-1", prometheus_url="http://p:9090"))
    tiny = TEAM.model_copy(update={"gpu_quota": 4, "gpu_limit": 1})
    with pytest.raises(Refused, match=r"ModelOnClusterArgs\.team"):
        ModelOnCluster("m", short_form().model_copy(update={"team": tiny}))


def test_the_short_form_takes_a_model_deployment_that_names_the_team_and_pool() -> None:
    spec = PlatformSpec.model_validate(LONG_SPEC)
    args = short_form().model_copy(update={"model": spec.models[0]})
    assert args.platform_spec().models[0] == spec.models[0]
    elsewhere = spec.models[0].model_copy(update={"node_pool": "h100"})
    with pytest.raises(Refused, match=r"ModelOnClusterArgs\.model\.node_pool: leave it out, it is pool\.name"):
        short_form().model_copy(update={"model": elsewhere}).platform_spec()
