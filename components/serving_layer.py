"""Layer 3, composed once: the serving namespaces, the alert rules and dashboards, and per model its ``VllmService``,
spare-node ``CapacityBufferSet`` or ``PlaceholderPodSet``, ``FrontDoor`` and one ``RoleAutoscaler`` per role.

``platform_layers`` calls it (for ``InferencePlatform`` and the real-engine tier, ``e2e/pulumi_engine_program.py``)
with the charts it installed before (Prometheus stack, KAI, LWS, KEDA, Karpenter) as what each piece waits for, or,
without charts, with none and without front doors (their router is a Helm chart). ``ModelOnCluster`` calls its
per-model half, ``model_serving``, for its one model in the caller's namespace. So every program that serves a model
runs this composition, not a copy that can drift from it.

A function, not a ComponentResource: the pieces keep the caller as their parent, so their URNs (and every stack
already deployed) stay as they were.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from gpuscale import labels
from gpuscale.components.alert_rules import AlertRules, AlertRulesArgs
from gpuscale.components.capacity_buffer import CapacityBufferSet, CapacityBufferSetArgs
from gpuscale.components.dashboards import Dashboards, DashboardsArgs
from gpuscale.components.front_door import FrontDoor, FrontDoorArgs
from gpuscale.components.inputs import StrInput
from gpuscale.components.placeholder_pods import PlaceholderPodSet, PlaceholderPodSetArgs
from gpuscale.components.role_autoscaler import RoleAutoscaler, RoleAutoscalerArgs
from gpuscale.components.vllm_service import VllmService, VllmServiceArgs
from gpuscale.manifests import vllm
from gpuscale.sizing import PlatformSizing
from gpuscale.spec.model import ModelDeployment
from gpuscale.spec.platform import PlatformSpec

__all__ = ["ModelServing", "ServingLayer", "ServingLayerArgs", "model_serving", "serving_layer"]

FRONT_DOOR_LEFT_OUT = "a FrontDoor, whose router installs a Helm chart (llm-d): left out by front_doors=False"

OnCluster = Callable[..., pulumi.ResourceOptions]
"""``on_cluster(*after)``: the options of an in-cluster piece (the caller's parent and providers) that waits for
``after``."""


@dataclass(frozen=True)
class ServingLayerArgs:
    """The checked spec and its sizing, and what the pieces wait for (resources, so a dataclass, not a spec model)."""

    spec: PlatformSpec
    sizing: PlatformSizing
    """``checked_sizing(spec)``: the caller has run the cross-layer checks."""
    prometheus_url: StrInput
    """What every autoscaler queries (an Output carrying the Prometheus release as a dependency, or a plain URL)."""
    cluster_name: StrInput | None = None
    """The EKS cluster, for each model's S3 Pod Identity role; ``None`` creates none (``VllmService`` warns)."""
    front_doors: bool = True
    """Create each front-door model's ``FrontDoor`` (false: leave them out, and say so in ``ServingLayer.left_out``)."""
    monitoring: Sequence[pulumi.Resource] = ()
    """The Prometheus stack's chart (the PrometheusRule and PodMonitor CRDs, Grafana)."""
    scheduling: Sequence[pulumi.Resource] = ()
    """What a model's workloads wait for: KAI's chart, the queues, the Topology, LWS."""
    scalers: Sequence[pulumi.Resource] = ()
    """What the autoscalers wait for: the KEDA and prometheus-adapter charts."""
    node_charts: Sequence[pulumi.Resource] = ()
    """What the spare-node buffers wait for: Karpenter's chart (the CapacityBuffer CRD)."""


@dataclass
class ServingLayer:
    namespaces: dict[str, k8s.core.v1.Namespace]
    endpoints: dict[str, pulumi.Output[str]]
    """Per model, the URL clients call: its front door's, else its service's."""
    left_out: dict[str, str] = field(default_factory=dict)
    """Logical name of a piece not created -> why."""


def serving_layer(name: str, args: ServingLayerArgs, on_cluster: OnCluster) -> ServingLayer:
    """Create layer 3 for ``args.spec``; every piece is named ``<name>-...`` as ``InferencePlatform`` names them."""
    spec, sizing = args.spec, args.sizing
    namespaces = {
        ns: k8s.core.v1.Namespace(
            f"{name}-ns-{ns}", metadata={"name": ns, "labels": {labels.MANAGED_BY_LABEL: labels.MANAGED_BY}},
            opts=on_cluster(),
        )
        for ns in vllm.serving_namespaces(spec)
    }
    if spec.observability.install_prometheus_stack:  # the PrometheusRule CRD and Grafana come with the stack
        AlertRules(f"{name}-alerts", AlertRulesArgs.from_platform(spec, sizing),
                   opts=on_cluster(*namespaces.values(), *args.monitoring))
        Dashboards(f"{name}-dashboards", DashboardsArgs.from_platform(spec, sizing), opts=on_cluster(*namespaces.values()))
    out = ServingLayer(namespaces, {})
    for model in spec.models:
        # plain namespace names (objects built without waiting on an Output), the Namespace as a dependency
        namespace = namespaces[model.serving.namespace]
        served = model_serving(f"{name}-{model.name}", args, model,
                               lambda *after, ns=namespace: on_cluster(ns, *after))
        out.endpoints[model.name] = served.endpoint
        out.left_out.update(served.left_out)
    return out


@dataclass
class ModelServing:
    service: VllmService
    endpoint: pulumi.Output[str]
    """The URL clients call: the front door's, else the service's."""
    left_out: dict[str, str] = field(default_factory=dict)
    """Logical name of a piece not created -> why."""


def model_serving(name: str, args: ServingLayerArgs, model: ModelDeployment, on_cluster: OnCluster, *,
                  namespace: StrInput | None = None) -> ModelServing:
    """One model's layer 3, in ``namespace`` (default its ``serving.namespace``): ``<name>`` (VllmService),
    ``<name>-headroom`` (CapacityBufferSet) or ``<name>-placeholders`` (PlaceholderPodSet) when its headroom pays,
    ``<name>-door`` (FrontDoor) and ``<name>-<role>`` (RoleAutoscaler), each waiting for what it needs. ``serving_layer``
    calls it per model; ``ModelOnCluster`` for its one model (its team's queue as ``args.scheduling``)."""
    spec, sizing = args.spec, args.sizing
    service = VllmService(
        name, VllmServiceArgs.from_platform(spec, sizing, model.name, namespace=namespace, cluster_name=args.cluster_name),
        opts=on_cluster(*args.scheduling),
    )
    out = ModelServing(service, service.endpoint)
    spare = CapacityBufferSetArgs.from_platform(spec, sizing, model.name, namespace=namespace)
    if spare.emits:  # spare nodes for the scale-ups, behind Karpenter's CapacityBuffer gate (the chart's)
        CapacityBufferSet(f"{name}-headroom", spare, opts=on_cluster(*args.node_charts, *service.workloads.values()))
    held = PlaceholderPodSetArgs.from_platform(spec, sizing, model.name, namespace=namespace)
    if held.emits:  # the same spare nodes held by low-priority pods in the model's queue (no gate needed)
        PlaceholderPodSet(f"{name}-placeholders", held,
                          opts=on_cluster(*args.scheduling, *service.workloads.values()))
    if model.has_front_door and not args.front_doors:
        out.left_out[f"{name}-door"] = FRONT_DOOR_LEFT_OUT
    elif model.has_front_door:  # before the model: holds requests while it wakes, and owns the client URL
        door = FrontDoor(
            f"{name}-door", FrontDoorArgs.from_platform(spec, sizing, model.name, namespace=namespace),
            opts=on_cluster(*service.workloads.values(), *args.monitoring),
        )
        out.endpoint = door.endpoint
    for role in model.serving.roles:
        RoleAutoscaler(
            f"{name}-{role}",
            RoleAutoscalerArgs.from_platform(spec, sizing, model.name, role, namespace=namespace,
                                             prometheus_url=args.prometheus_url),
            opts=on_cluster(service.workloads[role], *args.scalers),
        )
    return out
