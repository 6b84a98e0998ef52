"""CapacityBuffer bodies: a Deployment role references its workload; a multi-node (LeaderWorkerSet) role, which
Karpenter v1.14.1 cannot resolve, gets a PodTemplate holding the worker pod as the LeaderWorkerSet has it; nothing
for a role whose spare nodes do not pay or are placeholder pods; the chart values carry the gate."""

from __future__ import annotations

from typing import Any

from gpuscale.headroom import HeadroomSizing
from gpuscale.manifests import capacity_buffer, karpenter, vllm
from gpuscale.manifests.vllm import ServingSettings
from gpuscale.sizing import size_platform
from gpuscale.spec.headroom import HeadroomMode
from gpuscale.spec.platform import PlatformSpec
from tests.conftest import requires_shared
from tests.k8s_schema import assert_valid
from tests.specs import multi_node_aggregated, pd_raw


def settings(raw: dict[str, Any]) -> ServingSettings:
    spec = PlatformSpec.model_validate(raw)
    return ServingSettings.from_platform(spec, size_platform(spec), spec.models[0].name)


def paying(mode: HeadroomMode = "capacity-buffer", replicas: int = 2, pods: int = 1) -> HeadroomSizing:
    return HeadroomSizing(
        mode=mode, replicas=replicas, pods=replicas * pods, gpus=replicas * pods * 8, nodes=replicas * pods,
        node_wait_s=100.0, burst_rps=10.0, needed_replicas=5, load_s=300.0, gpu_hours_per_day=24.0 * 16,
        usd_per_day=100.0, pays=True, why="test",
    )


def test_a_deployment_role_buffer_scales_with_its_deployment() -> None:
    s = settings(pd_raw())
    [body] = capacity_buffer.headroom_bodies(s, "prefill", paying())
    assert body["metadata"]["name"] == "m70b-prefill-headroom" and body["metadata"]["namespace"] == s.namespace
    assert body["spec"] == {"provisioningStrategy": capacity_buffer.ACTIVE_CAPACITY, "replicas": 2,
                            "scalableRef": {"apiGroup": "apps", "kind": "Deployment",
                                            "name": vllm.workload_name("m70b", "prefill")}}


def test_a_multi_node_role_buffer_names_a_pod_template_of_the_worker_pod() -> None:
    s = settings(multi_node_aggregated(pd_raw()))
    assert s.shape.multi_node
    template, body = capacity_buffer.headroom_bodies(s, "aggregated", paying(replicas=1, pods=s.shape.pods))
    lws = vllm.workload_body(s, "aggregated")
    assert template["kind"] == "PodTemplate" and template["metadata"]["name"] == body["metadata"]["name"]
    assert template["template"] == lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    assert body["spec"]["podTemplateRef"] == {"name": template["metadata"]["name"]}
    assert body["spec"]["replicas"] == s.shape.pods  # every pod of the replica needs its node


@requires_shared
def test_bodies_are_valid() -> None:
    single = capacity_buffer.headroom_bodies(settings(pd_raw()), "decode", paying())
    multi_settings = settings(multi_node_aggregated(pd_raw()))
    multi = capacity_buffer.headroom_bodies(multi_settings, "aggregated", paying(pods=multi_settings.shape.pods))
    assert_valid(*single, *multi)


def test_nothing_for_headroom_that_does_not_pay_or_is_not_asked_for() -> None:
    s = settings(pd_raw())
    assert capacity_buffer.headroom_bodies(s, "prefill", paying().model_copy(update={"pays": False})) == []
    assert capacity_buffer.headroom_bodies(s, "prefill", paying("none")) == []


def test_the_chart_gate() -> None:
    common: dict[str, Any] = {"cluster_name": "c", "queue_name": "q", "region": "us-east-1", "service_account": "karpenter",
                              "replicas": 2, "cpu": "1", "memory": "1Gi"}
    assert "featureGates" not in karpenter.karpenter_chart_values(**common)["settings"]
    on = karpenter.karpenter_chart_values(**common, capacity_buffer=True)["settings"]
    assert on["featureGates"] == {"capacityBuffer": True}
