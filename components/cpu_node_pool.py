"""The general-purpose Karpenter node pool (routers, autoscaler controllers, Prometheus): no GPU taint.

Unlike GPU pools it may use ``WhenEmptyOrUnderutilized``: nothing on a CPU node holds a loaded model, so
repacking costs a pod restart of seconds, not a model reload of minutes.
"""

from __future__ import annotations

import pulumi
from pydantic import Field

from gpuscale import versions
from gpuscale.components.children import object_name
from gpuscale.components.inputs import ClusterName, NonEmpty, SecurityGroupIds, StrInput, StrListInput, SubnetIds
from gpuscale.components.node_pool_resources import node_class_and_pool, node_class_spec
from gpuscale.manifests import karpenter
from gpuscale.spec.base import Name, Spec
from gpuscale.spec.platform import PlatformSpec
from gpuscale.spec.topology import CPU_POOL_NAME, CpuNodePoolSpec


class CpuNodePoolArgs(Spec):
    """The CPU pool and the cluster it launches nodes for; ``cluster_name``, ``node_role_name`` and the ids take
    other resources' Outputs."""

    cluster_name: ClusterName
    """Your EKS cluster (subnet and security-group discovery by ``karpenter.sh/discovery: <cluster>``)."""
    node_role_name: NonEmpty
    """IAM role of the nodes (``EC2NodeClass.spec.role``)."""
    pool: CpuNodePoolSpec = CpuNodePoolSpec()
    """Instance categories, capacity types, CPU limit, consolidation."""
    subnet_ids: SubnetIds | None = None
    """Subnets nodes launch in, instead of discovery by tag."""
    security_group_ids: SecurityGroupIds | None = None
    """Security groups of the nodes, instead of discovery by tag."""
    zones: list[str] | None = Field(default=None, min_length=1)
    """Zones nodes may launch in; default every zone of the selected subnets."""
    name: Name = CPU_POOL_NAME
    """NodePool and EC2NodeClass name."""
    ami_alias: str = versions.EKS_AL2023_AMI_ALIAS
    """Pinned AMI alias."""
    tags: dict[str, str] = Field(default_factory=dict)
    """Tags on the instances, volumes and launch templates Karpenter creates."""

    @classmethod
    def from_spec(
        cls, spec: PlatformSpec, *, cluster_name: StrInput, node_role_name: StrInput,
        subnet_ids: StrListInput | None = None, security_group_ids: StrListInput | None = None,
    ) -> CpuNodePoolArgs:
        return cls(
            pool=spec.topology.cpu_pool,
            cluster_name=cluster_name,
            node_role_name=node_role_name,
            subnet_ids=subnet_ids,
            security_group_ids=security_group_ids,
            zones=spec.topology.zones,
            tags=spec.environment.tags,
        )


class CpuNodePool(pulumi.ComponentResource):
    """Karpenter ``EC2NodeClass`` + ``NodePool`` for general-purpose CPU nodes.

    Creates ``<name>-nodeclass`` and ``<name>-nodepool`` (both named ``args.name`` in the cluster). Expects Karpenter
    and its CRDs on the cluster (pass ``KarpenterController.chart`` in ``opts.depends_on`` when it is in the same
    program) and the node role's access entry.
    """

    node_pool_name: pulumi.Output[str]
    node_class_name: pulumi.Output[str]

    def __init__(self, name: str, args: CpuNodePoolArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuscale:index:CpuNodePool", name, None, opts)
        class_spec = node_class_spec(
            lambda cluster, role, subnets, groups: karpenter.cpu_ec2nodeclass_body(
                cluster_name=cluster, node_role_name=role, ami_alias=args.ami_alias, tags=args.tags, name=args.name,
                subnet_ids=subnets, security_group_ids=groups,
            ),
            cluster_name=args.cluster_name, node_role_name=args.node_role_name,
            subnet_ids=args.subnet_ids, security_group_ids=args.security_group_ids,
        )
        node_class, node_pool = node_class_and_pool(
            self, name, f"CpuNodePool {name!r}", k8s_name=args.name, class_spec=class_spec,
            pool_body=karpenter.cpu_nodepool_body(args.pool, zones=args.zones, name=args.name), opts=opts,
        )
        self.node_pool_name = object_name(node_pool)
        self.node_class_name = object_name(node_class)
        self.register_outputs({"node_pool_name": self.node_pool_name, "node_class_name": self.node_class_name})
