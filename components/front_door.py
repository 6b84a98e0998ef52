"""The front door of one model: llm-d's router (standalone endpoint picker with flow control) with its Envoy.

Why this front door and not the KEDA HTTP add-on (``docs/layer3-serving.md``, "The front door"): it bounds its hold
queue and answers 503 when a held request runs out of time (the add-on's v0.15.0 queue is unbounded and answers 504),
it is model-aware (prefix-, queue- and KV-aware picking for aggregated models, a ``model_name`` on its queue metric),
and it stands before the P/D router unchanged for disaggregated models. Bodies and values come from
``gpuscale.manifests.front_door`` (pure, unit-tested); this module only resolves Inputs and wires resources.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from gpuscale import versions
from gpuscale.components.children import child_opts, claim, known_model
from gpuscale.components.inputs import Namespace, StrInput, lift, resolved
from gpuscale.manifests import front_door, vllm
from gpuscale.manifests.front_door import FrontDoorSettings
from gpuscale.sizing import PlatformSizing
from gpuscale.spec.base import Spec
from gpuscale.spec.platform import PlatformSpec
from gpuscale.versions import HelmChartPin

__all__ = ["FrontDoor", "FrontDoorArgs", "FrontDoorSettings"]


class FrontDoorArgs(Spec):
    """One model's front door (``door``: hold limit, queue bound, endpoints, all from sizing), where it runs (which
    may be an Output, e.g. ``ns.metadata.name``) and the chart."""

    door: FrontDoorSettings
    """``FrontDoorSettings.from_platform(spec, sizing, model_name)``."""
    namespace: Namespace | None = None
    """Namespace of the release and the Service; default ``door.namespace`` (the model's). It must exist."""
    chart: HelmChartPin = versions.LLM_D_ROUTER
    """Pinned ``llm-d-router-standalone``."""

    @classmethod
    def from_platform(
        cls, spec: PlatformSpec, sizing: PlatformSizing, model_name: str, *, namespace: StrInput | None = None,
    ) -> FrontDoorArgs:
        known_model(spec, model_name)
        return cls(door=FrontDoorSettings.from_platform(spec, sizing, model_name), namespace=namespace)


def _part(body: dict[str, Any] | pulumi.Output[dict[str, Any]], key: str) -> Any:
    return lift(body, lambda b: b[key])


class FrontDoor(pulumi.ComponentResource):
    """The holding front door before one model.

    Creates ``<name>-chart`` (``helm.sh/v4`` Chart ``llm-d-router-standalone``, release ``<model>-door``: the EPP with
    flow control and its Envoy sidecar on on-demand nodes, one per node, RBAC to watch the model's pods, a
    ServiceMonitor), ``<name>-service`` (the Service ``<model>`` on port 8000, the URL clients call) and ``<name>-pdb``
    (``minAvailable: 1`` over the EPP pods). Expects the namespace, prometheus-operator's ServiceMonitor
    CRD (``PrometheusStack``), and the model's serving pods (``VllmService``: behind a door its aggregated Service is
    ``<model>-aggregated``, its P/D router's ``<model>-pd``); put the ones this program creates in ``opts.depends_on``.
    The model's ``RoleAutoscaler`` wakes the model on the door's queue.
    """

    endpoint: pulumi.Output[str]
    """``http://<model>.<ns>.svc.cluster.local:8000``, the URL clients call."""
    service_name: pulumi.Output[str]
    """The door's Service (the model's name)."""
    release_name: pulumi.Output[str]
    """The Helm release (``<model>-door``); the EPP is ``<release>-epp``."""

    def __init__(self, name: str, args: FrontDoorArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuscale:index:FrontDoor", name, None, opts)
        plain = args.door
        claim(self, f"FrontDoor {name!r}", "kubernetes", "Service", plain.model,
              scope=args.namespace if args.namespace is not None else plain.namespace,
              fix="one front door per model and namespace")
        settings = resolved(plain, namespace=args.namespace)
        release = front_door.release_name(plain.model)
        chart = k8s.helm.v4.Chart(
            f"{name}-chart",
            name=release,
            chart=args.chart.chart,
            version=args.chart.version,
            repository_opts=k8s.helm.v4.RepositoryOptsArgs(repo=args.chart.repo) if args.chart.repo else None,
            namespace=lift(settings, lambda s: s.namespace),
            values=lift(settings, front_door.chart_values),
            opts=child_opts(self, opts),
        )
        svc = lift(settings, front_door.service_body)
        service = k8s.core.v1.Service(
            f"{name}-service", metadata=_part(svc, "metadata"), spec=_part(svc, "spec"), opts=child_opts(self, opts, chart),
        )
        pdb = lift(settings, front_door.pdb_body)
        k8s.policy.v1.PodDisruptionBudget(f"{name}-pdb", metadata=_part(pdb, "metadata"), spec=_part(pdb, "spec"),
                                          opts=child_opts(self, opts, chart))
        self.service_name = service.metadata.name
        self.release_name = pulumi.Output.from_input(release)
        self.endpoint = pulumi.Output.all(service.metadata.name, service.metadata.namespace).apply(
            lambda a: vllm.endpoint_url(a[0], a[1])
        )
        self.register_outputs({"endpoint": self.endpoint, "service_name": self.service_name, "release_name": self.release_name})
