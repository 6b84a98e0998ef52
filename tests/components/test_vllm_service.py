"""VllmService under Pulumi mocks, from small specs: per-role objects, the router, weights identity, Inputs, outputs."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
import pytest
from pydantic import ValidationError

from gpuscale import labels, versions
from gpuscale.components import NameClash, ServingSettings, VllmService, VllmServiceArgs
from gpuscale.manifests import router, vllm
from gpuscale.manifests.router import RouterSettings
from gpuscale.sizing import size_platform
from gpuscale.spec.platform import PlatformSpec
from tests.components.support import Records, capture, consumer, ints, named, of_type, one, run, stand_in
from tests.specs import model, pd_spec, small_spec

DEPLOYMENT = "kubernetes:apps/v1:Deployment"
OBJECT_TYPES = ("kubernetes:apps/v1:Deployment", "kubernetes:core/v1:Service", "kubernetes:policy/v1:PodDisruptionBudget",
                "kubernetes:monitoring.coreos.com/v1:PodMonitor", "kubernetes:core/v1:ServiceAccount",
                "kubernetes:rbac.authorization.k8s.io/v1:Role", "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding",
                "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet")


def build(spec: PlatformSpec, **inputs: Any) -> tuple[Records, dict[str, Any]]:
    sizing = size_platform(spec)
    outputs: dict[str, Any] = {}

    def program() -> None:
        crds = stand_in("crd-stand-in")
        for m in spec.models:
            svc = VllmService(m.name, VllmServiceArgs.from_platform(spec, sizing, m.name, **inputs),
                              opts=pulumi.ResourceOptions(depends_on=[crds]))
            capture(outputs, f"{m.name}.endpoint", svc.endpoint)
            capture(outputs, f"{m.name}.workloads", svc.workload_names)
            outputs[f"{m.name}.router"] = svc.router
            consumer(f"reads-{m.name}-endpoint", svc.endpoint)

    return run(program), outputs


def k8s_objects(records: Records) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r.inputs["kind"], r.inputs["metadata"]["name"]): ints(r.inputs) for r in records if r.type in OBJECT_TYPES}


def test_prefill_and_decode_are_separate_workloads_behind_the_router() -> None:
    spec = pd_spec()
    records, outputs = build(spec, cluster_name="team-a")
    component = one(records, "gpuscale:index:VllmService")
    deployments = {r.name: r for r in of_type(records, DEPLOYMENT) if r.parent_urn == component.urn}
    assert set(deployments) == {"m70b-prefill", "m70b-decode"}
    for role in ("prefill", "decode"):
        d = deployments[f"m70b-{role}"]
        assert d.inputs["spec"]["selector"]["matchLabels"] == {labels.MODEL_LABEL: "m70b", labels.ROLE_LABEL: role}
        assert "replicas" not in d.inputs["spec"]  # the role's autoscaler owns it
        pod = d.inputs["spec"]["template"]["spec"]
        assert pod["schedulerName"] == "kai-scheduler" and pod["tolerations"] == [vllm.gpu_toleration()]
    children = [r for r in records if r.parent_urn == component.urn]
    for suffix, typ in (("service", "core/v1:Service"), ("pdb", "policy/v1:PodDisruptionBudget"),
                        ("podmonitor", "monitoring.coreos.com/v1:PodMonitor")):
        assert {r.name for r in children if r.type == f"kubernetes:{typ}"} == {f"m70b-prefill-{suffix}", f"m70b-decode-{suffix}"}
    assert outputs["m70b.workloads"] == {"prefill": "m70b-prefill", "decode": "m70b-decode"}
    assert outputs["m70b.endpoint"] == "http://m70b.inference.svc.cluster.local:8000"
    router_component = one(records, "gpuscale:index:PdRouter")
    assert router_component.parent_urn == component.urn and outputs["m70b.router"] is not None
    # the endpoint is the router's Service: a consumer waits for it
    assert named(records, "m70b-router-service").urn in named(records, "reads-m70b-endpoint").dependencies


def test_emitted_objects_are_the_builders_bodies() -> None:
    for spec in (small_spec(), pd_spec()):
        records, _ = build(spec)
        sizing = size_platform(spec)
        expected: dict[tuple[str, str], dict[str, Any]] = {}
        for m in spec.models:
            s = ServingSettings.from_platform(spec, sizing, m.name)
            bodies = [vllm.service_account_body(s)] + [o for r in m.serving.roles for o in vllm.role_objects(s, r)]
            if m.serving.mode == "disaggregated":
                bodies += router.router_objects(RouterSettings.from_service(s))
            expected.update({(b["kind"], b["metadata"]["name"]): ints(b) for b in bodies})
        emitted = k8s_objects(records)
        assert emitted.keys() == expected.keys()
        for key, body in expected.items():
            assert {k: v for k, v in emitted[key].items() if k in body} == body, key


def test_a_namespace_output_reaches_every_object_and_carries_the_namespace() -> None:
    """The model's objects land in ``ns.metadata.name`` of the user's Namespace, and wait for it."""
    spec = pd_spec()
    sizing = size_platform(spec)
    outputs: dict[str, Any] = {}

    def program() -> None:
        ns = k8s.core.v1.Namespace("team-ns", metadata={"name": "team-llm"})
        svc = VllmService("m70b", VllmServiceArgs.from_platform(spec, sizing, "m70b", namespace=ns.metadata.name,
                                                                 cluster_name="team-a"))
        capture(outputs, "endpoint", svc.endpoint)

    records = run(program)
    ns_urn = named(records, "team-ns").urn
    objects = [r for r in records if r.type in OBJECT_TYPES]
    assert len(objects) == 1 + 2 * 4 + 7  # service account, four objects per role, the router's seven (with its PDB)
    assert {r.inputs["metadata"]["namespace"] for r in objects} == {"team-llm"}
    assert all(ns_urn in r.dependencies for r in objects)
    assert outputs["endpoint"] == "http://m70b.team-llm.svc.cluster.local:8000"
    assert one(records, "aws:eks/podIdentityAssociation:PodIdentityAssociation").inputs["namespace"] == "team-llm"
    binding = one(records, "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding")
    assert binding.inputs["subjects"][0]["namespace"] == "team-llm"
    args = one(records, DEPLOYMENT, "m70b-router-deployment").inputs["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--service-discovery-namespace") + 1] == "team-llm"


def test_the_image_is_the_pin_unless_the_spec_or_an_output_overrides_it() -> None:
    def image(records: Records) -> str:
        dep = one(records, DEPLOYMENT)
        return str(dep.inputs["spec"]["template"]["spec"]["containers"][0]["image"])

    assert image(build(small_spec())[0]) == versions.VLLM.ref
    mirrored = f"123456789012.dkr.ecr.us-east-1.amazonaws.com/vllm-openai:{versions.VLLM.tag}"
    spec = small_spec(models=[model(serving={"mode": "aggregated", "image": mirrored})])
    assert image(build(spec)[0]) == mirrored

    def program() -> None:
        repo = aws.ecr.Repository("mirror")
        built = repo.repository_url.apply(lambda url: f"{url}:{versions.VLLM.tag}")
        s = small_spec()
        VllmService("m8b", VllmServiceArgs.from_platform(s, size_platform(s), "m8b", image=built))

    records = run(program)
    dep = one(records, DEPLOYMENT)
    assert named(records, "mirror").urn in dep.dependencies
    with pytest.raises(ValidationError, match="not a container image reference"):
        VllmServiceArgs(serving=ServingSettings.from_platform(small_spec(), size_platform(small_spec()), "m8b"),
                        image="not an image")


def test_s3_weights_get_a_pod_identity_with_read_only_access_for_the_given_cluster() -> None:
    spec = pd_spec()

    def program() -> None:
        cluster = aws.eks.Cluster("theirs", name="team-b", role_arn="arn:aws:iam::123456789012:role/eks",
                                  vpc_config=aws.eks.ClusterVpcConfigArgs(subnet_ids=["subnet-0a"]))
        VllmService("m70b", VllmServiceArgs.from_platform(spec, size_platform(spec), "m70b", cluster_name=cluster.name))

    records = run(program)
    assoc = one(records, "aws:eks/podIdentityAssociation:PodIdentityAssociation")
    assert assoc.inputs["clusterName"] == "team-b" and named(records, "theirs").urn in assoc.dependencies
    assert assoc.inputs["namespace"] == "inference" and assoc.inputs["serviceAccount"] == "m70b-vllm"
    role = one(records, "aws:iam/role:Role", "m70b-weights-role")
    assert json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    doc = json.loads(one(records, "aws:iam/rolePolicy:RolePolicy").inputs["policy"])
    assert doc == vllm.weights_read_policy("s3://weights/m70b", "us-east-1")
    decode = one(records, DEPLOYMENT, "m70b-decode")
    assert assoc.urn in decode.dependencies  # credentials exist before the first pod streams weights
    env = {e["name"]: e.get("value") for e in decode.inputs["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["AWS_REGION"] == "us-east-1"


def test_the_s3_region_defaults_to_the_aws_providers() -> None:
    spec = small_spec()
    plain = ServingSettings.from_platform(spec, size_platform(spec), "m8b").model_copy(update={"aws_region": None})

    def program() -> None:
        VllmService("m8b", VllmServiceArgs(serving=plain))

    records = run(program, region="eu-west-1")
    env = {e["name"]: e.get("value") for e in one(records, DEPLOYMENT).inputs["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["AWS_REGION"] == "eu-west-1"


def test_no_cluster_name_means_no_aws_resources() -> None:
    records, _ = build(pd_spec())
    assert not [r for r in records if r.type.startswith("aws:")]


def test_hf_weights_need_no_aws_identity() -> None:
    spec = small_spec(models=[model(weights={"uri": "hf://meta-llama/Llama-3.1-8B-Instruct"})])
    records, outputs = build(spec, cluster_name="c")
    assert not [r for r in records if r.type.startswith("aws:")]
    assert outputs["m8b.endpoint"] == "http://m8b.inference.svc.cluster.local:8000"
    assert named(records, "m8b-aggregated-service").urn in named(records, "reads-m8b-endpoint").dependencies


def test_opts_depends_on_reaches_every_object_and_the_router() -> None:
    records, _ = build(pd_spec())
    stand = named(records, "crd-stand-in").urn
    objects = [r for r in records if r.type in OBJECT_TYPES]
    assert objects and all(stand in r.dependencies for r in objects)
    sa = one(records, "kubernetes:core/v1:ServiceAccount", "m70b-serviceaccount")
    assert all(sa.urn in r.dependencies for r in of_type(records, DEPLOYMENT) if r.name in ("m70b-prefill", "m70b-decode"))


def test_multi_node_model_is_a_leader_worker_set() -> None:
    # multi-node replicas serve aggregated: vLLM's NIXL decode side refuses pipeline parallelism
    spec = pd_spec(models=[model("m70b", arch=pd_spec().models[0].architecture.model_dump(), queue="chat", pool="h100",
                                 criticality="critical",
                                 parallelism={"tensor_parallel_size": 8, "pipeline_parallel_size": 2},
                                 autoscaling={"aggregated": {"max_replicas": 2}})])
    records, outputs = build(spec)
    lws = of_type(records, "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet")
    assert {r.name for r in lws} == {"m70b-aggregated"}
    assert all(r.inputs["spec"]["leaderWorkerTemplate"]["size"] == 2 and "replicas" not in r.inputs["spec"] for r in lws)
    assert not of_type(records, DEPLOYMENT)  # no router: aggregated
    assert outputs["m70b.workloads"] == {"aggregated": "m70b-aggregated"}


def test_workload_namespaces_are_checked_and_a_second_copy_is_refused() -> None:
    spec = small_spec()
    serving = ServingSettings.from_platform(spec, size_platform(spec), "m8b")
    for bad, why in (("keda", "belongs to Kubernetes or a controller"), ("Team_LLM", "not a Kubernetes namespace")):
        with pytest.raises(ValidationError, match=why):
            VllmServiceArgs(serving=serving, namespace=bad)

    def twice() -> None:
        VllmService("a", VllmServiceArgs(serving=serving))
        VllmService("b", VllmServiceArgs(serving=serving))

    with pytest.raises(NameClash, match="VllmService 'b' would create workload inference/m8b-aggregated"):
        run(twice)

    def elsewhere() -> None:
        VllmService("a", VllmServiceArgs(serving=serving))
        VllmService("b", VllmServiceArgs(serving=serving, namespace="team-b"))

    assert {r.inputs["metadata"]["namespace"] for r in of_type(run(elsewhere), DEPLOYMENT)} == {"inference", "team-b"}


def test_an_output_namespace_gets_the_same_checks_once_it_is_known() -> None:
    spec = small_spec()
    serving = ServingSettings.from_platform(spec, size_platform(spec), "m8b")

    def program() -> None:
        ns = k8s.core.v1.Namespace("theirs", metadata={"name": "keda"})
        VllmService("m8b", VllmServiceArgs(serving=serving, namespace=ns.metadata.name))

    with pytest.raises(ValueError, match="namespace 'keda' belongs to Kubernetes or a controller"):
        run(program)  # the SDK re-raises it while it serializes the first object that reads the namespace


def test_a_pd_model_on_efa_with_the_stock_image_is_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    spec = pd_spec()
    spec = spec.model_copy(update={"topology": spec.topology.model_copy(update={"gpu_pools": [
        spec.topology.gpu_pools[0].model_copy(update={"efa": True})]})})
    build(spec)
    assert [w for w in caplog.messages if "stock image" in w] == vllm.efa_image_warnings(
        ServingSettings.from_platform(spec, size_platform(spec), "m70b"))
    assert any("NIXL's LIBFABRIC backend" in w for w in caplog.messages)
