"""The whole platform from one ``PlatformSpec``: nodes (Karpenter), scheduling (KAI), replicas (vLLM + autoscalers).

Order matters where there is no data dependency: Helm charts install the CRDs that later custom resources use
(Karpenter -> NodePools, KAI -> Queues/Topology, LWS -> LeaderWorkerSets, prometheus-operator -> PodMonitors,
KEDA -> ScaledObjects), so each custom resource ``depends_on`` its chart. Cross-layer checks run first: a spec whose
layers disagree is refused before a single resource is registered.
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from gpuscale.checks import checked_sizing
from gpuscale.components.cpu_node_pool import CpuNodePool, CpuNodePoolArgs
from gpuscale.components.efa_device_plugin import EfaDevicePlugin, EfaDevicePluginArgs
from gpuscale.components.eks_cluster import EksCluster, EksClusterArgs
from gpuscale.components.gpu_node_pool import GpuNodePool, GpuNodePoolArgs
from gpuscale.components.kai_scheduler import KaiScheduler, KaiSchedulerArgs
from gpuscale.components.kai_topology import KaiTopology, KaiTopologyArgs
from gpuscale.components.karpenter_controller import KarpenterController, KarpenterControllerArgs
from gpuscale.components.keda_operator import KedaOperator, KedaOperatorArgs
from gpuscale.components.lws_controller import LwsController, LwsControllerArgs
from gpuscale.components.nvidia_device_plugin import NvidiaDevicePlugin, NvidiaDevicePluginArgs
from gpuscale.components.prometheus_adapter import PrometheusAdapter, PrometheusAdapterArgs
from gpuscale.components.prometheus_stack import PrometheusStack, PrometheusStackArgs
from gpuscale.components.queue_tree import QueueTree, QueueTreeArgs
from gpuscale.components.role_autoscaler import RoleAutoscaler, RoleAutoscalerArgs
from gpuscale.components.vllm_service import VllmService, VllmServiceArgs
from gpuscale.manifests import autoscaling, vllm
from gpuscale.manifests.karpenter import efa_pools
from gpuscale.spec.base import Spec
from gpuscale.spec.platform import PlatformSpec

__all__ = ["InferencePlatform", "InferencePlatformArgs"]


class InferencePlatformArgs(Spec):
    """The platform's only input: the validated spec."""

    spec: PlatformSpec
    """Everything the stack deploys."""


class InferencePlatform(pulumi.ComponentResource):
    """EKS + Karpenter GPU pools + KAI queues + vLLM services with one autoscaler per role.

    Creates ``<name>-aws`` (AWS provider for the spec's region), ``<name>-cluster`` (EksCluster),
    ``<name>-karpenter``, ``<name>-cpu`` and ``<name>-<pool>`` node pools, ``<name>-device-plugin``,
    ``<name>-efa-device-plugin`` (when a pool has ``efa: true``),
    ``<name>-prometheus`` (optional), ``<name>-kai``, ``<name>-queues``, ``<name>-topology``, ``<name>-lws`` and
    ``<name>-keda`` / ``<name>-prometheus-adapter`` when a model needs them, ``<name>-ns-<namespace>``, and per model
    ``<name>-<model>`` (VllmService) with ``<name>-<model>-<role>`` (RoleAutoscaler).
    """

    cluster_name: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    """Secret."""
    endpoint: pulumi.Output[str]
    """EKS API endpoint."""
    node_pool_names: pulumi.Output[list[str]]
    queue_names: pulumi.Output[list[str]]
    model_endpoints: pulumi.Output[dict[str, str]]
    """In-cluster URL of each model's OpenAI-compatible API."""

    def __init__(self, name: str, args: InferencePlatformArgs, *, opts: pulumi.ResourceOptions | None = None) -> None:
        spec = args.spec
        sizing = checked_sizing(spec)  # a spec whose layers disagree is refused before any resource registers
        super().__init__("gpuscale:index:InferencePlatform", name, None, opts)

        env = spec.environment
        aws_provider = aws.Provider(
            f"{name}-aws", region=env.aws_region,
            default_tags=aws.ProviderDefaultTagsArgs(tags={**env.tags, "gpuscale.io/environment": env.name}),
            opts=pulumi.ResourceOptions(parent=self),
        )
        on_aws = pulumi.ResourceOptions(parent=self, providers=[aws_provider])
        cluster = EksCluster(f"{name}-cluster", EksClusterArgs.from_spec(spec), opts=on_aws)
        in_cluster = pulumi.ResourceOptions(parent=self, providers=[aws_provider, cluster.provider])

        # Layer 1: nodes
        karpenter = KarpenterController(
            f"{name}-karpenter", KarpenterControllerArgs.from_spec(spec), cluster_name=cluster.cluster_name, opts=in_cluster,
        )
        cpu = CpuNodePool(
            f"{name}-cpu", CpuNodePoolArgs.from_spec(spec), node_role_name=karpenter.node_role_name,
            depends_on=[karpenter.chart], opts=in_cluster,
        )
        gpu_pools = [
            GpuNodePool(
                f"{name}-{pool.name}", GpuNodePoolArgs.from_spec(spec, pool.name), node_role_name=karpenter.node_role_name,
                depends_on=[karpenter.chart], opts=in_cluster,
            )
            for pool in spec.topology.gpu_pools
        ]
        NvidiaDevicePlugin(f"{name}-device-plugin", NvidiaDevicePluginArgs.from_spec(spec), opts=in_cluster)
        if efa_pools(spec):
            EfaDevicePlugin(f"{name}-efa-device-plugin", EfaDevicePluginArgs.from_spec(spec), opts=in_cluster)

        # monitoring first: KAI, KEDA and the vLLM PodMonitors use prometheus-operator's CRDs
        monitoring: list[pulumi.Resource] = []
        if spec.observability.install_prometheus_stack:
            monitoring.append(PrometheusStack(f"{name}-prometheus", PrometheusStackArgs.from_spec(spec), opts=in_cluster).chart)

        # Layer 2: scheduling
        kai = KaiScheduler(
            f"{name}-kai", KaiSchedulerArgs(platform=spec),
            opts=pulumi.ResourceOptions(parent=self, providers=[aws_provider, cluster.provider], depends_on=monitoring),
        )
        queues = QueueTree(f"{name}-queues", QueueTreeArgs(platform=spec), depends_on=[kai.chart], opts=in_cluster)
        KaiTopology(f"{name}-topology", KaiTopologyArgs(platform=spec), depends_on=[kai.chart], opts=in_cluster)

        # Layer 3: replicas
        serving_deps: list[pulumi.Resource] = [kai.chart, *queues.queues.values(), *monitoring]
        if vllm.needs_lws(sizing):
            serving_deps.append(LwsController(f"{name}-lws", LwsControllerArgs(), opts=in_cluster).chart)
        scaler_deps: list[pulumi.Resource] = []
        if autoscaling.needs_keda(spec):
            scaler_deps.append(KedaOperator(f"{name}-keda", KedaOperatorArgs.from_spec(spec), depends_on=monitoring, opts=in_cluster).chart)
        if autoscaling.needs_prometheus_adapter(spec):
            scaler_deps.append(PrometheusAdapter(
                f"{name}-prometheus-adapter", PrometheusAdapterArgs.from_spec(spec), depends_on=monitoring, opts=in_cluster,
            ).chart)
        namespaces = {
            ns: k8s.core.v1.Namespace(
                f"{name}-ns-{ns}", metadata={"name": ns, "labels": {"app.kubernetes.io/managed-by": "gpuscale"}},
                opts=in_cluster,
            )
            for ns in vllm.serving_namespaces(spec)
        }
        endpoints: dict[str, pulumi.Output[str]] = {}
        for model in spec.models:
            service = VllmService(
                f"{name}-{model.name}", VllmServiceArgs.from_platform(spec, sizing, model.name),
                cluster_name=cluster.cluster_name, depends_on=[namespaces[model.serving.namespace], *serving_deps],
                opts=in_cluster,
            )
            endpoints[model.name] = service.endpoint
            for role in model.serving.roles:
                RoleAutoscaler(
                    f"{name}-{model.name}-{role}", RoleAutoscalerArgs.from_platform(spec, sizing, model.name, role),
                    depends_on=[service.workloads[role], *scaler_deps], opts=in_cluster,
                )

        self.cluster_name = cluster.cluster_name
        self.kubeconfig = pulumi.Output.secret(cluster.kubeconfig)
        self.endpoint = cluster.endpoint
        self.node_pool_names = pulumi.Output.all(*[p.node_pool_name for p in gpu_pools], cpu.node_pool_name)
        self.queue_names = queues.queue_names
        self.model_endpoints = pulumi.Output.all(**endpoints)
        self.register_outputs({
            "cluster_name": self.cluster_name, "kubeconfig": self.kubeconfig, "endpoint": self.endpoint,
            "node_pool_names": self.node_pool_names, "queue_names": self.queue_names, "model_endpoints": self.model_endpoints,
        })

