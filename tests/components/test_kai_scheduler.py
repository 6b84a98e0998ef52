"""KaiScheduler under Pulumi mocks: the pinned chart in its own namespace, without the whole platform spec."""

from __future__ import annotations

from typing import Any

import pulumi

from gpuscale import versions
from gpuscale.components import KaiScheduler, KaiSchedulerArgs, PrometheusStack, PrometheusStackArgs
from gpuscale.manifests.kai import KAI_NAMESPACE, kai_chart_values
from tests.components.support import Records, capture, consumer, named, one, run, stand_in
from tests.specs import small_spec

CHART = "kubernetes:helm.sh/v4:Chart"


def build(args: KaiSchedulerArgs) -> tuple[Records, dict[str, Any]]:
    outputs: dict[str, Any] = {}

    def program() -> None:
        prom = stand_in("prometheus-chart")
        kai = KaiScheduler("kai", args, opts=pulumi.ResourceOptions(depends_on=[prom]))
        capture(outputs, "namespace", kai.namespace)
        capture(outputs, "chart_version", kai.chart_version)
        consumer("reads-namespace", kai.namespace)
        consumer("reads-version", kai.chart_version)

    return run(program), outputs


def test_chart_is_pinned_and_installed_in_its_namespace() -> None:
    records, outputs = build(KaiSchedulerArgs())
    ns, chart = one(records, "kubernetes:core/v1:Namespace"), one(records, CHART)
    assert (ns.name, chart.name) == ("kai-namespace", "kai-chart")
    assert ns.parent_urn == chart.parent_urn == one(records, "gpuscale:index:KaiScheduler").urn
    assert ns.inputs["metadata"]["name"] == KAI_NAMESPACE == "kai-scheduler"
    assert chart.inputs["chart"] == versions.KAI_SCHEDULER.chart
    assert chart.inputs["version"] == versions.KAI_SCHEDULER.version
    assert chart.inputs["namespace"] == KAI_NAMESPACE and chart.inputs["name"] == "kai-scheduler"
    assert ns.urn in chart.dependencies
    assert named(records, "prometheus-chart").urn in chart.dependencies  # opts.depends_on reaches the release
    assert outputs == {"namespace": KAI_NAMESPACE, "chart_version": versions.KAI_SCHEDULER.version}


def test_outputs_come_from_the_namespace_and_the_release() -> None:
    records, _ = build(KaiSchedulerArgs())
    assert one(records, "kubernetes:core/v1:Namespace").urn in named(records, "reads-namespace").dependencies
    assert one(records, CHART).urn in named(records, "reads-version").dependencies


def test_without_prometheus_the_metrics_are_not_wired() -> None:
    records, _ = build(KaiSchedulerArgs())
    values = one(records, CHART).inputs["values"]
    assert values == kai_chart_values(prometheus_url=None)
    assert values["prometheus"] == {"enabled": False}
    assert values["global"]["clusterAutoscaling"] is True  # Karpenter sees pending fractional-GPU demand
    assert values["defaultQueue"]["createDefaultQueue"] is False  # QueueTree owns every queue


def test_prometheus_url_may_be_the_stacks_output() -> None:
    def program() -> None:
        prom = PrometheusStack("prom", PrometheusStackArgs())
        KaiScheduler("kai", KaiSchedulerArgs(prometheus_url=prom.prometheus_url))

    records = run(program)
    chart = named(records, "kai-chart")
    assert chart.inputs["values"]["prometheus"] == {
        "enabled": True, "externalPrometheusUrl": "http://kube-prometheus-stack-prometheus.monitoring.svc:9090"}
    assert named(records, "prom-chart").urn in chart.dependencies


def test_from_spec_follows_the_observability_settings() -> None:
    assert KaiSchedulerArgs.from_spec(small_spec()).prometheus_url == small_spec().observability.prometheus_url
    own = small_spec(observability={"install_prometheus_stack": False, "prometheus_url": "http://prom.example:9090"})
    assert KaiSchedulerArgs.from_spec(own).prometheus_url is None
