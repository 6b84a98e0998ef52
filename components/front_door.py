"""The front door of one model: llm-d's router (standalone endpoint picker with flow control) with its Envoy.

Why this front door and not the KEDA HTTP add-on (``docs/layer3-serving.md``, "The front door"): it bounds its hold
queue and answers 503 when a held request runs out of time (the add-on's v0.15.0 queue is unbounded and answers 504),
it is model-aware (prefix-, queue- and KV-aware picking for aggregated models, a ``model_name`` on its queue metric),
and it stands before the P/D router unchanged for disaggregated models. Bodies and values come from
``gpuscale.manifests.front_door`` (pure, unit-tested); this module only wires resources.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from gpuscale import versions
from gpuscale.manifests import front_door
from gpuscale.manifests.front_door import FrontDoorSettings
from gpuscale.sizing import PlatformSizing
from gpuscale.spec.base import Namespace, Spec
from gpuscale.spec.platform import PlatformSpec
from gpuscale.versions import HelmChartPin

__all__ = ["FrontDoor", "FrontDoorArgs", "FrontDoorSettings"]


class FrontDoorArgs(Spec):
    """One model's front door (``door``: hold limit, queue bound, endpoints, all from sizing) and the chart it runs."""

    door: FrontDoorSettings
    """``FrontDoorSettings.from_platform(spec, sizing, model_name)``."""
    chart: HelmChartPin = versions.LLM_D_ROUTER
    """Pinned ``llm-d-router-standalone``."""
    namespace: Namespace | None = None
    """Namespace of the release and the Service; default ``door.namespace`` (the model's). It must exist."""

    @classmethod
    def from_platform(cls, spec: PlatformSpec, sizing: PlatformSizing, model_name: str) -> FrontDoorArgs:
        return cls(door=FrontDoorSettings.from_platform(spec, sizing, model_name))


def _child(owner: pulumi.Resource, opts: pulumi.ResourceOptions | None, *after: pulumi.Resource) -> pulumi.ResourceOptions:
    """A child of ``owner`` that waits for ``after`` and for what the caller's ``opts.depends_on`` names (the engine
    does not hold a component's children back for the component's own ``depends_on``)."""
    inherited = list(opts.depends_on) if opts is not None and isinstance(opts.depends_on, list) else []
    return pulumi.ResourceOptions(parent=owner, depends_on=[*after, *inherited])


class FrontDoor(pulumi.ComponentResource):
    """The holding front door before one model.

    Creates ``<name>-chart`` (``helm.sh/v4`` Chart ``llm-d-router-standalone``, release ``<model>-door``: the EPP with
    flow control and its Envoy sidecar, RBAC to watch the model's pods, a ServiceMonitor) and ``<name>-service`` (the
    Service ``<model>`` on port 8000, the URL clients call). Expects the namespace, prometheus-operator's ServiceMonitor
    CRD, and the model's serving pods (``VllmService``, whose aggregated Service is then ``<model>-aggregated`` and P/D
    router Service ``<model>-pd``); put the ones this program creates in ``opts.depends_on``. The model's
    ``RoleAutoscaler`` wakes it on the door's queue.
    """

    endpoint: pulumi.Output[str]
    """``http://<model>.<ns>.svc.cluster.local:8000``."""
    service_name: pulumi.Output[str]
    """The door's Service (the model's name)."""
    release_name: pulumi.Output[str]
    """The Helm release (``<model>-door``); the EPP is ``<release>-epp``."""

    def __init__(self, name: str, args: FrontDoorArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuscale:index:FrontDoor", name, None, opts)
        door = args.door
        if args.namespace is not None and args.namespace != door.namespace:
            door = FrontDoorSettings.model_validate({**door.model_dump(), "namespace": args.namespace})
        release = front_door.release_name(door.model)
        chart = k8s.helm.v4.Chart(
            f"{name}-chart",
            name=release,
            chart=args.chart.chart,
            version=args.chart.version,
            repository_opts=k8s.helm.v4.RepositoryOptsArgs(repo=args.chart.repo) if args.chart.repo else None,
            namespace=door.namespace,
            values=front_door.chart_values(door),
            opts=_child(self, opts),
        )
        svc = front_door.service_body(door)
        service = k8s.core.v1.Service(
            f"{name}-service", metadata=svc["metadata"], spec=svc["spec"], opts=_child(self, opts, chart),
        )
        self.service_name = service.metadata.name
        self.release_name = pulumi.Output.from_input(release)
        self.endpoint = pulumi.Output.all(service.metadata.name, service.metadata.namespace).apply(
            lambda a: front_door.endpoint_url(a[0], a[1])
        )
        self.register_outputs({"endpoint": self.endpoint, "service_name": self.service_name, "release_name": self.release_name})
