"""The whole platform from one ``PlatformSpec``: nodes (Karpenter), scheduling (KAI), replicas (vLLM + autoscalers).

Order matters where there is no data dependency: Helm charts install the CRDs that later custom resources use
(Karpenter -> NodePools, KAI -> Queues/Topology, LWS -> LeaderWorkerSets, prometheus-operator -> PodMonitors,
KEDA -> ScaledObjects), so each custom resource waits for its chart (``opts.depends_on``). Cross-layer checks run
first: a spec whose layers disagree is refused before a single resource is registered.

The platform creates the AWS provider and the EKS cluster; everything in the cluster is ``platform_layers``
(``components/platform_layers.py``), the composition the real-engine tier runs too.
"""

from __future__ import annotations

from collections.abc import Mapping

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
from pydantic import Field

from gpuscale.components.children import Refused, child_opts, refused, register_target
from gpuscale.components.eks_cluster import EksCluster, EksClusterArgs
from gpuscale.components.inputs import NonEmpty, PrincipalArn
from gpuscale.components.platform_layers import PlatformLayersArgs, platform_layers
from gpuscale.feasibility import checked_sizing
from gpuscale.platform_checks import platform_problems
from gpuscale.problems import Problems
from gpuscale.spec.base import Spec
from gpuscale.spec.platform import PlatformSpec

__all__ = ["AwsAssumeRole", "InferencePlatform", "InferencePlatformArgs", "default_cluster_name"]


def default_cluster_name(platform_name: str, spec: PlatformSpec) -> str:
    """The EKS cluster an ``InferencePlatform`` named ``platform_name`` creates when its args name none."""
    return f"{platform_name}-{spec.environment.name}"


class AwsAssumeRole(Spec):
    """One role the AWS provider gpuscale creates assumes (``aws:assumeRoles`` items, in snake case); the last one
    deploys."""

    role_arn: PrincipalArn
    session_name: NonEmpty | None = None
    external_id: NonEmpty | None = None
    duration: NonEmpty | None = None
    policy: NonEmpty | None = None
    policy_arns: list[str] = []
    source_identity: NonEmpty | None = None
    tags: dict[str, str] = {}
    transitive_tag_keys: list[str] = []

    def provider_args(self) -> aws.ProviderAssumeRoleArgs:
        return aws.ProviderAssumeRoleArgs(**self.model_dump(exclude_defaults=True))


class InferencePlatformArgs(Spec):
    """The validated spec, how the cluster is named and reached, and the credentials of the AWS provider gpuscale
    creates when ``opts`` brings none (``gpuscale.program`` passes the stack's ``aws:profile``/``aws:assumeRoles``:
    components read no config)."""

    spec: PlatformSpec
    """Everything the stack deploys."""
    cluster_name: str | None = Field(default=None, pattern=r"^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$")
    """Name of the EKS cluster to create; default ``<component name>-<environment.name>`` (``gpuscale-prod`` for
    the shipped program), so two platforms in one program never share one."""
    aws_profile: NonEmpty | None = None
    """AWS profile of the provider gpuscale creates (and of the kubeconfig's ``aws eks get-token``); ignored when
    ``opts`` brings an AWS provider."""
    aws_assume_roles: list[AwsAssumeRole] = []
    """Roles the provider gpuscale creates assumes, in order; ignored when ``opts`` brings an AWS provider."""
    kubeconfig_role_arn: NonEmpty | None = None
    """Role the kubeconfig's ``aws eks get-token`` assumes; default the last of ``aws_assume_roles`` when gpuscale
    creates the AWS provider."""
    kubeconfig_profile: NonEmpty | None = None
    """AWS profile of the kubeconfig's ``aws eks get-token``; default ``aws_profile``, else the AWS provider's."""


class InferencePlatform(pulumi.ComponentResource):
    """EKS + Karpenter GPU pools + KAI queues + vLLM services with one autoscaler per role.

    Creates ``<name>-aws`` (an AWS provider for the spec's region, only when ``opts`` brings none), ``<name>-cluster``
    (EksCluster), ``<name>-karpenter``, ``<name>-cpu`` and ``<name>-<pool>`` node pools, ``<name>-device-plugin``,
    ``<name>-efa-device-plugin`` (when a pool has ``efa: true``),
    ``<name>-prometheus`` (optional), ``<name>-dcgm-exporter`` (GPU health), ``<name>-kai``, ``<name>-queues``,
    ``<name>-topology``, ``<name>-lws`` and
    ``<name>-keda`` / ``<name>-prometheus-adapter`` when a model needs them, ``<name>-ns-<namespace>``, ``<name>-alerts``
    (AlertRules: the PrometheusRules, with the Prometheus stack, whose CRD they need), ``<name>-dashboards``
    (Dashboards: a Grafana dashboard ConfigMap per model, with the stack, whose Grafana sidecar loads them), and per model
    ``<name>-<model>`` (VllmService) with ``<name>-<model>-<role>`` (RoleAutoscaler), and ``<name>-<model>-door``
    (FrontDoor) for a model with a front door.

    Providers: your AWS provider (``opts.provider`` / ``opts.providers``, or one inherited from a parent) is used as
    it is: its region, credentials and assumed roles. Without one, gpuscale creates one in ``environment.aws_region``
    with ``args.aws_profile`` and ``args.aws_assume_roles``; the kubeconfig runs ``aws eks get-token`` with the same
    profile and role. A Kubernetes provider in ``opts`` is refused: the platform creates the cluster, so its
    in-cluster resources can only go through the provider made from that cluster (``EksCluster.provider``); to deploy
    onto a cluster you already have, use the pieces (``GpuNodePool``, ``QueueTree``, ``VllmService`` ...) with yours.
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
        _refuse_kubernetes_provider(name, opts)
        try:
            sizing = checked_sizing(args.spec)  # a spec whose layers disagree is refused before any resource registers
        except Problems as exc:
            raise refused(exc) from None
        created = platform_problems(args.spec)  # it creates the VPC and the cluster: what would stop that run
        if created:
            raise Refused(created)
        super().__init__("gpuscale:index:InferencePlatform", name, None, opts)
        self._name, self._spec, self._opts = name, args.spec, opts
        cluster = self._cluster(args)
        layers = platform_layers(name, PlatformLayersArgs(spec=args.spec, sizing=sizing,
                                                          cluster_name=cluster.cluster_name), self._on_cluster)
        self.cluster_name = cluster.cluster_name
        self.kubeconfig = pulumi.Output.secret(cluster.kubeconfig)
        self.endpoint = cluster.endpoint
        self.node_pool_names = pulumi.Output.all(*[p.node_pool_name for p in layers.node_pools])
        self.queue_names = layers.queue_names
        self.model_endpoints = pulumi.Output.all(**layers.endpoints)
        self.register_outputs({
            "cluster_name": self.cluster_name, "kubeconfig": self.kubeconfig, "endpoint": self.endpoint,
            "node_pool_names": self.node_pool_names, "queue_names": self.queue_names, "model_endpoints": self.model_endpoints,
        })

    def _on_cluster(self, *after: pulumi.Resource) -> pulumi.ResourceOptions:
        """Options of an in-cluster child: the platform's providers, the caller's ``depends_on``, and ``after``."""
        child: pulumi.ResourceOptions = child_opts(self, self._opts, *after, providers=self._in_cluster)
        return child

    def _cluster(self, args: InferencePlatformArgs) -> EksCluster:
        name, spec = self._name, self._spec
        own_aws = self._aws_provider(args)
        aws_providers = [own_aws] if own_aws is not None else []
        role_arn = args.aws_assume_roles[-1].role_arn if own_aws is not None and args.aws_assume_roles else None
        profile = args.aws_profile if own_aws is not None else None
        cluster = EksCluster(
            f"{name}-cluster",
            EksClusterArgs.from_spec(
                spec, cluster_name=args.cluster_name or default_cluster_name(name, spec),
                kubeconfig_role_arn=args.kubeconfig_role_arn if args.kubeconfig_role_arn is not None else role_arn,
                kubeconfig_profile=args.kubeconfig_profile if args.kubeconfig_profile is not None else profile,
            ),
            opts=child_opts(self, self._opts, providers=aws_providers),
        )
        self._in_cluster: list[pulumi.ProviderResource] = [*aws_providers, cluster.provider]
        return cluster

    def _aws_provider(self, args: InferencePlatformArgs) -> aws.Provider | None:
        """The AWS provider gpuscale creates, or None when the caller's (explicit or inherited) is used."""
        env = args.spec.environment
        caller = self.get_provider("aws::")
        if caller is not None:
            region = caller.region if isinstance(caller, aws.Provider) else None
            if region is not None:
                region.apply(lambda r: self._warn_region(r, env.aws_region))
            return None
        roles = [role.provider_args() for role in args.aws_assume_roles]
        provider = aws.Provider(
            f"{self._name}-aws", region=env.aws_region, profile=args.aws_profile, assume_roles=roles or None,
            default_tags=aws.ProviderDefaultTagsArgs(tags={**env.tags, "gpuscale.io/environment": env.name}),
            opts=pulumi.ResourceOptions(parent=self),
        )
        # two platforms whose providers gpuscale made for one region and credentials reach one account: their
        # account-wide names (the EKS cluster, its KMS alias) clash as if they shared the provider
        register_target(provider, "aws", f"region {env.aws_region}", f"profile {args.aws_profile or '(default)'}",
                        *(f"role {r.role_arn}" for r in args.aws_assume_roles))
        return provider

    def _warn_region(self, provider_region: str | None, spec_region: str) -> None:
        if provider_region and provider_region != spec_region:
            pulumi.log.warn(
                f"your AWS provider deploys to {provider_region} but environment.aws_region is {spec_region}; "
                f"gpuscale uses the provider's region ({provider_region})",
                resource=self,
            )


def _refuse_kubernetes_provider(name: str, opts: pulumi.ResourceOptions | None) -> None:
    """A Kubernetes provider given in ``opts`` could only be ignored (the platform reaches the cluster it creates
    through its own provider): refuse it rather than drop it."""
    if opts is None:
        return
    given = [opts.provider] if opts.provider is not None else []
    given += list(opts.providers.values()) if isinstance(opts.providers, Mapping) else list(opts.providers or [])
    if any(isinstance(p, k8s.Provider) for p in given):
        raise Refused(
            f"InferencePlatform {name!r}: a Kubernetes provider in opts cannot be used: the platform creates the EKS "
            f"cluster and installs everything in it through the provider made from that cluster "
            f"(EksCluster.provider, exported as kubeconfig); pass only an AWS provider, or deploy onto an existing "
            f"cluster with the pieces (GpuNodePool, QueueTree, VllmService, RoleAutoscaler ...) and your provider"
        )
