"""Pulumi ComponentResources, one per module, importable as ``gpuscale.components``.

Each takes ``(name, args: <Component>Args, opts=None)``. Args hold what the component needs and nothing more (a GPU
pool and a cluster name; a team tree; one model, its sizing and its wiring); the fields a Pulumi user takes from other
resources (cluster name, node role, subnet and security group ids, namespace, admin ARNs, image, Prometheus URL) accept
Outputs. ``from_spec(spec, ...)``/``from_platform(spec, sizing, ...)`` build them from a ``PlatformSpec``. Providers,
``depends_on``, ``protect`` and transformations come from ``opts`` and reach every child. Each component's docstring
says which other components (or equivalents) it expects on the cluster.
"""

from gpuscale.components.alert_rules import AlertRules, AlertRulesArgs
from gpuscale.components.capacity_buffer import CapacityBufferSet, CapacityBufferSetArgs
from gpuscale.components.children import NameClash, Refused, UnknownName
from gpuscale.components.cpu_node_pool import CpuNodePool, CpuNodePoolArgs
from gpuscale.components.dashboards import Dashboards, DashboardsArgs
from gpuscale.components.dcgm_exporter import DcgmExporter, DcgmExporterArgs
from gpuscale.components.eks_cluster import EksCluster, EksClusterArgs, ExistingSubnets
from gpuscale.components.front_door import FrontDoor, FrontDoorArgs, FrontDoorSettings
from gpuscale.components.gpu_node_pool import GpuNodePool, GpuNodePoolArgs
from gpuscale.components.inference_platform import AwsAssumeRole, InferencePlatform, InferencePlatformArgs
from gpuscale.components.kai_scheduler import KaiScheduler, KaiSchedulerArgs
from gpuscale.components.kai_topology import KaiTopology, KaiTopologyArgs
from gpuscale.components.karpenter_controller import KarpenterController, KarpenterControllerArgs
from gpuscale.components.keda_operator import KedaOperator, KedaOperatorArgs
from gpuscale.components.lws_controller import LwsController, LwsControllerArgs
from gpuscale.components.model_on_cluster import ModelOnCluster, ModelOnClusterArgs
from gpuscale.components.nvidia_device_plugin import NvidiaDevicePlugin, NvidiaDevicePluginArgs
from gpuscale.components.pd_router import PdRouter, PdRouterArgs, RouterSettings
from gpuscale.components.placeholder_pods import PlaceholderPodSet, PlaceholderPodSetArgs
from gpuscale.components.prometheus_adapter import PrometheusAdapter, PrometheusAdapterArgs
from gpuscale.components.prometheus_stack import PrometheusStack, PrometheusStackArgs
from gpuscale.components.queue_tree import QueueTree, QueueTreeArgs
from gpuscale.components.role_autoscaler import AutoscalerSettings, RoleAutoscaler, RoleAutoscalerArgs
from gpuscale.components.vllm_service import ServingSettings, VllmService, VllmServiceArgs

__all__ = [
    "AlertRules",
    "AlertRulesArgs",
    "AutoscalerSettings",
    "AwsAssumeRole",
    "CapacityBufferSet",
    "CapacityBufferSetArgs",
    "CpuNodePool",
    "CpuNodePoolArgs",
    "Dashboards",
    "DashboardsArgs",
    "DcgmExporter",
    "DcgmExporterArgs",
    "EksCluster",
    "EksClusterArgs",
    "ExistingSubnets",
    "FrontDoor",
    "FrontDoorArgs",
    "FrontDoorSettings",
    "GpuNodePool",
    "GpuNodePoolArgs",
    "InferencePlatform",
    "InferencePlatformArgs",
    "KaiScheduler",
    "KaiSchedulerArgs",
    "KaiTopology",
    "KaiTopologyArgs",
    "KarpenterController",
    "KarpenterControllerArgs",
    "KedaOperator",
    "KedaOperatorArgs",
    "LwsController",
    "LwsControllerArgs",
    "ModelOnCluster",
    "ModelOnClusterArgs",
    "NameClash",
    "NvidiaDevicePlugin",
    "NvidiaDevicePluginArgs",
    "PdRouter",
    "PdRouterArgs",
    "PlaceholderPodSet",
    "PlaceholderPodSetArgs",
    "PrometheusAdapter",
    "PrometheusAdapterArgs",
    "PrometheusStack",
    "PrometheusStackArgs",
    "QueueTree",
    "QueueTreeArgs",
    "Refused",
    "RoleAutoscaler",
    "RoleAutoscalerArgs",
    "RouterSettings",
    "ServingSettings",
    "UnknownName",
    "VllmService",
    "VllmServiceArgs",
]
