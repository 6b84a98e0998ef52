"""KedaOperator under mocks: the pinned KEDA chart in its namespace, ServiceMonitors only with prometheus-operator."""

from __future__ import annotations

import pulumi

from gpuscale import versions
from gpuscale.components.keda_operator import KedaOperator, KedaOperatorArgs
from gpuscale.manifests.autoscaling import keda_chart_values
from tests.components.support import run, stand_in
from tests.specs import small_spec


def test_chart_is_pinned() -> None:
    args = KedaOperatorArgs.from_spec(small_spec())

    def program() -> None:
        prom = stand_in("prom-stand-in")
        KedaOperator("keda", args, opts=pulumi.ResourceOptions(depends_on=[prom]))

    records = run(program)
    (chart,) = [r for r in records if r.type == "kubernetes:helm.sh/v4:Chart"]
    (ns,) = [r for r in records if r.name == "keda-namespace"]
    (prom,) = [r for r in records if r.name == "prom-stand-in"]
    assert chart.name == "keda-chart" and chart.inputs["name"] == "keda"
    assert chart.inputs["chart"] == "keda" and chart.inputs["version"] == versions.KEDA.version == "2.20.2"
    assert chart.inputs["repositoryOpts"] == {"repo": "https://kedacore.github.io/charts"}
    assert chart.inputs["namespace"] == ns.inputs["metadata"]["name"] == "keda"
    assert ns.urn in chart.dependencies and prom.urn in chart.dependencies
    assert chart.inputs["values"] == keda_chart_values(servicemonitors=True)
    assert chart.inputs["values"]["crds"]["install"] is True  # ScaledObject CRD comes with the chart


def test_servicemonitors_follow_the_prometheus_stack() -> None:
    own = small_spec(observability={"install_prometheus_stack": False, "prometheus_url": "http://prom.example:9090"})
    assert KedaOperatorArgs.from_spec(own).servicemonitors is False
    assert KedaOperatorArgs.from_spec(small_spec()).servicemonitors is True
