"""KAI Scheduler, installed beside kube-scheduler: pods opt in with ``schedulerName: kai-scheduler``.

Pinned to ``versions.KAI_SCHEDULER`` = chart ``oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler`` v0.17.0
(the leading "v" is part of the chart version). v0.20.0 and v0.20.1 exist as tags but were RETRACTED upstream
(commit 5922dc7, 2025-11-30): never "upgrade" to them. ``helm rollback`` is unsupported by this chart; downgrade by
uninstalling and installing. See ``research/upstream-facts.md`` section 2.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from gpuscale import versions
from gpuscale.components.helm_release import after_chart, namespaced_chart
from gpuscale.components.inputs import PrometheusUrl
from gpuscale.manifests.kai import KAI_NAMESPACE, kai_chart_values, kai_prometheus_url
from gpuscale.spec.base import Spec
from gpuscale.spec.platform import PlatformSpec
from gpuscale.versions import HelmChartPin


class KaiSchedulerArgs(Spec):
    """The KAI release: chart pin, namespace, and the Prometheus its components report to."""

    chart: HelmChartPin = versions.KAI_SCHEDULER
    """Pinned KAI chart (CRDs, operator, scheduler, binder, podgrouper, admission webhooks)."""
    namespace: str = KAI_NAMESPACE
    """Namespace of the release; created by the component. Workloads must not run in it."""
    prometheus_url: PrometheusUrl | None = None
    """A prometheus-operator Prometheus (e.g. ``PrometheusStack.prometheus_url``): KAI creates ServiceMonitors for
    its components and reports to it. ``None``: KAI's metrics are not wired."""

    @classmethod
    def from_spec(cls, spec: PlatformSpec) -> KaiSchedulerArgs:
        return cls(prometheus_url=kai_prometheus_url(spec))


class KaiScheduler(pulumi.ComponentResource):
    """The KAI Scheduler Helm release and its namespace.

    Creates ``<name>-namespace`` (Namespace) and ``<name>-chart`` (``helm.sh/v4`` Chart: CRDs, operator, scheduler,
    binder, podgrouper, admission webhooks, default PriorityClasses). Queue and Topology objects must wait for
    ``chart`` (it installs their CRDs and the validating webhooks): put it in ``QueueTree``/``KaiTopology``'s
    ``opts.depends_on``. With ``prometheus_url``, prometheus-operator's CRDs must exist first (``PrometheusStack``
    in ``opts.depends_on``). See https://github.com/kai-scheduler/KAI-Scheduler (docs/quickstart).
    """

    chart: k8s.helm.v4.Chart
    """The Helm release; a dependency for every KAI custom resource."""
    namespace: pulumi.Output[str]
    """Namespace KAI runs in."""
    chart_version: pulumi.Output[str]
    """Pinned chart version (known once the release is installed)."""

    def __init__(self, name: str, args: KaiSchedulerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuscale:index:KaiScheduler", name, None, opts)
        url = args.prometheus_url
        values = (kai_chart_values(prometheus_url=url) if url is None or isinstance(url, str)
                  else pulumi.Output.from_input(url).apply(lambda u: kai_chart_values(prometheus_url=u)))
        ns, self.chart = namespaced_chart(
            self, name, f"KaiScheduler {name!r}", release="kai-scheduler", pin=args.chart, namespace=args.namespace,
            values=values, opts=opts,
        )
        self.namespace = ns.metadata.name
        self.chart_version = after_chart(self.chart, args.chart.version)
        self.register_outputs({"namespace": self.namespace, "chart_version": self.chart_version})
