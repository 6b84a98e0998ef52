"""Pulumi ComponentResources, one per module, importable as ``gpuscale.components``.

Each takes ``(name, args: <Component>Args, *, <Pulumi inputs>, opts=None)``; most args models have a
``from_spec(spec)`` (or ``from_platform(spec, sizing, ...)``) constructor so they can be used one by one.
"""

from gpuscale.components.cpu_node_pool import CpuNodePool, CpuNodePoolArgs
from gpuscale.components.eks_cluster import EksCluster, EksClusterArgs
from gpuscale.components.front_door import FrontDoor, FrontDoorArgs
from gpuscale.components.gpu_node_pool import GpuNodePool, GpuNodePoolArgs
from gpuscale.components.inference_platform import InferencePlatform, InferencePlatformArgs
from gpuscale.components.kai_scheduler import KaiScheduler, KaiSchedulerArgs
from gpuscale.components.kai_topology import KaiTopology, KaiTopologyArgs
from gpuscale.components.karpenter_controller import KarpenterController, KarpenterControllerArgs
from gpuscale.components.keda_operator import KedaOperator, KedaOperatorArgs
from gpuscale.components.lws_controller import LwsController, LwsControllerArgs
from gpuscale.components.nvidia_device_plugin import NvidiaDevicePlugin, NvidiaDevicePluginArgs
from gpuscale.components.pd_router import PdRouter, PdRouterArgs
from gpuscale.components.prometheus_adapter import PrometheusAdapter, PrometheusAdapterArgs
from gpuscale.components.prometheus_stack import PrometheusStack, PrometheusStackArgs
from gpuscale.components.queue_tree import QueueTree, QueueTreeArgs
from gpuscale.components.role_autoscaler import RoleAutoscaler, RoleAutoscalerArgs
from gpuscale.components.vllm_service import VllmService, VllmServiceArgs

__all__ = [
    "CpuNodePool", "CpuNodePoolArgs", "EksCluster", "EksClusterArgs", "FrontDoor", "FrontDoorArgs", "GpuNodePool",
    "GpuNodePoolArgs",
    "InferencePlatform", "InferencePlatformArgs", "KaiScheduler", "KaiSchedulerArgs", "KaiTopology", "KaiTopologyArgs",
    "KarpenterController", "KarpenterControllerArgs", "KedaOperator", "KedaOperatorArgs", "LwsController",
    "LwsControllerArgs", "NvidiaDevicePlugin", "NvidiaDevicePluginArgs", "PdRouter", "PdRouterArgs",
    "PrometheusAdapter", "PrometheusAdapterArgs", "PrometheusStack", "PrometheusStackArgs", "QueueTree",
    "QueueTreeArgs", "RoleAutoscaler", "RoleAutoscalerArgs", "VllmService", "VllmServiceArgs",
]
