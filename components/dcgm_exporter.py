"""NVIDIA's DCGM exporter on every GPU node: XID, ECC and remapped-row counters for alerts, never for autoscaling.

A GPU that raised an XID or an uncorrectable ECC error keeps its pods Running while they fail requests; nothing in
vLLM's metrics says which GPU it is. The exporter publishes the device counters per GPU (and the pod holding it) so an
alert can name the node to drain. Autoscalers stay on vLLM's signals: the spec and the policy pack refuse every DCGM
name as a trigger. Values: ``gpuscale.manifests.dcgm``.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from gpuscale import versions
from gpuscale.components.helm_release import namespaced_chart
from gpuscale.manifests import dcgm
from gpuscale.manifests.namespaces import DCGM_EXPORTER_NAMESPACE
from gpuscale.spec.base import Spec
from gpuscale.spec.platform import PlatformSpec
from gpuscale.versions import HelmChartPin

RELEASE = "dcgm-exporter"


class DcgmExporterArgs(Spec):
    """Chart pin, namespace, and whether prometheus-operator's ServiceMonitor CRD is there to scrape it."""

    chart: HelmChartPin = versions.DCGM_EXPORTER
    """Pinned ``dcgm-exporter`` chart."""
    namespace: str = DCGM_EXPORTER_NAMESPACE
    """Namespace created for the DaemonSet."""
    servicemonitor: bool
    """Emit the chart's ServiceMonitor (needs prometheus-operator's CRDs: ``PrometheusStack`` first)."""

    @classmethod
    def from_spec(cls, spec: PlatformSpec) -> DcgmExporterArgs:
        return cls(servicemonitor=spec.observability.install_prometheus_stack)


class DcgmExporter(pulumi.ComponentResource):
    """The ``dcgm-exporter`` DaemonSet on every gpuscale GPU node (``nvidia.com/gpu.present=true``, GPU taint).

    Creates ``<name>-namespace`` and ``<name>-chart``. The kubernetes provider is inherited from ``opts``; with
    ``servicemonitor`` the release must wait for prometheus-operator's CRDs (``opts.depends_on``).
    """

    namespace: pulumi.Output[str]
    chart: k8s.helm.v4.Chart

    def __init__(self, name: str, args: DcgmExporterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuscale:index:DcgmExporter", name, None, opts)
        ns, self.chart = namespaced_chart(
            self, name, f"DcgmExporter {name!r}", release=RELEASE, pin=args.chart, namespace=args.namespace,
            values=dcgm.dcgm_exporter_values(servicemonitor=args.servicemonitor), opts=opts,
        )
        self.namespace = ns.metadata.name
        self.register_outputs({"namespace": self.namespace})
