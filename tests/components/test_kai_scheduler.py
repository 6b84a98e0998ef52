"""KaiScheduler under Pulumi mocks: the pinned chart in its own namespace, with the values that matter."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gpuscale import versions
from gpuscale.components.kai_scheduler import KaiScheduler, KaiSchedulerArgs
from gpuscale.components.kai_topology import KaiTopology, KaiTopologyArgs
from gpuscale.components.queue_tree import QueueTree, QueueTreeArgs
from gpuscale.manifests.kai import KAI_NAMESPACE, kai_chart_values
from gpuscale.spec.platform import PlatformSpec
from gpuscale.synth.mocks import RecordedResource

CHART = "kubernetes:helm.sh/v4:Chart"


def build(run_pulumi: Callable[..., list[RecordedResource]], spec: PlatformSpec) -> tuple[list[RecordedResource], dict[str, Any]]:
    outputs: dict[str, Any] = {}

    def program() -> None:
        kai = KaiScheduler("kai", KaiSchedulerArgs(platform=spec))
        kai.namespace.apply(lambda v: outputs.__setitem__("namespace", v))
        kai.chart_version.apply(lambda v: outputs.__setitem__("chart_version", v))
        outputs["chart"] = kai.chart

    return run_pulumi(program), outputs


def test_chart_is_pinned_and_installed_in_its_namespace(run_pulumi, prod_spec: PlatformSpec) -> None:  # type: ignore[no-untyped-def]
    records, outputs = build(run_pulumi, prod_spec)
    (component,) = [r for r in records if r.type == "gpuscale:index:KaiScheduler"]
    (ns,) = [r for r in records if r.type == "kubernetes:core/v1:Namespace"]
    (chart,) = [r for r in records if r.type == CHART]
    assert (ns.name, chart.name) == ("kai-namespace", "kai-chart")
    assert ns.parent_urn == chart.parent_urn == component.urn
    assert ns.inputs["metadata"]["name"] == KAI_NAMESPACE == "kai-scheduler"
    assert chart.inputs["chart"] == "oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler"
    assert chart.inputs["version"] == versions.KAI_SCHEDULER.version == "v0.17.0"  # v0.20.x are retracted
    assert chart.inputs["namespace"] == KAI_NAMESPACE and chart.inputs["name"] == "kai-scheduler"
    assert ns.urn in chart.dependencies  # the namespace exists before the release installs into it
    assert outputs["namespace"] == KAI_NAMESPACE and outputs["chart_version"] == "v0.17.0"
    assert outputs["chart"] is not None


def test_chart_values_are_the_builders(run_pulumi, prod_spec: PlatformSpec) -> None:  # type: ignore[no-untyped-def]
    records, _ = build(run_pulumi, prod_spec)
    (chart,) = [r for r in records if r.type == CHART]
    values = chart.inputs["values"]
    assert values == kai_chart_values(prod_spec)
    assert values["global"]["clusterAutoscaling"] is True  # Karpenter sees pending fractional-GPU demand
    assert values["scheduler"]["placementStrategy"] == "binpack"
    assert values["defaultQueue"]["createDefaultQueue"] is False  # QueueTree owns every queue
    assert values["defaultPriorityClasses"]["enabled"] is True  # the wiring uses inference / train
    assert values["prometheus"]["enabled"] is True
    assert values["prometheus"]["externalPrometheusUrl"] == prod_spec.observability.prometheus_url


@pytest.mark.parametrize("name", ["dev", "staging", "prod"])
def test_every_stack_gets_one_release(run_pulumi, stack_specs: dict[str, PlatformSpec], name: str) -> None:  # type: ignore[no-untyped-def]
    records, _ = build(run_pulumi, stack_specs[name])
    assert [r.type for r in records].count(CHART) == 1


@pytest.mark.parametrize("name", ["dev", "staging", "prod"])
def test_layer2_builds_with_every_custom_resource_after_the_chart(  # type: ignore[no-untyped-def]
    run_pulumi, stack_specs: dict[str, PlatformSpec], name: str,
) -> None:
    spec = stack_specs[name]

    def program() -> None:
        kai = KaiScheduler("kai", KaiSchedulerArgs(platform=spec))
        QueueTree("queues", QueueTreeArgs(platform=spec), depends_on=[kai.chart])
        KaiTopology("topology", KaiTopologyArgs(platform=spec), depends_on=[kai.chart])

    records = run_pulumi(program)
    (chart,) = [r for r in records if r.type == CHART]
    custom = [r for r in records if r.type.startswith(("kubernetes:scheduling.run.ai/", "kubernetes:kai.scheduler/"))]
    kinds = sorted(r.type.rsplit(":", 1)[-1] for r in custom)
    assert kinds == ["Queue"] * len(spec.queues()) + ["Topology"]
    assert all(chart.urn in r.dependencies for r in custom)
