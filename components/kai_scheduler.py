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
from gpuscale.components.helm_release import namespaced_chart
from gpuscale.manifests.kai import KAI_NAMESPACE, kai_chart_values
from gpuscale.spec.base import Spec
from gpuscale.spec.platform import PlatformSpec


class KaiSchedulerArgs(Spec):
    """Inputs of ``KaiScheduler``: the platform spec (its observability settings decide the metrics wiring)."""

    platform: PlatformSpec
    """The validated platform spec."""
    namespace: str = KAI_NAMESPACE
    """Namespace of the release; created by the component. Workloads must not run in it."""


class KaiScheduler(pulumi.ComponentResource):
    """The KAI Scheduler Helm release and its namespace.

    Creates ``<name>-namespace`` (Namespace) and ``<name>-chart`` (``helm.sh/v4`` Chart: CRDs, operator, scheduler,
    binder, podgrouper, admission webhooks, default PriorityClasses). Queue and Topology objects must wait for
    ``chart`` (it installs their CRDs and the validating webhooks): pass it to ``QueueTree``/``KaiTopology``.
    See https://github.com/kai-scheduler/KAI-Scheduler (docs/quickstart).
    """

    chart: k8s.helm.v4.Chart
    """The Helm release; a dependency for every KAI custom resource."""
    namespace: pulumi.Output[str]
    """Namespace KAI runs in."""
    chart_version: pulumi.Output[str]
    """Pinned chart version."""

    def __init__(self, name: str, args: KaiSchedulerArgs, *, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuscale:index:KaiScheduler", name, None, opts)
        _, self.chart = namespaced_chart(
            self, name, release="kai-scheduler", pin=versions.KAI_SCHEDULER, namespace=args.namespace,
            values=kai_chart_values(args.platform),
        )
        self.namespace = pulumi.Output.from_input(args.namespace)
        self.chart_version = pulumi.Output.from_input(versions.KAI_SCHEDULER.version)
        self.register_outputs({"namespace": self.namespace, "chart_version": self.chart_version})
