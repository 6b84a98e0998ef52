"""PrometheusAdapter under mocks: custom metrics only, pointed at the spec's Prometheus."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gpuscale import versions
from gpuscale.components import PrometheusStack, PrometheusStackArgs
from gpuscale.components.prometheus_adapter import PrometheusAdapter, PrometheusAdapterArgs
from gpuscale.manifests.autoscaling import prometheus_adapter_values
from tests.components.support import named, run
from tests.specs import small_spec


def test_chart_is_pinned_and_leaves_external_metrics_to_keda() -> None:
    spec = small_spec()
    records = run(lambda: PrometheusAdapter("adapter", PrometheusAdapterArgs.from_spec(spec)))
    (chart,) = [r for r in records if r.type == "kubernetes:helm.sh/v4:Chart"]
    (ns,) = [r for r in records if r.type == "kubernetes:core/v1:Namespace"]
    assert chart.inputs["chart"] == "prometheus-adapter"
    assert chart.inputs["version"] == versions.PROMETHEUS_ADAPTER.version
    assert chart.inputs["repositoryOpts"] == {"repo": "https://prometheus-community.github.io/helm-charts"}
    assert chart.inputs["namespace"] == ns.inputs["metadata"]["name"] == "prometheus-adapter"
    values = chart.inputs["values"]
    assert values == prometheus_adapter_values(spec.observability.prometheus_url)
    assert values["rules"]["external"] == []
    assert values["prometheus"]["url"] == "http://kube-prometheus-stack-prometheus.monitoring.svc"


def test_the_prometheus_url_may_be_the_stacks_output_and_a_bad_one_is_refused_at_once() -> None:
    def program() -> None:
        prom = PrometheusStack("prom", PrometheusStackArgs())
        PrometheusAdapter("adapter", PrometheusAdapterArgs(prometheus_url=prom.prometheus_url))

    records = run(program)
    chart = named(records, "adapter-chart")
    assert chart.inputs["values"]["prometheus"]["url"] == "http://kube-prometheus-stack-prometheus.monitoring.svc"
    assert named(records, "prom-chart").urn in chart.dependencies
    with pytest.raises(ValidationError, match="is not a Prometheus URL: the scheme must be http"):
        PrometheusAdapterArgs(prometheus_url="prometheus:9090")  # the stack file's own check, before any resource
