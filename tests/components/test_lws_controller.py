"""LwsController under mocks: the pinned OCI chart, the image pinned to the release, KAI (not Volcano) gangs groups."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuscale import versions
from gpuscale.components.lws_controller import LwsController, LwsControllerArgs
from gpuscale.manifests.vllm import lws_chart_values, needs_lws
from gpuscale.sizing import size_platform
from gpuscale.spec.platform import PlatformSpec
from gpuscale.stackfile import validate_config
from gpuscale.synth.mocks import RecordedResource
from tests.specs import multi_node_aggregated

Run = Callable[..., list[RecordedResource]]


def test_chart_is_pinned(run_pulumi: Run) -> None:
    records = run_pulumi(lambda: LwsController("lws", LwsControllerArgs()))
    (chart,) = [r for r in records if r.type == "kubernetes:helm.sh/v4:Chart"]
    (ns,) = [r for r in records if r.type == "kubernetes:core/v1:Namespace"]
    assert chart.inputs["chart"] == "oci://registry.k8s.io/lws/charts/lws"
    assert chart.inputs["version"] == versions.LWS.version == "0.10.0"
    assert "repositoryOpts" not in chart.inputs  # OCI chart
    assert chart.inputs["namespace"] == ns.inputs["metadata"]["name"] == "lws-system"
    assert ns.urn in chart.dependencies
    assert chart.inputs["values"] == lws_chart_values()


def test_installed_only_for_multi_node_models(stack_specs: dict[str, PlatformSpec], raw_stack: Callable[[str], dict[str, Any]]) -> None:
    assert not any(needs_lws(size_platform(s)) for s in stack_specs.values())
    assert needs_lws(size_platform(validate_config(multi_node_aggregated(raw_stack("prod")), "t")))
