"""The namespaces gpuscale's charts use are the chart components' defaults, and no model may run in one."""

from __future__ import annotations

import pytest

from gpuscale.components import (
    DcgmExporterArgs,
    KaiSchedulerArgs,
    KarpenterControllerArgs,
    KedaOperatorArgs,
    LwsControllerArgs,
    NvidiaDevicePluginArgs,
    PrometheusAdapterArgs,
    PrometheusStackArgs,
)
from gpuscale.manifests.namespaces import CHART_NAMESPACES, RESERVED_NAMESPACES, namespace_problem

CHART_ARGS = (DcgmExporterArgs, KaiSchedulerArgs, KarpenterControllerArgs, KedaOperatorArgs, LwsControllerArgs,
              NvidiaDevicePluginArgs, PrometheusAdapterArgs, PrometheusStackArgs)


def test_the_reserved_list_is_where_the_charts_are_installed() -> None:
    defaults = {cls.model_fields["namespace"].default for cls in CHART_ARGS}
    assert defaults == CHART_NAMESPACES
    assert {"kube-system", "kube-public", "kube-node-lease"} <= RESERVED_NAMESPACES


@pytest.mark.parametrize(
    ("namespace", "problem"),
    [
        ("inference", None),
        ("team-a-llm", None),
        ("monitoring", "belongs to Kubernetes or a controller gpuscale installs"),
        ("kube-public", "belongs to Kubernetes or a controller gpuscale installs"),
        ("Inference", "is not a Kubernetes namespace"),
        ("team_a", "is not a Kubernetes namespace"),
        ("-team", "is not a Kubernetes namespace"),
        ("a" * 64, "is not a Kubernetes namespace"),
    ],
)
def test_namespace_problem(namespace: str, problem: str | None) -> None:
    found = namespace_problem(namespace)
    assert (found is None) if problem is None else (found is not None and problem in found)
