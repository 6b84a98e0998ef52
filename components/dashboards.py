"""Grafana dashboards as ConfigMaps the kube-prometheus-stack Grafana sidecar loads, one per model.

The dashboards are built (pure, tested against the triggers and alerts they mirror) in ``gpuscale.dashboards``; this
component only creates them. Needs a Grafana whose dashboard sidecar watches the label ``grafana_dashboard: "1"`` in
every namespace: the defaults of the kube-prometheus-stack chart gpuscale installs (``PrometheusStack``;
``gpuscale.dashboards.configmap`` cites the chart's values).
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from gpuscale.components.children import child_opts, claim, object_name
from gpuscale.components.inputs import Namespace, StrInput
from gpuscale.dashboards.configmap import DashboardConfigMap, config_maps, model_config_map
from gpuscale.sizing import PlatformSizing
from gpuscale.spec.base import Spec
from gpuscale.spec.platform import PlatformSpec

__all__ = ["Dashboards", "DashboardsArgs"]


class DashboardsArgs(Spec):
    """The dashboards to create, and where they live."""

    dashboards: list[DashboardConfigMap]
    """Built by ``from_platform`` (every model's) or ``for_model`` (one model's)."""
    namespace: Namespace | None = None
    """Namespace of the ConfigMaps (e.g. ``ns.metadata.name``); default each model's ``serving.namespace``."""

    @classmethod
    def from_platform(cls, spec: PlatformSpec, sizing: PlatformSizing) -> DashboardsArgs:
        return cls(dashboards=config_maps(spec, sizing))

    @classmethod
    def for_model(cls, spec: PlatformSpec, sizing: PlatformSizing, model_name: str, *,
                  namespace: StrInput | None = None) -> DashboardsArgs:
        return cls(dashboards=[model_config_map(spec, sizing, model_name)], namespace=namespace)


class Dashboards(pulumi.ComponentResource):
    """Creates ``<name>-<ConfigMap name>`` (a ConfigMap labelled ``grafana_dashboard: "1"``, the dashboard JSON as its
    one data key ``<uid>.json``) per dashboard. The kubernetes provider is inherited from ``opts``; put the model's
    Namespace in ``opts.depends_on``."""

    config_map_names: pulumi.Output[list[str]]
    """Names of the ConfigMaps created."""

    def __init__(self, name: str, args: DashboardsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuscale:index:Dashboards", name, None, opts)
        created: list[k8s.core.v1.ConfigMap] = []
        for board in args.dashboards:
            namespace = args.namespace if args.namespace is not None else board.namespace
            claim(self, f"Dashboards {name!r}", "kubernetes", "ConfigMap", board.name, scope=namespace,
                  fix="create each model's dashboard once (InferencePlatform already creates them for its models)")
            meta = board.metadata()
            created.append(k8s.core.v1.ConfigMap(
                f"{name}-{board.name}",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=board.name, namespace=namespace, labels=meta["labels"]),
                data=board.data(), opts=child_opts(self, opts),
            ))
        self.config_map_names = pulumi.Output.all(*[object_name(c) for c in created]).apply(list)
        self.register_outputs({"config_map_names": self.config_map_names})
