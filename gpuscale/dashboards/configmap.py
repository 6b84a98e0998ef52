"""Each model's dashboard as a ConfigMap the Grafana sidecar of kube-prometheus-stack loads.

The sidecar's settings are the chart's defaults at the pinned version (``versions.KUBE_PROMETHEUS_STACK``, 88.0.0,
``charts/kube-prometheus-stack/values.yaml`` L1536-1542 at tag ``kube-prometheus-stack-88.0.0``):
``grafana.sidecar.dashboards.label: grafana_dashboard``, ``labelValue: "1"``, ``searchNamespace: ALL``. gpuscale
leaves them as they are (``autoscaling.prometheus_stack_values`` sets no ``grafana`` key), so a ConfigMap so labelled
in any namespace is loaded; each model's lives in the model's namespace, beside its PrometheusRule, and goes with it.
The datasource the dashboards select by default is the chart's own (``grafana.sidecar.datasources``, ``uid:
prometheus``, L1557-1563), through the ``datasource`` variable.
"""

from __future__ import annotations

import json
from typing import Any

from gpuscale import labels
from gpuscale.dashboards.grafana import Dashboard
from gpuscale.dashboards.model_dashboard import model_dashboard
from gpuscale.sizing import PlatformSizing
from gpuscale.spec.base import Spec
from gpuscale.spec.platform import PlatformSpec

SIDECAR_LABEL = "grafana_dashboard"
SIDECAR_LABEL_VALUE = "1"
CONFIGMAP_DATA_LIMIT_BYTES = 1024 * 1024
"""The API server refuses a ConfigMap whose data exceeds 1 MiB (``k8s.io/api/core/v1`` ``ConfigMap`` docs)."""


def config_map_name(model: str) -> str:
    return f"gpuscale-{model}-dashboard"


def dashboard_json(dashboard: Dashboard) -> str:
    """The JSON Grafana reads: keys sorted, so a synth is byte-identical run to run."""
    return json.dumps(dashboard.body(), indent=1, sort_keys=True)


class DashboardConfigMap(Spec):
    """One dashboard and where its ConfigMap lives."""

    name: str
    namespace: str
    dashboard: Dashboard

    @property
    def file_name(self) -> str:
        return f"{self.dashboard.uid}.json"

    def metadata(self, namespace: object = None) -> dict[str, Any]:
        return {"name": self.name, "namespace": namespace if namespace is not None else self.namespace,
                "labels": {labels.MANAGED_BY_LABEL: labels.MANAGED_BY, SIDECAR_LABEL: SIDECAR_LABEL_VALUE}}

    def data(self) -> dict[str, str]:
        text = dashboard_json(self.dashboard)
        if len(text.encode()) > CONFIGMAP_DATA_LIMIT_BYTES:
            raise ValueError(f"dashboard {self.dashboard.uid}: {len(text.encode()):,} bytes of JSON do not fit a "
                             f"ConfigMap ({CONFIGMAP_DATA_LIMIT_BYTES:,} bytes at most)")
        return {self.file_name: text}

    def body(self) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": self.metadata(), "data": self.data()}


def model_config_map(spec: PlatformSpec, sizing: PlatformSizing, model_name: str) -> DashboardConfigMap:
    model = next(x for x in spec.models if x.name == model_name)
    return DashboardConfigMap(name=config_map_name(model.name), namespace=model.serving.namespace,
                              dashboard=model_dashboard(spec, sizing, model.name))


def config_maps(spec: PlatformSpec, sizing: PlatformSizing) -> list[DashboardConfigMap]:
    return [model_config_map(spec, sizing, m.name) for m in spec.models]
