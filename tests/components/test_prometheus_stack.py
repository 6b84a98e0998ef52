"""PrometheusStack under mocks: kube-prometheus-stack selecting every PodMonitor; its URL carries the release."""

from __future__ import annotations

from typing import Any

from gpuscale import versions
from gpuscale.components import PrometheusStack, PrometheusStackArgs
from gpuscale.manifests.autoscaling import prometheus_stack_values
from tests.components.support import capture, consumer, named, one, run
from tests.specs import small_spec


def test_chart_is_pinned_selects_every_pod_monitor_and_its_url_waits_for_it() -> None:
    spec = small_spec()
    outputs: dict[str, Any] = {}

    def program() -> None:
        stack = PrometheusStack("prom", PrometheusStackArgs.from_spec(spec))
        capture(outputs, "url", stack.prometheus_url)
        consumer("reads-url", stack.prometheus_url)

    records = run(program)
    chart = one(records, "kubernetes:helm.sh/v4:Chart")
    assert chart.inputs["chart"] == "kube-prometheus-stack"
    assert chart.inputs["version"] == versions.KUBE_PROMETHEUS_STACK.version
    assert chart.inputs["name"] == "kube-prometheus-stack" and chart.inputs["namespace"] == "monitoring"
    values = chart.inputs["values"]
    assert values == prometheus_stack_values(spec.observability.scrape_interval_s)
    prom = values["prometheus"]["prometheusSpec"]
    assert prom["podMonitorSelectorNilUsesHelmValues"] is False and prom["podMonitorNamespaceSelector"] == {}
    # the release's Prometheus is exactly the URL the autoscalers query by default, and reading it waits for it
    assert outputs["url"] == spec.observability.prometheus_url
    assert {chart.urn, named(records, "prom-namespace").urn} <= set(named(records, "reads-url").dependencies)
