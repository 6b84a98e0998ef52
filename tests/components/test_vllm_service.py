"""VllmService under Pulumi mocks: one workload/Service/PDB/PodMonitor per role, the router, weights identity."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest

from gpuscale import labels
from gpuscale.components.vllm_service import VllmService, VllmServiceArgs
from gpuscale.manifests import router, vllm
from gpuscale.manifests.router import PdRouterArgs
from gpuscale.sizing import size_platform
from gpuscale.spec.platform import PlatformSpec
from gpuscale.stackfile import validate_config
from gpuscale.synth.mocks import RecordedResource
from tests.conftest import STACKS
from tests.specs import multi_node_aggregated

Run = Callable[..., list[RecordedResource]]


def build(
    run_pulumi: Run, spec: PlatformSpec, *, cluster_name: str | None = "gpuscale-test",
) -> tuple[list[RecordedResource], dict[str, Any]]:
    sizing = size_platform(spec)
    outputs: dict[str, Any] = {}

    def program() -> None:
        crds = k8s.core.v1.Namespace("crd-stand-in", metadata={"name": "crd-stand-in"})
        for m in spec.models:
            svc = VllmService(
                m.name, VllmServiceArgs.from_platform(spec, sizing, m.name), cluster_name=cluster_name, depends_on=[crds],
            )
            svc.endpoint.apply(lambda v, n=m.name: outputs.__setitem__(f"{n}.endpoint", v))
            svc.workload_names.apply(lambda v, n=m.name: outputs.__setitem__(f"{n}.workloads", v))
            outputs[f"{m.name}.roles"] = sorted(svc.workloads)
            outputs[f"{m.name}.router"] = svc.router

    return run_pulumi(program, region=spec.environment.aws_region), outputs


def of_type(records: list[RecordedResource], typ: str) -> list[RecordedResource]:
    return [r for r in records if r.type == typ]


def k8s_objects(records: list[RecordedResource]) -> list[dict[str, Any]]:
    """The Kubernetes objects as the provider would apply them (mocks record numbers as floats)."""
    return [_ints(r.inputs) for r in records if r.type.startswith("kubernetes:") and r.custom and "helm.sh" not in r.type
            and r.name != "crd-stand-in"]


def _ints(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_ints(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def test_prod_prefill_and_decode_are_separate_workloads(run_pulumi: Run, prod_spec: PlatformSpec) -> None:
    records, outputs = build(run_pulumi, prod_spec)
    (component,) = [r for r in of_type(records, "gpuscale:index:VllmService") if r.name == "llama-70b-fp8"]
    deployments = {r.name: r for r in of_type(records, "kubernetes:apps/v1:Deployment") if r.parent_urn == component.urn}
    assert set(deployments) == {"llama-70b-fp8-prefill", "llama-70b-fp8-decode"}
    for role in ("prefill", "decode"):
        d = deployments[f"llama-70b-fp8-{role}"]
        assert d.inputs["metadata"]["name"] == f"llama-70b-fp8-{role}"
        assert d.inputs["spec"]["selector"]["matchLabels"] == {labels.MODEL_LABEL: "llama-70b-fp8", labels.ROLE_LABEL: role}
        assert "replicas" not in d.inputs["spec"]  # the role's autoscaler owns it
        pod = d.inputs["spec"]["template"]["spec"]
        assert pod["schedulerName"] == "kai-scheduler"
        assert pod["tolerations"] == [vllm.gpu_toleration()]
    children = [r for r in records if r.parent_urn == component.urn]
    for suffix, typ in (("service", "core/v1:Service"), ("pdb", "policy/v1:PodDisruptionBudget"),
                        ("podmonitor", "monitoring.coreos.com/v1:PodMonitor")):
        names = {r.name for r in children if r.type == f"kubernetes:{typ}"}
        assert names == {f"llama-70b-fp8-prefill-{suffix}", f"llama-70b-fp8-decode-{suffix}"}
    assert outputs["llama-70b-fp8.roles"] == ["decode", "prefill"]
    assert outputs["llama-70b-fp8.workloads"] == {"prefill": "llama-70b-fp8-prefill", "decode": "llama-70b-fp8-decode"}
    assert outputs["llama-70b-fp8.endpoint"] == "http://llama-70b-fp8.inference.svc.cluster.local:8000"
    assert outputs["llama-70b-fp8.router"] is not None and outputs["search-8b.router"] is None
    (router,) = of_type(records, "gpuscale:index:PdRouter")
    assert router.parent_urn == component.urn and router.name == "llama-70b-fp8-router"


def test_workloads_wait_for_the_crds_and_the_service_account(run_pulumi: Run, prod_spec: PlatformSpec) -> None:
    records, _ = build(run_pulumi, prod_spec)
    (stand_in,) = [r for r in records if r.name == "crd-stand-in"]
    sa = {r.name: r for r in of_type(records, "kubernetes:core/v1:ServiceAccount")}["search-8b-serviceaccount"]
    (dep,) = [r for r in of_type(records, "kubernetes:apps/v1:Deployment") if r.name == "search-8b-aggregated"]
    assert stand_in.urn in dep.dependencies and sa.urn in dep.dependencies
    (pm,) = [r for r in records if r.name == "search-8b-aggregated-podmonitor"]
    assert stand_in.urn in pm.dependencies  # PodMonitor CRD comes from the Prometheus chart
    assert sa.inputs["metadata"]["name"] == "search-8b-vllm"
    assert dep.inputs["spec"]["template"]["spec"]["serviceAccountName"] == "search-8b-vllm"


def test_s3_weights_get_a_pod_identity_with_read_only_access(run_pulumi: Run, prod_spec: PlatformSpec) -> None:
    records, _ = build(run_pulumi, prod_spec)
    (assoc,) = [r for r in of_type(records, "aws:eks/podIdentityAssociation:PodIdentityAssociation")
                if r.name == "llama-70b-fp8-weights-identity"]
    assert assoc.inputs["clusterName"] == "gpuscale-test"
    assert assoc.inputs["namespace"] == "inference" and assoc.inputs["serviceAccount"] == "llama-70b-fp8-vllm"
    (role,) = [r for r in of_type(records, "aws:iam/role:Role") if r.name == "llama-70b-fp8-weights-role"]
    trust = json.loads(role.inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert role.inputs["tags"] == prod_spec.environment.tags
    (policy,) = [r for r in of_type(records, "aws:iam/rolePolicy:RolePolicy") if r.name == "llama-70b-fp8-weights-read"]
    doc = json.loads(policy.inputs["policy"])
    assert doc == vllm.weights_read_policy(prod_spec.models[0].weights.uri, "us-east-1")
    (dep,) = [r for r in of_type(records, "kubernetes:apps/v1:Deployment") if r.name == "llama-70b-fp8-decode"]
    assert assoc.urn in dep.dependencies  # credentials exist before the first pod streams weights


def test_no_cluster_name_means_no_aws_resources(run_pulumi: Run, prod_spec: PlatformSpec) -> None:
    records, _ = build(run_pulumi, prod_spec, cluster_name=None)
    assert not [r for r in records if r.type.startswith("aws:")]


def test_hf_weights_need_no_aws_identity(run_pulumi: Run, dev_spec: PlatformSpec) -> None:
    records, outputs = build(run_pulumi, dev_spec)
    assert not [r for r in records if r.type.startswith("aws:")]
    assert outputs["llama-8b.endpoint"] == "http://llama-8b.inference.svc.cluster.local:8000"
    assert {r.inputs["metadata"]["name"] for r in of_type(records, "kubernetes:core/v1:Service")} == {"llama-8b"}


def test_multi_node_model_is_a_leader_worker_set(run_pulumi: Run, raw_stack: Callable[[str], dict[str, Any]]) -> None:
    spec = validate_config(multi_node_aggregated(raw_stack("prod")), "t")
    records, _ = build(run_pulumi, spec)
    lws = of_type(records, "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet")
    assert {r.name for r in lws} == {"llama-70b-fp8-aggregated"}
    pods = size_platform(spec).model("llama-70b-fp8").shape.pods
    for r in lws:
        assert r.inputs["spec"]["leaderWorkerTemplate"]["size"] == pods == 2
        assert "replicas" not in r.inputs["spec"]
    assert not [r for r in of_type(records, "kubernetes:apps/v1:Deployment") if r.name.startswith("llama-70b-fp8-p")]


@pytest.mark.parametrize("stack", STACKS)
def test_emitted_objects_are_the_schema_checked_bodies(
    run_pulumi: Run, stack_specs: dict[str, PlatformSpec], stack: str,
) -> None:
    """The component applies exactly the builders' bodies, which test_vllm holds to the upstream CRDs and
    kubernetes-validate for every stack (repeating the slow schema load here would prove nothing more)."""
    spec = stack_specs[stack]
    sizing = size_platform(spec)
    records, _ = build(run_pulumi, spec)
    emitted = {(o["kind"], o["metadata"]["name"]): o for o in k8s_objects(records)}
    expected: dict[tuple[str, str], dict[str, Any]] = {}
    for m in spec.models:
        a = VllmServiceArgs.from_platform(spec, sizing, m.name)
        bodies = [vllm.service_account_body(a)] + [o for r in m.serving.roles for o in vllm.role_objects(a, r)]
        if m.serving.mode == "disaggregated":
            bodies += router.router_objects(PdRouterArgs.from_service(a))
        expected.update({(b["kind"], b["metadata"]["name"]): b for b in bodies})
    assert emitted == expected


def test_children_are_named_after_the_component(run_pulumi: Run, dev_spec: PlatformSpec) -> None:
    records, _ = build(run_pulumi, dev_spec)
    (component,) = of_type(records, "gpuscale:index:VllmService")
    assert component.name == "llama-8b" and not component.custom
    assert all(r.name.startswith("llama-8b-") for r in records if r.parent_urn == component.urn)


def test_args_are_plain_data(prod_spec: PlatformSpec) -> None:
    args = VllmServiceArgs.from_platform(prod_spec, size_platform(prod_spec), "llama-70b-fp8")
    dumped = args.model_dump(mode="json")
    assert VllmServiceArgs.model_validate(dumped) == args  # no Outputs inside the args
    assert not any(isinstance(v, pulumi.Output) for v in args.__dict__.values())
