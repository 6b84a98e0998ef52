"""KEDA, the default backend of ``RoleAutoscaler``: it turns a Prometheus query into an HPA external metric.

Pinned to ``versions.KEDA`` (chart ``kedacore/keda`` 2.20.2 = KEDA v2.20.2, whose ScaledObject CRD is the one the tests
validate against). KEDA claims ``v1beta1.external.metrics.k8s.io``; prometheus-adapter, when also installed, must
leave it alone (``rules.external: []``). See https://keda.sh/docs/2.20/deploy/ (``research/serving-facts.md`` 4).
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from gpuscale import versions
from gpuscale.components.helm_release import namespaced_chart
from gpuscale.manifests.autoscaling import keda_chart_values
from gpuscale.manifests.namespaces import KEDA_NAMESPACE
from gpuscale.spec.base import Spec
from gpuscale.spec.platform import PlatformSpec
from gpuscale.versions import HelmChartPin


class KedaOperatorArgs(Spec):
    """Chart pin, namespace and whether prometheus-operator CRDs exist for KEDA's own ServiceMonitors."""

    chart: HelmChartPin = versions.KEDA
    """Pinned ``keda`` chart."""
    namespace: str = KEDA_NAMESPACE
    """Namespace created for the operator and its metrics API server."""
    servicemonitors: bool = True
    """Emit ServiceMonitors for KEDA itself (needs the prometheus-operator CRDs)."""

    @classmethod
    def from_spec(cls, spec: PlatformSpec) -> KedaOperatorArgs:
        return cls(servicemonitors=spec.observability.install_prometheus_stack)


class KedaOperator(pulumi.ComponentResource):
    """The KEDA operator and external-metrics API server.

    Creates ``<name>-namespace`` (Namespace) and ``<name>-chart`` (``helm.sh/v4`` Chart with the KEDA CRDs). Every
    ScaledObject must wait for ``chart``: put it in ``RoleAutoscaler``'s ``opts.depends_on``. With
    ``servicemonitors`` on, prometheus-operator's CRDs must exist first (``PrometheusStack`` in ``opts.depends_on``).
    """

    chart: k8s.helm.v4.Chart
    """The Helm release; a dependency for every ScaledObject."""
    namespace: pulumi.Output[str]
    """Namespace KEDA runs in."""

    def __init__(self, name: str, args: KedaOperatorArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuscale:index:KedaOperator", name, None, opts)
        ns, self.chart = namespaced_chart(
            self, name, f"KedaOperator {name!r}", release="keda", pin=args.chart, namespace=args.namespace,
            values=keda_chart_values(args.servicemonitors), opts=opts,
        )
        self.namespace = ns.metadata.name
        self.register_outputs({"namespace": self.namespace})
