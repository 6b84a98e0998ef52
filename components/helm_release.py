"""One way to install a pinned Helm chart into its own namespace, shared by the chart components."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from gpuscale import labels
from gpuscale.versions import HelmChartPin


def namespaced_chart(
    owner: pulumi.Resource, name: str, *, release: str, pin: HelmChartPin, namespace: str, values: dict[str, Any],
    depends_on: Sequence[pulumi.Resource] = (),
) -> tuple[k8s.core.v1.Namespace, k8s.helm.v4.Chart]:
    """``<name>-namespace`` and ``<name>-chart`` (release ``release`` at ``pin``), both children of ``owner``.

    ``helm.sh/v4`` Charts render client-side, so each object is its own Pulumi resource: diffs, policies and
    ``depends_on`` see them one by one.
    """
    ns = k8s.core.v1.Namespace(
        f"{name}-namespace",
        metadata={"name": namespace, "labels": {labels.MANAGED_BY_LABEL: labels.MANAGED_BY}},
        opts=pulumi.ResourceOptions(parent=owner),
    )
    chart = k8s.helm.v4.Chart(
        f"{name}-chart",
        name=release,
        chart=pin.chart,
        version=pin.version,
        repository_opts=k8s.helm.v4.RepositoryOptsArgs(repo=pin.repo) if pin.repo else None,
        namespace=namespace,
        values=values,
        opts=pulumi.ResourceOptions(parent=owner, depends_on=[ns, *depends_on]),
    )
    return ns, chart
