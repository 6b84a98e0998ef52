"""kube-prometheus-stack: prometheus-operator (PodMonitor/ServiceMonitor CRDs) and the Prometheus autoscalers query.

Pinned to ``versions.KUBE_PROMETHEUS_STACK`` = chart 88.0.0, the release that moved the chart to prometheus-operator
v0.93.0 (prometheus-community/helm-charts PR #7152), the operator version of the PodMonitor CRD the tests validate
against. Installed only when ``observability.install_prometheus_stack``; otherwise bring a Prometheus that selects
PodMonitors in the model namespaces and point ``observability.prometheus_url`` at it.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from gpuscale import versions
from gpuscale.components.children import child_opts
from gpuscale.components.helm_release import after_chart, namespaced_chart
from gpuscale.manifests.autoscaling import (
    PROMETHEUS_STACK_RELEASE,
    prometheus_stack_url,
    prometheus_stack_values,
    prometheus_storage_class_body,
)
from gpuscale.manifests.namespaces import PROMETHEUS_STACK_NAMESPACE
from gpuscale.spec.base import Spec
from gpuscale.spec.platform import PlatformSpec
from gpuscale.versions import HelmChartPin


class PrometheusStackArgs(Spec):
    """Chart pin, namespace and scrape interval."""

    chart: HelmChartPin = versions.KUBE_PROMETHEUS_STACK
    """Pinned ``kube-prometheus-stack`` chart."""
    namespace: str = PROMETHEUS_STACK_NAMESPACE
    """Namespace created for the stack; the default ``observability.prometheus_url`` points here."""
    scrape_interval_s: int = 15
    """Global scrape interval (PodMonitors set their own)."""

    @classmethod
    def from_spec(cls, spec: PlatformSpec) -> PrometheusStackArgs:
        return cls(scrape_interval_s=spec.observability.scrape_interval_s)


class PrometheusStack(pulumi.ComponentResource):
    """Prometheus, prometheus-operator, its CRDs and the default exporters.

    Creates ``<name>-storage-class`` (gp3, EBS CSI; Prometheus' volume), ``<name>-namespace`` (Namespace) and
    ``<name>-chart`` (``helm.sh/v4`` Chart, release ``kube-prometheus-stack``). Prometheus selects every
    PodMonitor/ServiceMonitor in every namespace. PodMonitors must wait for ``chart`` (it installs their CRD): put it
    in ``VllmService``'s ``opts.depends_on``.
    """

    chart: k8s.helm.v4.Chart
    """The Helm release; a dependency for every PodMonitor/ServiceMonitor."""
    namespace: pulumi.Output[str]
    """Namespace the stack runs in."""
    prometheus_url: pulumi.Output[str]
    """In-cluster URL of Prometheus; a consumer of it (KEDA triggers, prometheus-adapter) waits for the release."""

    def __init__(self, name: str, args: PrometheusStackArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuscale:index:PrometheusStack", name, None, opts)
        sc = prometheus_storage_class_body()
        storage = k8s.storage.v1.StorageClass(
            f"{name}-storage-class", metadata=sc["metadata"], provisioner=sc["provisioner"], parameters=sc["parameters"],
            volume_binding_mode=sc["volumeBindingMode"], reclaim_policy=sc["reclaimPolicy"],
            allow_volume_expansion=sc["allowVolumeExpansion"], opts=child_opts(self, opts),
        )
        ns, self.chart = namespaced_chart(
            self, name, f"PrometheusStack {name!r}", release=PROMETHEUS_STACK_RELEASE, pin=args.chart,
            namespace=args.namespace, values=prometheus_stack_values(args.scrape_interval_s),
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[storage])),
        )
        self.namespace = ns.metadata.name
        self.prometheus_url = pulumi.Output.all(self.namespace, after_chart(self.chart, "")).apply(
            lambda a: prometheus_stack_url(a[0])
        )
        self.register_outputs({"namespace": self.namespace, "prometheus_url": self.prometheus_url})
