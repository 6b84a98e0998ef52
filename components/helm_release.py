"""One way to install a pinned Helm chart into its own namespace, shared by the chart components."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from gpuscale import labels
from gpuscale.components.children import child_opts, claim
from gpuscale.versions import HelmChartPin


def namespaced_chart(
    owner: pulumi.Resource, name: str, who: str, *, release: str, pin: HelmChartPin, namespace: str,
    values: pulumi.Input[dict[str, Any]], opts: pulumi.ResourceOptions | None,
) -> tuple[k8s.core.v1.Namespace, k8s.helm.v4.Chart]:
    """``<name>-namespace`` and ``<name>-chart`` (release ``release`` at ``pin``), both children of ``owner``.

    ``helm.sh/v4`` Charts render client-side, so each object is its own Pulumi resource: diffs, policies and
    ``depends_on`` see them one by one. Both wait for what ``opts.depends_on`` names; a second release of the same
    chart into the same namespace of the same cluster is refused.
    """
    fix = "install it once and share it, or give the second one another namespace (its args' namespace field)"
    claim(owner, who, "kubernetes", "Namespace", namespace, fix=fix)
    claim(owner, who, "kubernetes", "Helm release", release, scope=namespace, fix=fix)
    ns = k8s.core.v1.Namespace(
        f"{name}-namespace",
        metadata={"name": namespace, "labels": {labels.MANAGED_BY_LABEL: labels.MANAGED_BY}},
        opts=child_opts(owner, opts),
    )
    chart = k8s.helm.v4.Chart(
        f"{name}-chart",
        name=release,
        chart=pin.chart,
        version=pin.version,
        repository_opts=k8s.helm.v4.RepositoryOptsArgs(repo=pin.repo) if pin.repo else None,
        namespace=ns.metadata.name,
        values=values,
        opts=child_opts(owner, opts, ns),
    )
    return ns, chart


def after_chart(chart: k8s.helm.v4.Chart, value: str) -> pulumi.Output[str]:
    """``value`` as an Output that carries the chart: whatever consumes it waits for the release's objects."""
    return chart.resources.apply(lambda _: value)
