"""KedaOperator under mocks: the pinned KEDA chart in its namespace, ServiceMonitors only with prometheus-operator."""

from __future__ import annotations

from collections.abc import Callable

import pulumi_kubernetes as k8s

from gpuscale import versions
from gpuscale.components.keda_operator import KedaOperator, KedaOperatorArgs
from gpuscale.manifests.autoscaling import keda_chart_values
from gpuscale.spec.platform import PlatformSpec
from gpuscale.synth.mocks import RecordedResource

Run = Callable[..., list[RecordedResource]]


def test_chart_is_pinned(run_pulumi: Run, prod_spec: PlatformSpec) -> None:
    args = KedaOperatorArgs.from_spec(prod_spec)

    def program() -> None:
        prom = k8s.core.v1.Namespace("prom-stand-in", metadata={"name": "prom-stand-in"})
        KedaOperator("keda", args, depends_on=[prom])

    records = run_pulumi(program)
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


def test_servicemonitors_follow_the_prometheus_stack(raw_stack) -> None:  # type: ignore[no-untyped-def]
    from gpuscale.stackfile import validate_config

    raw = raw_stack("dev")
    raw["observability"] = {"install_prometheus_stack": False, "prometheus_url": "http://prom.example:9090"}
    assert KedaOperatorArgs.from_spec(validate_config(raw, "t")).servicemonitors is False
