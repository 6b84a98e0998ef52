"""PdRouter: vLLM Router in discovery mode, CPU only, least-privilege RBAC, the model's entry-point Service."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gpuscale import labels, versions
from gpuscale.components.pd_router import PdRouter, PdRouterArgs
from gpuscale.manifests import entry_point, router
from gpuscale.manifests.router import RouterSettings
from gpuscale.manifests.vllm import ServingSettings
from gpuscale.sizing import size_platform
from gpuscale.spec.platform import PlatformSpec
from gpuscale.synth.mocks import RecordedResource
from tests.conftest import requires_shared
from tests.specs import model, pd_spec, small_spec

Run = Callable[..., list[RecordedResource]]


def prod_router_args(spec: PlatformSpec) -> RouterSettings:
    return RouterSettings.from_service(ServingSettings.from_platform(spec, size_platform(spec), "m70b"))


@pytest.fixture
def prod_spec() -> PlatformSpec:
    return pd_spec()


def after(args: list[str], name: str) -> list[str]:
    """The values that follow a flag, up to the next flag."""
    rest = args[args.index(name) + 1:]
    out = []
    for a in rest:
        if a.startswith("--"):
            break
        out.append(a)
    return out


def test_router_discovers_each_role_by_label(prod_spec: PlatformSpec) -> None:
    a = prod_router_args(prod_spec)
    args = router.router_args(a)
    assert "--service-discovery" in args and "--vllm-pd-disaggregation" in args
    assert after(args, "--prefill-selector") == [f"{labels.MODEL_LABEL}=m70b", f"{labels.ROLE_LABEL}=prefill"]
    assert after(args, "--decode-selector") == [f"{labels.MODEL_LABEL}=m70b", f"{labels.ROLE_LABEL}=decode"]
    assert after(args, "--service-discovery-namespace") == ["inference"]
    assert after(args, "--service-discovery-port") == ["8000"]
    assert after(args, "--kv-connector") == ["nixl"]
    assert after(args, "--request-timeout-secs") == ["60"]  # the SLO request timeout of tests/specs.model()
    assert int(after(args, "--worker-startup-timeout-secs")[0]) >= size_platform(prod_spec).models[0].cold_start.total_s
    assert after(args, "--prometheus-host") == ["0.0.0.0"]
    assert a.replicas == 2  # two routers, so a drain moves one while the other serves (tests/manifests/test_entry_point.py)


def test_multi_node_roles_route_to_leaders_only() -> None:
    # a P/D replica never spans nodes (vLLM's NIXL decode side refuses PP > 1), but the router builder keeps the switch
    a = prod_router_args(pd_spec()).model_copy(update={"leaders_only": True})
    assert f"{labels.LWS_WORKER_INDEX_LABEL}=0" in after(router.router_args(a), "--decode-selector")


def test_router_runs_on_cpu_only(prod_spec: PlatformSpec) -> None:
    body = router.router_deployment_body(prod_router_args(prod_spec))
    pod = body["spec"]["template"]["spec"]
    assert "tolerations" not in pod and "nodeSelector" not in pod
    assert pod["affinity"] == entry_point.affinity(router.router_selector("m70b"))  # on-demand, one router per node
    (c,) = pod["containers"]
    assert labels.GPU_RESOURCE not in c["resources"]["requests"] and labels.GPU_RESOURCE not in c["resources"]["limits"]
    assert c["image"] == versions.VLLM_ROUTER.ref == "vllm/vllm-router:v0.1.17"
    assert c["command"] == ["vllm-router"]
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["readinessProbe"]["httpGet"]["path"] == "/readiness" and c["livenessProbe"]["httpGet"]["path"] == "/liveness"
    assert body["spec"]["replicas"] == 2
    assert body["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    assert labels.ROLE_LABEL not in body["spec"]["template"]["metadata"]["labels"]  # no role selector matches it


def test_rbac_is_namespaced_read_only_pods(prod_spec: PlatformSpec) -> None:
    a = prod_router_args(prod_spec)
    role, binding = router.router_role_body(a), router.router_role_binding_body(a)
    assert role["kind"] == "Role" and role["metadata"]["namespace"] == "inference"
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "m70b-router"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "m70b-router", "namespace": "inference"}]
    dep = router.router_deployment_body(a)
    assert dep["spec"]["template"]["spec"]["serviceAccountName"] == "m70b-router"


def test_service_is_the_model_entry_point(prod_spec: PlatformSpec) -> None:
    svc = router.router_service_body(prod_router_args(prod_spec))
    assert svc["metadata"]["name"] == "m70b"
    assert svc["spec"]["selector"] == router.router_selector("m70b")


def test_aggregated_models_have_no_router() -> None:
    spec = small_spec(models=[model()])
    args = ServingSettings.from_platform(spec, size_platform(spec), "m8b")
    with pytest.raises(ValueError, match="only disaggregated serving needs a P/D router"):
        RouterSettings.from_service(args)


def test_component_wires_every_object(run_pulumi: Run, prod_spec: PlatformSpec) -> None:
    a = prod_router_args(prod_spec)
    outputs: dict[str, Any] = {}

    def program() -> None:
        r = PdRouter("llama-router", PdRouterArgs(router=a))
        r.endpoint.apply(lambda v: outputs.__setitem__("endpoint", v))
        r.service_name.apply(lambda v: outputs.__setitem__("service", v))

    records = run_pulumi(program)
    (component,) = [r for r in records if r.type == "gpuscale:index:PdRouter"]
    children = {r.name: r for r in records if r.parent_urn == component.urn}
    assert set(children) == {
        "llama-router-serviceaccount", "llama-router-role", "llama-router-rolebinding", "llama-router-deployment",
        "llama-router-service", "llama-router-podmonitor", "llama-router-pdb",
    }
    # no voluntary eviction takes the last Ready router; with two, a drain moves one at a time
    pdb = children["llama-router-pdb"].inputs["spec"]
    assert int(pdb["minAvailable"]) == 1 and pdb["selector"]["matchLabels"] == router.router_selector(a.model)
    dep = children["llama-router-deployment"]
    assert children["llama-router-rolebinding"].urn in dep.dependencies  # RBAC before discovery starts
    assert dep.inputs["spec"]["template"]["spec"]["containers"][0]["args"] == router.router_args(a)
    assert outputs == {"endpoint": "http://m70b.inference.svc.cluster.local:8000", "service": "m70b"}


@requires_shared
def test_router_objects_are_schema_valid(prod_spec: PlatformSpec) -> None:
    from tests.k8s_schema import assert_valid

    objs = router.router_objects(prod_router_args(prod_spec))
    assert {o["kind"] for o in objs} == {"ServiceAccount", "Role", "RoleBinding", "Deployment", "PodDisruptionBudget",
                                         "Service", "PodMonitor"}
    assert_valid(*objs)
