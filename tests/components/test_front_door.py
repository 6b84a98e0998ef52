"""FrontDoor: the pinned chart and the model's Service as children, outputs from the Service, the caller's depends_on
on every child, an Output namespace resolved into the objects, one door per model and namespace; and the platform
puts it before a model that may scale to zero."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from gpuscale import versions
from gpuscale.components.children import NameClash
from gpuscale.components.front_door import FrontDoor, FrontDoorArgs
from gpuscale.components.inference_platform import InferencePlatform, InferencePlatformArgs
from gpuscale.manifests import front_door as fd
from gpuscale.sizing import size_platform
from gpuscale.spec.platform import PlatformSpec
from tests.components.support import capture, of_type, run, stand_in
from tests.specs import model, small_spec


def zero_spec() -> PlatformSpec:
    slo = {"ttft_p99_s": 2.0, "itl_p99_s": 0.05, "request_timeout_s": 600, "criticality": "best_effort"}
    return small_spec(models=[model(criticality="best_effort", slo=slo)])


def test_the_door_is_a_chart_and_the_models_service() -> None:
    spec = zero_spec()
    args = FrontDoorArgs.from_platform(spec, size_platform(spec), "m8b")
    outputs: dict[str, Any] = {}

    def program() -> None:
        gate = stand_in("prometheus-crds")
        door = FrontDoor("m8b-door", args, opts=pulumi.ResourceOptions(depends_on=[gate]))
        capture(outputs, "endpoint", door.endpoint)
        capture(outputs, "service", door.service_name)
        capture(outputs, "release", door.release_name)

    records = run(program)
    (component,) = of_type(records, "gpuscale:index:FrontDoor")
    children = {r.name: r for r in records if r.parent_urn == component.urn}
    assert set(children) == {"m8b-door-chart", "m8b-door-service", "m8b-door-pdb"}
    chart, service = children["m8b-door-chart"], children["m8b-door-service"]
    pdb = children["m8b-door-pdb"].inputs
    assert pdb["spec"] == {"minAvailable": 1, "selector": {"matchLabels": fd.epp_selector("m8b")}}
    assert pdb["metadata"]["namespace"] == "inference" and chart.urn in children["m8b-door-pdb"].dependencies
    assert (chart.inputs["chart"], chart.inputs["version"]) == (versions.LLM_D_ROUTER.chart, versions.LLM_D_ROUTER.version)
    assert chart.inputs["name"] == "m8b-door" and chart.inputs["namespace"] == "inference"
    assert chart.inputs["values"]["router"]["epp"]["pluginsConfigFile"] == fd.CONFIG_FILE
    gate = next(r for r in records if r.name == "prometheus-crds")
    assert gate.urn in chart.dependencies and gate.urn in service.dependencies  # the caller's depends_on reaches both
    assert service.inputs["metadata"]["name"] == "m8b"
    assert outputs == {"endpoint": "http://m8b.inference.svc.cluster.local:8000", "service": "m8b", "release": "m8b-door"}


def test_an_output_namespace_lands_in_the_release_and_the_service() -> None:
    spec = zero_spec()
    def program() -> None:
        ns = pulumi.Output.from_input("team-a")
        FrontDoor("d", FrontDoorArgs.from_platform(spec, size_platform(spec), "m8b", namespace=ns))

    records = run(program)
    (chart,) = of_type(records, "kubernetes:helm.sh/v4:Chart")
    (service,) = of_type(records, "kubernetes:core/v1:Service")
    assert chart.inputs["namespace"] == "team-a" and service.inputs["metadata"]["namespace"] == "team-a"
    with pytest.raises(ValueError, match="namespace"):
        FrontDoorArgs.from_platform(spec, size_platform(spec), "m8b", namespace="Not A Namespace")


def test_two_doors_for_one_model_and_namespace_are_refused() -> None:
    spec = zero_spec()
    args = FrontDoorArgs.from_platform(spec, size_platform(spec), "m8b")

    def twice() -> None:
        FrontDoor("a", args)
        FrontDoor("b", args)

    with pytest.raises(NameClash, match="FrontDoor 'b' would create Service inference/m8b"):
        run(twice)


def test_the_platform_puts_the_door_before_a_model_at_zero_and_exports_its_url() -> None:
    outputs: dict[str, Any] = {}

    def program() -> None:
        platform = InferencePlatform("gpuscale", InferencePlatformArgs(spec=zero_spec()))
        capture(outputs, "endpoints", platform.model_endpoints)

    records = run(program)
    (door,) = of_type(records, "gpuscale:index:FrontDoor")
    assert door.name == "gpuscale-m8b-door"
    services = {r.inputs["metadata"]["name"] for r in of_type(records, "kubernetes:core/v1:Service")}
    assert {"m8b", "m8b-aggregated"} <= services  # the door owns the URL; the model's Service moved aside
    assert outputs["endpoints"] == {"m8b": "http://m8b.inference.svc.cluster.local:8000"}
    (scaled,) = [r for r in records if r.type.endswith("ScaledObject")]
    assert any(t["name"] == fd.TRIGGER_NAME for t in scaled.inputs["spec"]["triggers"])


def test_a_warm_model_has_no_door() -> None:
    records = run(lambda: InferencePlatform("gpuscale", InferencePlatformArgs(spec=small_spec())))
    assert not of_type(records, "gpuscale:index:FrontDoor")
