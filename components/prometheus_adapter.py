"""prometheus-adapter: serves vLLM gauges as per-pod custom metrics for the ``hpa`` autoscaler backend.

Pinned to ``versions.PROMETHEUS_ADAPTER`` (chart 5.3.0, adapter v0.12.0). Upstream is deprecating the adapter in favour
of KEDA (kubernetes-sigs/prometheus-adapter #701), which is why ``keda`` is gpuscale's default backend; ``hpa`` stays
for clusters that already run the adapter. Only ``custom.metrics.k8s.io`` is served (``rules.external: []``) so it
never fights KEDA for the external metrics API. See ``research/serving-facts.md`` 4.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from gpuscale import versions
from gpuscale.components.helm_release import namespaced_chart
from gpuscale.components.inputs import PrometheusUrl
from gpuscale.manifests.autoscaling import prometheus_adapter_values
from gpuscale.manifests.namespaces import PROMETHEUS_ADAPTER_NAMESPACE
from gpuscale.spec.base import Spec
from gpuscale.spec.platform import PlatformSpec
from gpuscale.versions import HelmChartPin


class PrometheusAdapterArgs(Spec):
    """Chart pin, namespace and the Prometheus to read."""

    chart: HelmChartPin = versions.PROMETHEUS_ADAPTER
    """Pinned ``prometheus-adapter`` chart."""
    namespace: str = PROMETHEUS_ADAPTER_NAMESPACE
    """Namespace created for the adapter (its own, so it never collides with the Prometheus stack's)."""
    prometheus_url: PrometheusUrl
    """Prometheus HTTP endpoint (``observability.prometheus_url``, or ``PrometheusStack.prometheus_url``)."""

    @classmethod
    def from_spec(cls, spec: PlatformSpec) -> PrometheusAdapterArgs:
        return cls(prometheus_url=spec.observability.prometheus_url)


class PrometheusAdapter(pulumi.ComponentResource):
    """The custom-metrics API server the ``hpa`` backend's HorizontalPodAutoscalers read.

    Creates ``<name>-namespace`` (Namespace) and ``<name>-chart`` (``helm.sh/v4`` Chart) with one rule per vLLM gauge,
    renamed ``vllm:x`` -> ``vllm_x``. Expects a Prometheus that scrapes the vLLM PodMonitors at ``prometheus_url``.
    """

    chart: k8s.helm.v4.Chart
    """The Helm release; HPAs need it serving before they can read their metrics."""
    namespace: pulumi.Output[str]
    """Namespace the adapter runs in."""

    def __init__(self, name: str, args: PrometheusAdapterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuscale:index:PrometheusAdapter", name, None, opts)
        url = args.prometheus_url  # a plain URL that is no http(s) URL is refused now, not when the chart renders
        values = (prometheus_adapter_values(url) if isinstance(url, str)
                  else pulumi.Output.from_input(url).apply(prometheus_adapter_values))
        ns, self.chart = namespaced_chart(
            self, name, f"PrometheusAdapter {name!r}", release="prometheus-adapter", pin=args.chart,
            namespace=args.namespace, values=values, opts=opts,
        )
        self.namespace = ns.metadata.name
        self.register_outputs({"namespace": self.namespace})
