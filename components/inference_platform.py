"""The whole platform from one ``PlatformSpec``: nodes (Karpenter), scheduling (KAI), replicas (vLLM + autoscalers).

Order matters where there is no data dependency: Helm charts install the CRDs that later custom resources use
(Karpenter -> NodePools, KAI -> Queues/Topology, LWS -> LeaderWorkerSets, prometheus-operator -> PodMonitors,
KEDA -> ScaledObjects), so each custom resource waits for its chart (``opts.depends_on``). Cross-layer checks run
first: a spec whose layers disagree is refused before a single resource is registered.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
from pydantic import Field

from gpuscale import labels
from gpuscale.components.children import child_opts
from gpuscale.components.cpu_node_pool import CpuNodePool, CpuNodePoolArgs
from gpuscale.components.dcgm_exporter import DcgmExporter, DcgmExporterArgs
from gpuscale.components.efa_device_plugin import EfaDevicePlugin, EfaDevicePluginArgs
from gpuscale.components.eks_cluster import EksCluster, EksClusterArgs
from gpuscale.components.front_door import FrontDoor, FrontDoorArgs
from gpuscale.components.gpu_node_pool import GpuNodePool, GpuNodePoolArgs
from gpuscale.components.inputs import NonEmpty, StrInput
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
from gpuscale.feasibility import checked_sizing
from gpuscale.manifests import autoscaling, vllm
from gpuscale.manifests.karpenter import efa_pools
from gpuscale.manifests.namespaces import PROMETHEUS_STACK_NAMESPACE
from gpuscale.spec.base import Spec
from gpuscale.spec.environment import ExistingSubnetsSpec
from gpuscale.spec.platform import PlatformSpec

__all__ = ["InferencePlatform", "InferencePlatformArgs"]

ASSUME_ROLE_KEYS = {
    "roleArn": "role_arn", "sessionName": "session_name", "externalId": "external_id", "duration": "duration",
    "policy": "policy", "policyArns": "policy_arns", "sourceIdentity": "source_identity", "tags": "tags",
    "transitiveTagKeys": "transitive_tag_keys",
}
"""``aws:assumeRoles`` config keys -> ``aws.ProviderAssumeRoleArgs`` arguments."""


class InferencePlatformArgs(Spec):
    """The validated spec, and how the cluster is named and reached."""

    spec: PlatformSpec
    """Everything the stack deploys."""
    cluster_name: str | None = Field(default=None, pattern=r"^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$")
    """Name of the EKS cluster to create; default ``<component name>-<environment.name>`` (``gpuscale-prod`` for
    the shipped program), so two platforms in one program never share one."""
    kubeconfig_role_arn: NonEmpty | None = None
    """Role the kubeconfig's ``aws eks get-token`` assumes; default the last role of ``aws:assumeRoles`` when
    gpuscale creates the AWS provider."""
    kubeconfig_profile: NonEmpty | None = None
    """AWS profile of the kubeconfig's ``aws eks get-token``; default the AWS provider's profile."""


def assume_roles_from_config(roles: Any) -> list[aws.ProviderAssumeRoleArgs]:
    """``aws:assumeRoles`` stack config as provider arguments; an unknown key is refused, not dropped."""
    if roles is None:
        return []
    if not isinstance(roles, list) or not all(isinstance(r, dict) for r in roles):
        raise ValueError(f"aws:assumeRoles must be a list of objects with roleArn, got {roles!r}")
    out = []
    for i, role in enumerate(roles):
        unknown = sorted(set(role) - set(ASSUME_ROLE_KEYS))
        if unknown or "roleArn" not in role:
            raise ValueError(
                f"aws:assumeRoles[{i}]: needs roleArn and takes only {', '.join(sorted(ASSUME_ROLE_KEYS))}"
                + (f"; unknown: {', '.join(unknown)}" if unknown else "")
            )
        out.append(aws.ProviderAssumeRoleArgs(**{ASSUME_ROLE_KEYS[k]: v for k, v in role.items()}))
    return out


class InferencePlatform(pulumi.ComponentResource):
    """EKS + Karpenter GPU pools + KAI queues + vLLM services with one autoscaler per role.

    Creates ``<name>-aws`` (an AWS provider for the spec's region, only when ``opts`` brings none), ``<name>-cluster``
    (EksCluster), ``<name>-karpenter``, ``<name>-cpu`` and ``<name>-<pool>`` node pools, ``<name>-device-plugin``,
    ``<name>-efa-device-plugin`` (when a pool has ``efa: true``),
    ``<name>-prometheus`` (optional), ``<name>-dcgm-exporter`` (GPU health), ``<name>-kai``, ``<name>-queues``,
    ``<name>-topology``, ``<name>-lws`` and
    ``<name>-keda`` / ``<name>-prometheus-adapter`` when a model needs them, ``<name>-ns-<namespace>``, and per model
    ``<name>-<model>`` (VllmService) with ``<name>-<model>-<role>`` (RoleAutoscaler), and ``<name>-<model>-door``
    (FrontDoor) for a model with a front door.

    Your AWS provider (``opts.provider`` / ``opts.providers``, or one inherited from a parent) is used as it is: its
    region, credentials and assumed roles. Without one, gpuscale creates one in ``environment.aws_region`` that
    carries the stack's ``aws:profile`` and ``aws:assumeRoles`` config (an explicit provider does not read them
    itself). The kubeconfig runs ``aws eks get-token`` with the same profile and role.
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

    def __init__(self, name: str, args: InferencePlatformArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        spec = args.spec
        sizing = checked_sizing(spec)  # a spec whose layers disagree is refused before any resource registers
        super().__init__("gpuscale:index:InferencePlatform", name, None, opts)

        env = spec.environment
        own_aws, role_arn = self._aws_provider(name, spec)
        aws_providers = [own_aws] if own_aws is not None else []
        cluster = EksCluster(
            f"{name}-cluster",
            EksClusterArgs.from_spec(
                spec, cluster_name=args.cluster_name or f"{name}-{env.name}",
                kubeconfig_role_arn=args.kubeconfig_role_arn if args.kubeconfig_role_arn is not None else role_arn,
                kubeconfig_profile=args.kubeconfig_profile,
            ),
            opts=child_opts(self, opts, providers=aws_providers),
        )
        providers = [*aws_providers, cluster.provider]

        def on_cluster(*after: pulumi.Resource) -> pulumi.ResourceOptions:
            child: pulumi.ResourceOptions = child_opts(self, opts, *after, providers=providers)
            return child

        # Layer 1: nodes
        karpenter = KarpenterController(
            f"{name}-karpenter", KarpenterControllerArgs.from_spec(spec, cluster_name=cluster.cluster_name),
            opts=on_cluster(),
        )
        # existing subnets are not tagged for discovery: the node pools name them
        subnets = cluster.private_subnet_ids if isinstance(env.networking, ExistingSubnetsSpec) else None
        cpu = CpuNodePool(
            f"{name}-cpu",
            CpuNodePoolArgs.from_spec(spec, cluster_name=cluster.cluster_name,
                                      node_role_name=karpenter.node_role_name, subnet_ids=subnets),
            opts=on_cluster(karpenter.chart),
        )
        gpu_pools = [
            GpuNodePool(
                f"{name}-{pool.name}",
                GpuNodePoolArgs.from_spec(spec, pool.name, cluster_name=cluster.cluster_name,
                                          node_role_name=karpenter.node_role_name, subnet_ids=subnets),
                opts=on_cluster(karpenter.chart),
            )
            for pool in spec.topology.gpu_pools
        ]
        NvidiaDevicePlugin(f"{name}-device-plugin", NvidiaDevicePluginArgs.from_spec(spec), opts=on_cluster())
        if efa_pools(spec):
            EfaDevicePlugin(f"{name}-efa-device-plugin", EfaDevicePluginArgs.from_spec(spec), opts=on_cluster())

        # monitoring first: KAI, KEDA and the vLLM PodMonitors use prometheus-operator's CRDs
        monitoring: list[pulumi.Resource] = []
        prometheus_url: StrInput = spec.observability.prometheus_url
        if spec.observability.install_prometheus_stack:
            prometheus = PrometheusStack(f"{name}-prometheus", PrometheusStackArgs.from_spec(spec), opts=on_cluster())
            monitoring.append(prometheus.chart)
            if prometheus_url == autoscaling.prometheus_stack_url(PROMETHEUS_STACK_NAMESPACE):
                prometheus_url = prometheus.prometheus_url  # the same URL, carrying the release as a dependency
        DcgmExporter(f"{name}-dcgm-exporter", DcgmExporterArgs.from_spec(spec), opts=on_cluster(*monitoring))

        # Layer 2: scheduling
        kai = KaiScheduler(f"{name}-kai", KaiSchedulerArgs.from_spec(spec), opts=on_cluster(*monitoring))
        queues = QueueTree(f"{name}-queues", QueueTreeArgs.from_spec(spec), opts=on_cluster(kai.chart))
        topology = KaiTopology(f"{name}-topology", KaiTopologyArgs.from_spec(spec), opts=on_cluster(kai.chart))

        # Layer 3: replicas
        serving_deps: list[pulumi.Resource] = [kai.chart, *queues.queues.values(), topology, *monitoring]
        if vllm.needs_lws(sizing):
            serving_deps.append(LwsController(f"{name}-lws", LwsControllerArgs(), opts=on_cluster()).chart)
        scaler_deps: list[pulumi.Resource] = []
        if autoscaling.needs_keda(spec):
            scaler_deps.append(
                KedaOperator(f"{name}-keda", KedaOperatorArgs.from_spec(spec), opts=on_cluster(*monitoring)).chart
            )
        if autoscaling.needs_prometheus_adapter(spec):
            scaler_deps.append(PrometheusAdapter(
                f"{name}-prometheus-adapter",
                PrometheusAdapterArgs(prometheus_url=prometheus_url), opts=on_cluster(*monitoring),
            ).chart)
        namespaces = {
            ns: k8s.core.v1.Namespace(
                f"{name}-ns-{ns}", metadata={"name": ns, "labels": {labels.MANAGED_BY_LABEL: labels.MANAGED_BY}},
                opts=on_cluster(),
            )
            for ns in vllm.serving_namespaces(spec)
        }
        endpoints: dict[str, pulumi.Output[str]] = {}
        for model in spec.models:
            # plain namespace names (objects built without waiting on an Output), the Namespace as a dependency
            namespace = namespaces[model.serving.namespace]
            service = VllmService(
                f"{name}-{model.name}",
                VllmServiceArgs.from_platform(spec, sizing, model.name, cluster_name=cluster.cluster_name),
                opts=on_cluster(namespace, *serving_deps),
            )
            endpoints[model.name] = service.endpoint
            if model.has_front_door:  # before the model: holds requests while it wakes, and owns the client URL
                door = FrontDoor(
                    f"{name}-{model.name}-door", FrontDoorArgs.from_platform(spec, sizing, model.name),
                    opts=on_cluster(namespace, *service.workloads.values(), *monitoring),
                )
                endpoints[model.name] = door.endpoint
            for role in model.serving.roles:
                RoleAutoscaler(
                    f"{name}-{model.name}-{role}",
                    RoleAutoscalerArgs.from_platform(spec, sizing, model.name, role, prometheus_url=prometheus_url),
                    opts=on_cluster(namespace, service.workloads[role], *scaler_deps),
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

    def _aws_provider(self, name: str, spec: PlatformSpec) -> tuple[aws.Provider | None, StrInput | None]:
        """``(provider gpuscale created or None, role the kubeconfig assumes)``: the caller's provider wins."""
        env = spec.environment
        caller = self.get_provider("aws::")
        if caller is not None:
            region = caller.region if isinstance(caller, aws.Provider) else None
            if region is not None:
                region.apply(lambda r: self._warn_region(r, env.aws_region))
            return None, None
        config = pulumi.Config("aws")
        roles = assume_roles_from_config(config.get_object("assumeRoles"))
        provider = aws.Provider(
            f"{name}-aws", region=env.aws_region, profile=config.get("profile"), assume_roles=roles or None,
            default_tags=aws.ProviderDefaultTagsArgs(tags={**env.tags, "gpuscale.io/environment": env.name}),
            opts=pulumi.ResourceOptions(parent=self),
        )
        return provider, roles[-1].role_arn if roles else None

    def _warn_region(self, provider_region: str | None, spec_region: str) -> None:
        if provider_region and provider_region != spec_region:
            pulumi.log.warn(
                f"your AWS provider deploys to {provider_region} but environment.aws_region is {spec_region}; "
                f"gpuscale uses the provider's region ({provider_region})",
                resource=self,
            )
