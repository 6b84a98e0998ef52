"""The general-purpose Karpenter node pool (routers, autoscaler controllers, Prometheus): no GPU taint.

Unlike GPU pools it may use ``WhenEmptyOrUnderutilized``: nothing on a CPU node holds a loaded model, so
repacking costs a pod restart of seconds, not a model reload of minutes.
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
from pydantic import Field

from gpuscale import versions
from gpuscale.components.node_pool_resources import node_class_and_pool
from gpuscale.manifests import karpenter
from gpuscale.spec.base import Name, Spec
from gpuscale.spec.platform import PlatformSpec
from gpuscale.spec.topology import CPU_POOL_NAME, CpuNodePoolSpec


class CpuNodePoolArgs(Spec):
    """The CPU pool spec plus the cluster-level values its two objects need."""

    pool: CpuNodePoolSpec = CpuNodePoolSpec()
    """Instance categories, capacity types, CPU limit, consolidation."""
    cluster_name: str
    """EKS cluster name (subnet and security-group discovery)."""
    zones: list[str] = Field(min_length=1)
    """Zones nodes may launch in."""
    name: Name = CPU_POOL_NAME
    """NodePool and EC2NodeClass name."""
    ami_alias: str = versions.EKS_AL2023_AMI_ALIAS
    """Pinned AMI alias."""
    tags: dict[str, str] = Field(default_factory=dict)
    """Tags on the instances, volumes and launch templates Karpenter creates."""

    @classmethod
    def from_spec(cls, spec: PlatformSpec) -> CpuNodePoolArgs:
        return cls(
            pool=spec.topology.cpu_pool,
            cluster_name=spec.environment.cluster_name,
            zones=spec.topology.zones,
            tags=spec.environment.tags,
        )


class CpuNodePool(pulumi.ComponentResource):
    """Karpenter ``EC2NodeClass`` + ``NodePool`` for general-purpose CPU nodes.

    Creates ``<name>-nodeclass`` and ``<name>-nodepool`` (both named ``args.name`` in the cluster). Pass the
    Karpenter chart in ``depends_on`` so both wait for its CRDs.
    """

    node_pool_name: pulumi.Output[str]
    node_class_name: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        args: CpuNodePoolArgs,
        *,
        node_role_name: pulumi.Input[str],
        depends_on: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpuscale:index:CpuNodePool", name, None, opts)
        class_spec = pulumi.Output.from_input(node_role_name).apply(
            lambda role: karpenter.cpu_ec2nodeclass_body(
                cluster_name=args.cluster_name,
                node_role_name=role,
                ami_alias=args.ami_alias,
                tags=args.tags,
                name=args.name,
            )["spec"]
        )
        node_class, node_pool = node_class_and_pool(
            self, name, k8s_name=args.name, class_spec=class_spec,
            pool_body=karpenter.cpu_nodepool_body(args.pool, zones=args.zones, name=args.name),
            crds=depends_on,  # the Karpenter chart: its CRDs must exist first
        )
        self.node_pool_name = node_pool.id.apply(lambda _: args.name)
        self.node_class_name = node_class.id.apply(lambda _: args.name)
        self.register_outputs({"node_pool_name": self.node_pool_name, "node_class_name": self.node_class_name})
