"""The LeaderWorkerSet controller: a multi-node vLLM replica is one LWS group (leader + workers, one pod per node).

Pinned to ``versions.LWS`` (chart ``oci://registry.k8s.io/lws/charts/lws`` 0.10.0 = LWS v0.10.0, whose CRD the tests
validate against). Helm installs CRDs only on first install, never on upgrade: upgrade the LWS CRD separately when the
pin moves. Gang scheduling is KAI's job (its podgrouper makes one PodGroup per LWS group), so LWS's own
``gangSchedulingManagement`` (Volcano only) stays off. See https://lws.sigs.k8s.io/docs/installation/
(``research/upstream-facts.md`` 4, ``research/serving-facts.md`` 4).
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from gpuscale import versions
from gpuscale.components.helm_release import namespaced_chart
from gpuscale.manifests.namespaces import LWS_NAMESPACE
from gpuscale.manifests.vllm import lws_chart_values
from gpuscale.spec.base import Spec
from gpuscale.versions import HelmChartPin


class LwsControllerArgs(Spec):
    """Chart pin and namespace of the LWS controller."""

    chart: HelmChartPin = versions.LWS
    """Pinned ``lws`` chart (OCI)."""
    namespace: str = LWS_NAMESPACE
    """Namespace created for the controller (the upstream default). Install it only when
    ``manifests.vllm.needs_lws(sizing)``: some model has multi-node replicas."""


class LwsController(pulumi.ComponentResource):
    """The LWS controller and its CRDs.

    Creates ``<name>-namespace`` (Namespace) and ``<name>-chart`` (``helm.sh/v4`` Chart). Every LeaderWorkerSet must
    wait for ``chart``: put it in ``VllmService``'s ``opts.depends_on``.
    """

    chart: k8s.helm.v4.Chart
    """The Helm release; a dependency for every LeaderWorkerSet."""
    namespace: pulumi.Output[str]
    """Namespace the controller runs in."""

    def __init__(self, name: str, args: LwsControllerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuscale:index:LwsController", name, None, opts)
        ns, self.chart = namespaced_chart(
            self, name, f"LwsController {name!r}", release="lws", pin=args.chart, namespace=args.namespace,
            values=lws_chart_values(), opts=opts,
        )
        self.namespace = ns.metadata.name
        self.register_outputs({"namespace": self.namespace})
