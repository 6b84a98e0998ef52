"""KaiTopology under Pulumi mocks: the ``gpuscale`` Topology the wiring names, levels from the spec."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pulumi
import pytest

from gpuscale.components.kai_topology import KaiTopology, KaiTopologyArgs
from gpuscale.manifests.kai import topology_bodies
from gpuscale.manifests.kai_wiring import TOPOLOGY_NAME
from gpuscale.spec.platform import PlatformSpec
from gpuscale.synth.mocks import RecordedResource
from tests.specs import small_spec

TOPOLOGY = "kubernetes:kai.scheduler/v1alpha1:Topology"


def build(run_pulumi: Callable[..., list[RecordedResource]], spec: PlatformSpec) -> tuple[list[RecordedResource], dict[str, Any]]:
    outputs: dict[str, Any] = {}

    def program() -> None:
        chart = pulumi.CustomResource("test:index:Chart", "kai-chart", {})
        topo = KaiTopology("kai", KaiTopologyArgs(platform=spec), depends_on=[chart])
        topo.topology_names.apply(lambda v: outputs.__setitem__("topology_names", v))

    return run_pulumi(program), outputs


def test_topology_is_named_for_the_wiring_and_waits_for_the_chart(run_pulumi, prod_spec: PlatformSpec) -> None:  # type: ignore[no-untyped-def]
    records, outputs = build(run_pulumi, prod_spec)
    (component,) = [r for r in records if r.type == "gpuscale:index:KaiTopology"]
    (topo,) = [r for r in records if r.type == TOPOLOGY]
    (chart,) = [r for r in records if r.name == "kai-chart"]
    assert topo.name == "kai-topology" and topo.parent_urn == component.urn
    assert [topo.inputs["metadata"]["name"]] == [TOPOLOGY_NAME] == outputs["topology_names"]
    assert chart.urn in topo.dependencies
    assert [lv["nodeLabel"] for lv in topo.inputs["spec"]["levels"]] == [lv.node_label for lv in prod_spec.topology.levels]


@pytest.mark.parametrize("name", ["dev", "staging", "prod"])
def test_every_stack_gets_its_topology(run_pulumi, stack_specs: dict[str, PlatformSpec], name: str) -> None:  # type: ignore[no-untyped-def]
    spec = stack_specs[name]
    records, _ = build(run_pulumi, spec)
    topos = [r for r in records if r.type == TOPOLOGY]
    assert [t.inputs["spec"] for t in topos] == [b["spec"] for b in topology_bodies(spec)]
    assert all(t.inputs["spec"]["levels"][-1]["nodeLabel"] == "kubernetes.io/hostname" for t in topos)


def test_a_pool_without_network_layers_gets_its_own_topology(run_pulumi) -> None:  # type: ignore[no-untyped-def]
    # g6 nodes carry no topology.k8s.aws/network-node-layer-* label: a Topology listing them would exclude the nodes
    spec = small_spec(topology={"zones": ["us-east-1a"], "gpu_pools": [
        {"name": "l40s", "instance_types": ["g6e.xlarge"], "gpu_limit": 8},
        {"name": "l4", "instance_types": ["g6.xlarge"], "gpu_limit": 8},
    ]})
    records, outputs = build(run_pulumi, spec)
    topos = {r.inputs["metadata"]["name"]: r for r in records if r.type == TOPOLOGY}
    assert sorted(topos) == sorted(outputs["topology_names"]) == ["gpuscale", "gpuscale-0-network-layers"]
    assert topos["gpuscale-0-network-layers"].name == "kai-gpuscale-0-network-layers"
    assert [lv["nodeLabel"] for lv in topos["gpuscale-0-network-layers"].inputs["spec"]["levels"]] == [
        "topology.kubernetes.io/zone", "kubernetes.io/hostname"]
