"""KAI builders: the Queue tree field by field, the Topology, the Helm values and the PodGroup KAI will create."""

from __future__ import annotations

from typing import Any

import pytest

from gpuscale import labels, sizing, versions
from gpuscale.manifests.kai import (
    MB_PER_GIB,
    expected_podgroup,
    go_duration,
    kai_chart_values,
    kai_prometheus_url,
    queue_bodies,
    topology_bodies,
    topology_body,
)
from gpuscale.manifests.kai_wiring import TOPOLOGY_NAME
from gpuscale.spec.platform import PlatformSpec
from gpuscale.stackfile import validate_config
from tests.conftest import requires_shared
from tests.k8s_schema import assert_valid, validate_object
from tests.manifests.test_kai_wiring import gang_spec

UNLIMITED = {"quota": -1, "limit": -1}


def by_name(bodies: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {b["metadata"]["name"]: b for b in bodies}


def three_level_spec(raw_stack) -> PlatformSpec:  # type: ignore[no-untyped-def]
    """Prod with the inference department split one level deeper: org -> products -> chat-team / search-team."""
    raw = raw_stack("prod")
    raw["teams"][0] = {
        "name": "products", "display_name": "Product org", "gpu_quota": 48, "gpu_limit": 64, "priority": 200,
        "cpu_quota_cores": 200, "memory_quota_gib": 1600,
        "children": [
            {"name": "assistants", "gpu_quota": 40, "gpu_limit": 56, "priority": 200, "over_quota_weight": 3,
             "cpu_quota_cores": 150, "memory_quota_gib": 1200,
             "children": [
                 {"name": "chat", "gpu_quota": 32, "gpu_limit": 48, "priority": 200, "cpu_quota_cores": 100,
                  "cpu_limit_cores": 150, "memory_quota_gib": 800},
                 {"name": "voice", "gpu_quota": 8, "gpu_limit": 16, "priority": 180},
             ]},
            {"name": "search", "gpu_quota": 8, "gpu_limit": 16, "priority": 150},
        ],
    }
    raw["models"][1]["workload"]["peak_rps"] = 16  # what search's 8 GPUs carry
    raw["models"][0]["workload"]["peak_rps"] = 26  # what chat's 32 GPUs carry
    return validate_config(raw, "three-level")


def test_prod_queue_tree_field_by_field(prod_spec: PlatformSpec) -> None:
    bodies = queue_bodies(prod_spec.teams)
    assert [b["metadata"]["name"] for b in bodies] == ["inference", "chat", "search", "research", "training"]
    assert all(b["apiVersion"] == "scheduling.run.ai/v2" and b["kind"] == "Queue" for b in bodies)
    q = by_name(bodies)
    expected = {
        # name: (parent, gpu quota, gpu limit, over-quota weight, priority, display name, workload class)
        "inference": (None, 52, 64, 2, 200, "Inference products", "non-preemptible"),
        "chat": ("inference", 40, 48, 1, 200, "chat", "non-preemptible"),
        "search": ("inference", 12, 16, 1, 150, "search", "non-preemptible"),
        "research": (None, 16, 80, 1, 50, "Research", "preemptible"),
        "training": ("research", 16, 80, 1, 50, "training", "preemptible"),
    }
    for name, (parent, quota, limit, weight, priority, display, klass) in expected.items():
        s = q[name]["spec"]
        assert s.get("parentQueue") == parent, name
        assert s["resources"]["gpu"] == {"quota": quota, "limit": limit, "overQuotaWeight": weight}, name
        assert s["priority"] == priority and s["displayName"] == display, name
        # KAI checks non-preemptible pods against every resource's quota: CPU/memory unset means unlimited (-1)
        assert s["resources"]["cpu"] == {**UNLIMITED, "overQuotaWeight": weight}, name
        assert s["resources"]["memory"] == {**UNLIMITED, "overQuotaWeight": weight}, name
        assert q[name]["metadata"]["labels"]["gpuscale.io/workload-class"] == klass
        assert "namespace" not in q[name]["metadata"]  # Queues are cluster-scoped


def test_three_level_tree_links_every_level(raw_stack) -> None:  # type: ignore[no-untyped-def]
    spec = three_level_spec(raw_stack)
    bodies = queue_bodies(spec.teams)
    names = [b["metadata"]["name"] for b in bodies]
    assert names == ["products", "assistants", "chat", "voice", "search", "research", "training"]
    parents = {b["metadata"]["name"]: b["spec"].get("parentQueue") for b in bodies}
    assert parents == {"products": None, "assistants": "products", "chat": "assistants", "voice": "assistants",
                       "search": "products", "research": None, "training": "research"}
    for name, parent in parents.items():  # parents are always emitted first
        assert parent is None or names.index(parent) < names.index(name)
    q = by_name(bodies)
    assert q["assistants"]["spec"]["resources"]["gpu"] == {"quota": 40, "limit": 56, "overQuotaWeight": 3}
    # KAI units: CPU millicores, memory MB (10^6 bytes)
    assert q["chat"]["spec"]["resources"]["cpu"] == {"quota": 100_000, "limit": 150_000, "overQuotaWeight": 1}
    assert q["chat"]["spec"]["resources"]["memory"] == {"quota": round(800 * MB_PER_GIB, 3), "limit": -1, "overQuotaWeight": 1}
    assert q["products"]["spec"]["resources"]["cpu"]["quota"] == 200_000
    assert q["voice"]["spec"]["resources"]["cpu"] == {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    assert spec.leaf_queue_names() == ["chat", "voice", "search", "training"]


def test_topology_levels_come_from_the_spec(prod_spec: PlatformSpec, raw_stack) -> None:  # type: ignore[no-untyped-def]
    body = topology_body(prod_spec.topology.levels)
    assert (body["apiVersion"], body["kind"], body["metadata"]["name"]) == ("kai.scheduler/v1alpha1", "Topology", TOPOLOGY_NAME)
    assert body["spec"]["levels"] == [
        {"nodeLabel": "topology.kubernetes.io/zone", "alias": "zone"},
        {"nodeLabel": "topology.k8s.aws/network-node-layer-1", "alias": "spine"},
        {"nodeLabel": "topology.k8s.aws/network-node-layer-2", "alias": "block"},
        {"nodeLabel": "topology.k8s.aws/network-node-layer-3", "alias": "rack"},
        {"nodeLabel": "kubernetes.io/hostname", "alias": "node"},
    ]
    raw = raw_stack("prod")
    raw["topology"]["levels"] = [{"node_label": "topology.kubernetes.io/zone"}, {"node_label": "kubernetes.io/hostname"}]
    custom = topology_body(validate_config(raw, "test").topology.levels)
    assert custom["spec"]["levels"] == [{"nodeLabel": "topology.kubernetes.io/zone"}, {"nodeLabel": "kubernetes.io/hostname"}]


def test_chart_values_that_matter(prod_spec: PlatformSpec) -> None:
    values = kai_chart_values(prometheus_url=kai_prometheus_url(prod_spec))
    assert values["global"]["clusterAutoscaling"] is True
    assert values["scheduler"]["placementStrategy"] == "binpack"
    assert values["podgrouper"]["queueLabelKey"] == labels.KAI_QUEUE_LABEL
    assert values["defaultPriorityClasses"]["enabled"] is True
    assert values["defaultQueue"]["createDefaultQueue"] is False
    assert values["prometheus"] == {"enabled": True, "externalPrometheusUrl": prod_spec.observability.prometheus_url}


def test_no_prometheus_stack_means_no_kai_service_monitors(raw_stack) -> None:  # type: ignore[no-untyped-def]
    raw = raw_stack("dev")
    raw["observability"] = {"install_prometheus_stack": False, "prometheus_url": "http://prometheus.example:9090"}
    assert kai_chart_values(prometheus_url=kai_prometheus_url(validate_config(raw, "test")))["prometheus"] == {"enabled": False}


def test_chart_is_pinned_to_a_valid_release() -> None:
    assert versions.KAI_SCHEDULER.version == "v0.17.0"
    assert not versions.KAI_SCHEDULER.version.startswith("v0.20")  # v0.20.0/v0.20.1 are retracted upstream
    assert versions.KAI_SCHEDULER.chart == "oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler"


def test_podgroup_of_a_two_node_replica_gangs_both_pods() -> None:
    spec = gang_spec()
    model = spec.models[1]
    shape = sizing.replica_shape(model, spec.topology.pool(model.node_pool))
    pg = expected_podgroup(spec, model, "aggregated", shape)
    assert pg["metadata"]["name"] == "pg-llama-70b-bf16-aggregated-group-0"
    assert pg["metadata"]["namespace"] == model.serving.namespace
    s = pg["spec"]
    assert s["minMember"] == shape.pods == 2
    assert s["subGroups"] == [{"name": "leader", "minMember": 1}, {"name": "workers", "minMember": 1}]
    assert (s["queue"], s["priorityClassName"], s["preemptibility"]) == ("search", "inference", "non-preemptible")
    assert s["topologyConstraint"] == {
        "topology": TOPOLOGY_NAME,
        "requiredTopologyLevel": "topology.kubernetes.io/zone",
        "preferredTopologyLevel": "topology.k8s.aws/network-node-layer-3",
    }
    assert pg["metadata"]["labels"][labels.KAI_QUEUE_LABEL] == "search"


def test_podgroup_of_a_single_node_replica_is_not_split(prod_spec: PlatformSpec) -> None:
    model = prod_spec.models[0]
    shape = sizing.replica_shape(model, prod_spec.topology.pool(model.node_pool))
    pg = expected_podgroup(prod_spec, model, "decode", shape, workload_name="llama-decode")
    assert pg["metadata"]["name"] == "pg-llama-decode-pod"
    assert pg["spec"]["minMember"] == 1 and "subGroups" not in pg["spec"]
    assert pg["spec"]["topologyConstraint"]["requiredTopologyLevel"] == "kubernetes.io/hostname"


def _all_podgroups(spec: PlatformSpec) -> list[dict[str, Any]]:
    out = []
    for model in spec.models:
        shape = sizing.replica_shape(model, spec.topology.pool(model.node_pool))
        out += [expected_podgroup(spec, model, role, shape) for role in model.serving.roles]
    return out


@requires_shared
@pytest.mark.parametrize("name", ["dev", "staging", "prod", "gang", "three-level"])
def test_every_queue_topology_and_podgroup_is_schema_valid(
    stack_specs: dict[str, PlatformSpec], raw_stack, name: str,  # type: ignore[no-untyped-def]
) -> None:
    spec = {"gang": gang_spec, "three-level": lambda: three_level_spec(raw_stack)}.get(name, lambda: stack_specs[name])()
    assert_valid(*queue_bodies(spec.teams), *topology_bodies(spec), *_all_podgroups(spec))


@requires_shared
def test_the_schema_check_bites(prod_spec: PlatformSpec) -> None:
    pg = _all_podgroups(prod_spec)[0]
    pg["spec"]["minMember"] = 0  # v0.17.0's CRD: minimum 1
    assert validate_object(pg)
    topo = topology_body(prod_spec.topology.levels)
    topo["spec"]["levels"] = [{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "topology.kubernetes.io/zone"}]
    assert any("hostname" in p for p in validate_object(topo))  # CEL: hostname only as the last level
    queue = queue_bodies(prod_spec.teams)[0]
    queue["spec"]["resources"]["gpu"]["guaranteed"] = 1
    assert validate_object(queue)


@pytest.mark.parametrize(("seconds", "text"), [(0, "0s"), (45, "45s"), (90, "1m30s"), (600, "10m0s"), (3723, "1h2m3s")])
def test_go_duration_reads_as_time_duration_string(seconds: int, text: str) -> None:
    assert go_duration(seconds) == text


def test_podgroup_carries_the_sized_preemption_delay_as_the_api_server_returns_it(prod_spec: PlatformSpec) -> None:
    for model in prod_spec.models:
        shape = sizing.replica_shape(model, prod_spec.topology.pool(model.node_pool))
        delay_s = sizing.size_model(prod_spec, model).preemption_delay_s
        for role in model.serving.roles:
            pg = expected_podgroup(prod_spec, model, role, shape)  # type: ignore[arg-type]
            assert pg["spec"]["preemptionDelay"] == go_duration(delay_s)
            assert pg["metadata"]["annotations"][labels.KAI_PREEMPTION_DELAY_ANNOTATION] == f"{delay_s}s"
