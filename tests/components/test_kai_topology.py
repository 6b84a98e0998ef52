"""KaiTopology under Pulumi mocks: the ``gpuscale`` Topology the wiring names, levels alone as input."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest
from pydantic import ValidationError

from gpuscale.components import KaiTopology, KaiTopologyArgs, NameClash
from gpuscale.manifests.kai import topology_body
from gpuscale.manifests.kai_wiring import TOPOLOGY_NAME
from gpuscale.spec.topology import TopologyLevel, default_levels
from tests.components.support import capture, consumer, named, one, run, stand_in
from tests.specs import small_spec

TOPOLOGY = "kubernetes:kai.scheduler/v1alpha1:Topology"
LEVELS = [TopologyLevel(node_label="topology.kubernetes.io/zone", alias="zone"),
          TopologyLevel(node_label="kubernetes.io/hostname", alias="node")]


def test_levels_alone_make_the_topology_the_wiring_names() -> None:
    outputs: dict[str, Any] = {}

    def program() -> None:
        chart = stand_in("kai-chart")
        topo = KaiTopology("kai", KaiTopologyArgs(levels=LEVELS), opts=pulumi.ResourceOptions(depends_on=[chart]))
        capture(outputs, "topology_name", topo.topology_name)
        consumer("reads-name", topo.topology_name)

    records = run(program)
    topo = one(records, TOPOLOGY)
    assert topo.name == "kai-topology" and topo.parent_urn == one(records, "gpuscale:index:KaiTopology").urn
    assert topo.inputs["metadata"]["name"] == TOPOLOGY_NAME == outputs["topology_name"]
    assert topo.inputs["spec"] == topology_body(LEVELS)["spec"] == {
        "levels": [{"nodeLabel": "topology.kubernetes.io/zone", "alias": "zone"},
                   {"nodeLabel": "kubernetes.io/hostname", "alias": "node"}]}
    assert named(records, "kai-chart").urn in topo.dependencies
    assert topo.urn in named(records, "reads-name").dependencies


def test_default_levels_and_from_spec() -> None:
    assert KaiTopologyArgs().levels == default_levels()
    spec = small_spec()
    assert KaiTopologyArgs.from_spec(spec).levels == spec.topology.levels


def test_levels_kai_would_refuse_are_refused_here() -> None:
    with pytest.raises(ValidationError, match="hostname may only be the last"):
        KaiTopologyArgs(levels=list(reversed(LEVELS)))
    with pytest.raises(ValidationError, match="aliases must be unique"):
        KaiTopologyArgs(levels=[LEVELS[0], TopologyLevel(node_label="kubernetes.io/hostname", alias="zone")])


def test_a_second_topology_on_one_cluster_is_refused() -> None:
    def twice() -> None:
        KaiTopology("a", KaiTopologyArgs())
        KaiTopology("b", KaiTopologyArgs())

    with pytest.raises(NameClash, match="create it once"):
        run(twice)


def test_a_pool_without_network_layers_gets_its_own_topology() -> None:
    # g6 nodes carry no topology.k8s.aws/network-node-layer-* label: a Topology listing them would exclude the nodes
    spec = small_spec(topology={"zones": ["us-east-1a"], "gpu_pools": [
        {"name": "l40s", "instance_types": ["g6e.xlarge"], "gpu_limit": 8},
        {"name": "l4", "instance_types": ["g6.xlarge"], "gpu_limit": 8},
    ]})
    args = KaiTopologyArgs.from_spec(spec)
    assert list(args.reduced) == ["gpuscale-0-network-layers"]
    records = run(lambda: KaiTopology("kai", args))
    topos = {r.inputs["metadata"]["name"]: r for r in records if r.type == TOPOLOGY}
    assert sorted(topos) == ["gpuscale", "gpuscale-0-network-layers"]
    assert topos["gpuscale-0-network-layers"].name == "kai-gpuscale-0-network-layers"
    assert [lv["nodeLabel"] for lv in topos["gpuscale-0-network-layers"].inputs["spec"]["levels"]] == [
        "topology.kubernetes.io/zone", "kubernetes.io/hostname"]
