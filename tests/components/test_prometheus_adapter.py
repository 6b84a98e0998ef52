"""PrometheusAdapter under mocks: custom metrics only, pointed at the spec's Prometheus."""

from __future__ import annotations

from collections.abc import Callable

from gpuscale import versions
from gpuscale.components.prometheus_adapter import PrometheusAdapter, PrometheusAdapterArgs
from gpuscale.manifests.autoscaling import prometheus_adapter_values
from gpuscale.spec.platform import PlatformSpec
from gpuscale.synth.mocks import RecordedResource

Run = Callable[..., list[RecordedResource]]


def test_chart_is_pinned_and_leaves_external_metrics_to_keda(run_pulumi: Run, stack_specs: dict[str, PlatformSpec]) -> None:
    spec = stack_specs["staging"]
    records = run_pulumi(lambda: PrometheusAdapter("adapter", PrometheusAdapterArgs.from_spec(spec)))
    (chart,) = [r for r in records if r.type == "kubernetes:helm.sh/v4:Chart"]
    (ns,) = [r for r in records if r.type == "kubernetes:core/v1:Namespace"]
    assert chart.inputs["chart"] == "prometheus-adapter"
    assert chart.inputs["version"] == versions.PROMETHEUS_ADAPTER.version == "5.3.0"
    assert chart.inputs["repositoryOpts"] == {"repo": "https://prometheus-community.github.io/helm-charts"}
    assert chart.inputs["namespace"] == ns.inputs["metadata"]["name"] == "prometheus-adapter"
    values = chart.inputs["values"]
    assert values == prometheus_adapter_values(spec.observability.prometheus_url)
    assert values["rules"]["external"] == []
    assert values["prometheus"]["url"] == "http://kube-prometheus-stack-prometheus.monitoring.svc"
