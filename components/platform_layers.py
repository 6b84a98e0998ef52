"""Everything in the cluster, composed once: layer 1 (Karpenter, its CPU and GPU pools, the device plugins), the
monitoring (kube-prometheus-stack, DCGM exporter), layer 2 (KAI, the queue tree, the Topology, LWS), the scalers
(KEDA, prometheus-adapter), then layer 3 (``serving_layer``).

``InferencePlatform`` calls it on the EKS cluster it creates. The real-engine tier (``e2e/pulumi_engine_program.py``)
calls it on a local control plane with ``charts=False`` (no chart repository can be reached there: every component
that installs a Helm chart is left out, its CRDs installed beside the program) and ``aws=False`` (no AWS endpoint: a
pool whose component creates an EC2 placement group is left out whole, and no model gets an S3 Pod Identity role).
So the objects the engine deploys are composed by the code the product runs, with the same logical names, args and
dependencies, and what is left out is returned with the reason (``PlatformLayers.left_out``).

A function, not a ComponentResource: the pieces keep the caller as their parent, so their URNs (and every stack
already deployed) stay as they were.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi

from gpuscale.components.cpu_node_pool import CpuNodePool, CpuNodePoolArgs
from gpuscale.components.dcgm_exporter import DcgmExporter, DcgmExporterArgs
from gpuscale.components.efa_device_plugin import EfaDevicePlugin, EfaDevicePluginArgs
from gpuscale.components.gpu_node_pool import GpuNodePool, GpuNodePoolArgs
from gpuscale.components.inputs import StrInput
from gpuscale.components.kai_scheduler import KaiScheduler, KaiSchedulerArgs
from gpuscale.components.kai_topology import KaiTopology, KaiTopologyArgs
from gpuscale.components.karpenter_controller import KarpenterController, KarpenterControllerArgs
from gpuscale.components.keda_operator import KedaOperator, KedaOperatorArgs
from gpuscale.components.lws_controller import LwsController, LwsControllerArgs
from gpuscale.components.nvidia_device_plugin import NvidiaDevicePlugin, NvidiaDevicePluginArgs
from gpuscale.components.prometheus_adapter import PrometheusAdapter, PrometheusAdapterArgs
from gpuscale.components.prometheus_stack import PrometheusStack, PrometheusStackArgs
from gpuscale.components.queue_tree import QueueTree, QueueTreeArgs
from gpuscale.components.serving_layer import OnCluster, ServingLayerArgs, serving_layer
from gpuscale.manifests import autoscaling, vllm
from gpuscale.manifests.karpenter import efa_pools
from gpuscale.manifests.namespaces import PROMETHEUS_STACK_NAMESPACE
from gpuscale.sizing import PlatformSizing
from gpuscale.spec.environment import ExistingSubnetsSpec
from gpuscale.spec.platform import PlatformSpec

__all__ = ["CHART_LEFT_OUT", "PLACEMENT_LEFT_OUT", "PlatformLayers", "PlatformLayersArgs", "aws_left_out",
           "platform_layers"]

CHART_LEFT_OUT = "installs a Helm chart: left out by charts=False (its CRDs must be on the cluster already)"
PLACEMENT_LEFT_OUT = ("a GpuNodePool with an EC2 cluster placement group (aws.ec2.PlacementGroup, created before its "
                      "EC2NodeClass): left out by aws=False")


@dataclass(frozen=True)
class PlatformLayersArgs:
    """The checked spec and its sizing, the cluster they go into, and what may be created there (resources and
    Outputs, so a dataclass, not a spec model)."""

    spec: PlatformSpec
    sizing: PlatformSizing
    """``checked_sizing(spec)``: the caller has run the cross-layer checks."""
    cluster_name: StrInput
    """The EKS cluster (Karpenter's discovery tags, the node pools, each model's S3 Pod Identity role)."""
    charts: bool = True
    """Install the components that are Helm charts (Karpenter, the device plugins, kube-prometheus-stack, DCGM
    exporter, KAI, LWS, KEDA, prometheus-adapter, and a model's front door, whose router is the llm-d chart); false
    leaves them out and says so in ``PlatformLayers.left_out``."""
    aws: bool = True
    """Create AWS resources; false leaves out a GPU pool with an EC2 cluster placement group (whose component creates
    the group first) and every model's S3 Pod Identity role (``VllmService`` then warns)."""
    node_role_name: StrInput | None = None
    """The node role the EC2NodeClasses name; ``None``: Karpenter's (``KarpenterController`` creates it). Required
    with ``charts=False``, where Karpenter is left out."""

    def __post_init__(self) -> None:
        if not self.charts and self.node_role_name is None:
            raise ValueError("PlatformLayersArgs(charts=False) leaves Karpenter out, so its node role: give "
                             "node_role_name, the role the EC2NodeClasses name")


@dataclass
class PlatformLayers:
    node_pools: list[GpuNodePool | CpuNodePool]
    """GPU pools first, the CPU pool last (as ``InferencePlatform.node_pool_names`` reports them)."""
    queue_names: pulumi.Output[list[str]]
    endpoints: dict[str, pulumi.Output[str]]
    """Per model, the URL clients call: its front door's, else its service's."""
    left_out: dict[str, str] = field(default_factory=dict)
    """Logical name of a component not created -> why."""


def aws_left_out(name: str, spec: PlatformSpec) -> dict[str, str]:
    """The GPU pools ``aws=False`` leaves out (logical names under ``name``), and why."""
    return {f"{name}-{pool.name}": PLACEMENT_LEFT_OUT for pool in spec.topology.gpu_pools if pool.cluster_placement}


def platform_layers(name: str, args: PlatformLayersArgs, on_cluster: OnCluster) -> PlatformLayers:
    """Create everything in the cluster for ``args.spec``; every piece is named ``<name>-...`` as
    ``InferencePlatform`` names its children, with the options ``on_cluster(*after)`` gives."""
    return _Layers(name, args, on_cluster).compose()


class _Layers:
    def __init__(self, name: str, args: PlatformLayersArgs, on_cluster: OnCluster) -> None:
        self.name, self.args, self.spec, self.on = name, args, args.spec, on_cluster
        self.left_out: dict[str, str] = {}

    def chart(self, component: str) -> bool:
        """Whether the chart component ``<name>-<component>`` is created; when not, it is recorded as left out."""
        if not self.args.charts:
            self.left_out[f"{self.name}-{component}"] = CHART_LEFT_OUT
        return self.args.charts

    def compose(self) -> PlatformLayers:
        pools, node_charts = self.nodes()
        monitoring, prometheus_url = self.monitoring()
        queues, scheduling = self.scheduling(monitoring)
        scalers = self.scalers(monitoring, prometheus_url)
        layer = serving_layer(self.name, ServingLayerArgs(
            spec=self.spec, sizing=self.args.sizing, prometheus_url=prometheus_url,
            cluster_name=self.args.cluster_name if self.args.aws else None, front_doors=self.args.charts,
            monitoring=monitoring, scheduling=scheduling, scalers=scalers, node_charts=node_charts,
        ), self.on)
        return PlatformLayers(pools, queues.queue_names, layer.endpoints, {**self.left_out, **layer.left_out})

    def nodes(self) -> tuple[list[GpuNodePool | CpuNodePool], list[pulumi.Resource]]:
        """Layer 1: Karpenter, its CPU and GPU pools, the device plugins; returns the pools (GPU pools first) and
        Karpenter's chart (it installs the CapacityBuffer CRD the model headroom needs)."""
        name, spec, cluster_name = self.name, self.spec, self.args.cluster_name
        node_role_name = self.args.node_role_name
        charts: list[pulumi.Resource] = []
        if self.chart("karpenter"):
            karpenter = KarpenterController(
                f"{name}-karpenter", KarpenterControllerArgs.from_spec(spec, cluster_name=cluster_name), opts=self.on(),
            )
            node_role_name = karpenter.node_role_name if node_role_name is None else node_role_name
            charts.append(karpenter.chart)
        assert node_role_name is not None  # PlatformLayersArgs refuses charts=False without it
        # existing subnets are not tagged for discovery: the node pools name them
        net = spec.environment.networking
        subnets = net.private_subnet_ids if isinstance(net, ExistingSubnetsSpec) else None
        skipped = {} if self.args.aws else aws_left_out(name, spec)
        self.left_out.update(skipped)
        pools: list[GpuNodePool | CpuNodePool] = [
            GpuNodePool(
                f"{name}-{pool.name}",
                GpuNodePoolArgs.from_spec(spec, pool.name, cluster_name=cluster_name, node_role_name=node_role_name,
                                          subnet_ids=subnets),
                opts=self.on(*charts),
            )
            for pool in spec.topology.gpu_pools if f"{name}-{pool.name}" not in skipped
        ]
        pools.append(CpuNodePool(  # listed last, as node_pool_names reports them
            f"{name}-cpu",
            CpuNodePoolArgs.from_spec(spec, cluster_name=cluster_name, node_role_name=node_role_name,
                                      subnet_ids=subnets),
            opts=self.on(*charts),
        ))
        if self.chart("device-plugin"):
            NvidiaDevicePlugin(f"{name}-device-plugin", NvidiaDevicePluginArgs.from_spec(spec), opts=self.on())
        if efa_pools(spec) and self.chart("efa-device-plugin"):
            EfaDevicePlugin(f"{name}-efa-device-plugin", EfaDevicePluginArgs.from_spec(spec), opts=self.on())
        return pools, charts

    def monitoring(self) -> tuple[list[pulumi.Resource], StrInput]:
        """kube-prometheus-stack when the spec installs it (KAI, KEDA and the vLLM PodMonitors use its CRDs), and
        the Prometheus URL the autoscalers query."""
        spec = self.spec
        prometheus_url: StrInput = spec.observability.prometheus_url
        monitoring: list[pulumi.Resource] = []
        if spec.observability.install_prometheus_stack and self.chart("prometheus"):
            prometheus = PrometheusStack(f"{self.name}-prometheus", PrometheusStackArgs.from_spec(spec), opts=self.on())
            monitoring.append(prometheus.chart)
            if prometheus_url == autoscaling.prometheus_stack_url(PROMETHEUS_STACK_NAMESPACE):
                prometheus_url = prometheus.prometheus_url  # the same URL, carrying the release as a dependency
        if self.chart("dcgm-exporter"):  # GPU health (XID, ECC), scraped for alerts, never an autoscaling input
            DcgmExporter(f"{self.name}-dcgm-exporter", DcgmExporterArgs.from_spec(spec), opts=self.on(*monitoring))
        return monitoring, prometheus_url

    def scheduling(self, monitoring: list[pulumi.Resource]) -> tuple[QueueTree, list[pulumi.Resource]]:
        """Layer 2: KAI, the queue tree, the Topology and LWS; returns the queues and what the serving pods wait
        for."""
        name, spec = self.name, self.spec
        kai: list[pulumi.Resource] = []
        if self.chart("kai"):
            kai.append(KaiScheduler(f"{name}-kai", KaiSchedulerArgs.from_spec(spec), opts=self.on(*monitoring)).chart)
        queues = QueueTree(f"{name}-queues", QueueTreeArgs.from_spec(spec), opts=self.on(*kai))
        topology = KaiTopology(f"{name}-topology", KaiTopologyArgs.from_spec(spec), opts=self.on(*kai))
        serving_deps: list[pulumi.Resource] = [*kai, *queues.queues.values(), topology, *monitoring]
        if vllm.needs_lws(self.args.sizing) and self.chart("lws"):
            serving_deps.append(LwsController(f"{name}-lws", LwsControllerArgs(), opts=self.on()).chart)
        return queues, serving_deps

    def scalers(self, monitoring: list[pulumi.Resource], prometheus_url: StrInput) -> list[pulumi.Resource]:
        """KEDA and prometheus-adapter, when a model's autoscalers need them."""
        name, spec = self.name, self.spec
        scaler_deps: list[pulumi.Resource] = []
        if autoscaling.needs_keda(spec) and self.chart("keda"):
            scaler_deps.append(
                KedaOperator(f"{name}-keda", KedaOperatorArgs.from_spec(spec), opts=self.on(*monitoring)).chart
            )
        if autoscaling.needs_prometheus_adapter(spec) and self.chart("prometheus-adapter"):
            scaler_deps.append(PrometheusAdapter(
                f"{name}-prometheus-adapter",
                PrometheusAdapterArgs(prometheus_url=prometheus_url), opts=self.on(*monitoring),
            ).chart)
        return scaler_deps
