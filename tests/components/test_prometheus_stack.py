"""PrometheusStack under mocks: kube-prometheus-stack matching prometheus-operator v0.93.0, all PodMonitors selected."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuscale import versions
from gpuscale.components.prometheus_stack import PrometheusStack, PrometheusStackArgs
from gpuscale.manifests.autoscaling import prometheus_stack_values
from gpuscale.spec.platform import PlatformSpec
from gpuscale.synth.mocks import RecordedResource

Run = Callable[..., list[RecordedResource]]


def test_chart_is_pinned_and_selects_every_pod_monitor(run_pulumi: Run, prod_spec: PlatformSpec) -> None:
    outputs: dict[str, Any] = {}

    def program() -> None:
        stack = PrometheusStack("prom", PrometheusStackArgs.from_spec(prod_spec))
        stack.prometheus_url.apply(lambda v: outputs.__setitem__("url", v))

    records = run_pulumi(program)
    (chart,) = [r for r in records if r.type == "kubernetes:helm.sh/v4:Chart"]
    assert chart.inputs["chart"] == "kube-prometheus-stack"
    assert chart.inputs["version"] == versions.KUBE_PROMETHEUS_STACK.version == "88.0.0"
    assert "v0.93.0" in versions.KUBE_PROMETHEUS_STACK.upstream_release
    assert chart.inputs["name"] == "kube-prometheus-stack" and chart.inputs["namespace"] == "monitoring"
    values = chart.inputs["values"]
    assert values == prometheus_stack_values(prod_spec.observability.scrape_interval_s)
    spec = values["prometheus"]["prometheusSpec"]
    assert spec["podMonitorSelectorNilUsesHelmValues"] is False and spec["podMonitorNamespaceSelector"] == {}
    # the release's Prometheus is exactly the URL the autoscalers query by default
    assert outputs["url"] == prod_spec.observability.prometheus_url
