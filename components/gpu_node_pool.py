"""One Karpenter GPU node pool: an ``EC2NodeClass`` and a ``NodePool`` with safe disruption by default.

Why these settings (details in ``docs/layer1-nodes.md`` and ``gpuscale.manifests.karpenter``):

- ``consolidationPolicy: WhenEmpty`` + ``consolidateAfter: 1h``: Karpenter never evicts live inference to repack
  GPU nodes, and a node emptied by a short dip survives until traffic returns. The spec refuses anything else
  unless ``acknowledge_underutilized_consolidation_evicts_inference`` is set; this component then emits the
  acknowledged setting and logs a warning naming the trap.
- ``expireAfter: Never`` (spec default): expiry is forceful and ignores budgets and ``do-not-disrupt``, so a
  GPU node is never recycled mid-day on a timer. AMI updates roll through drift instead (a new pinned alias
  drifts every node), and drift obeys the disruption budgets: one node at a time, only inside the pool's drift window.
- No ``terminationGracePeriod``: with one, Karpenter's drift ignores PDBs and force-deletes serving pods.
- Taint ``nvidia.com/gpu=true:NoSchedule``; labels ``gpuscale.io/node-pool`` and ``nvidia.com/gpu.present``.
- Limits: ``nvidia.com/gpu`` is the budget; cpu/memory are derived from the catalogue so they never bind first.
- EC2NodeClass: pinned AMI alias, IMDSv2 with hop limit 1, encrypted gp3 root sized for image + model cache,
  RAID0 instance store when every type has NVMe, EFA interfaces when asked, and for a cluster placement group
  (EFA pools by default) the ``<cluster>-<pool>`` EC2 placement group this component creates.
"""

from __future__ import annotations

from typing import Literal

import pulumi
import pulumi_aws as aws
from pydantic import Field, model_validator

from gpuscale import sizing
from gpuscale.components.children import child_opts, known_pool, object_name
from gpuscale.components.inputs import ClusterName, NonEmpty, SecurityGroupIds, StrInput, StrListInput, SubnetIds
from gpuscale.components.node_pool_resources import node_class_and_pool, node_class_spec
from gpuscale.guardrails import production
from gpuscale.manifests import karpenter
from gpuscale.spec.base import Name, Spec
from gpuscale.spec.platform import PlatformSpec
from gpuscale.spec.topology import GpuNodePoolSpec


class GpuNodePoolArgs(Spec):
    """One GPU pool and the cluster it launches nodes for; everything else has a default.

    ``cluster_name``, ``node_role_name``, ``subnet_ids`` and ``security_group_ids`` take other resources' Outputs.
    """

    pool: GpuNodePoolSpec
    """The pool (instance types, capacity types, GPU limit, disruption settings, AMI alias, EFA)."""
    cluster_name: ClusterName
    """Your EKS cluster: subnets and security groups tagged ``karpenter.sh/discovery: <cluster>`` are used unless
    ``subnet_ids``/``security_group_ids`` name them."""
    node_role_name: NonEmpty
    """IAM role of the nodes (``EC2NodeClass.spec.role``), e.g. ``KarpenterController.node_role_name``; it needs an
    ``EC2_LINUX`` access entry on the cluster."""
    subnet_ids: SubnetIds | None = None
    """Subnets nodes launch in, instead of discovery by tag."""
    security_group_ids: SecurityGroupIds | None = None
    """Security groups of the nodes, instead of discovery by tag."""
    name: Name | None = None
    """NodePool and EC2NodeClass name in the cluster; default the pool's name. Pods select the pool by the
    ``gpuscale.io/node-pool: <pool>`` node label either way."""
    stage: Literal["dev", "staging", "prod"] = "prod"
    """Lifecycle stage; prod (the default) refuses an ``@latest`` AMI alias."""
    zones: list[str] | None = Field(default=None, min_length=1)
    """Zones nodes may launch in; default every zone of the selected subnets."""
    root_volume_gib: int | None = Field(default=None, gt=0)
    """Root (AL2023) or data (Bottlerocket) volume: image + model cache (``gpuscale.sizing.root_volume_gib``); default
    the pool's ``root_volume_gib``; one of the two is required."""
    cold_start_s: float = Field(default=0.0, ge=0)
    """Slowest cold start of the pool's models; a shorter ``consolidate_after`` is warned about."""
    tags: dict[str, str] = Field(default_factory=dict)
    """Tags on the instances, volumes and launch templates Karpenter creates."""

    @model_validator(mode="after")
    def _sized_volume(self) -> GpuNodePoolArgs:
        if self.volume_gib is None:
            raise ValueError(
                f"pool {self.pool.name}: root_volume_gib is required (the vLLM image plus the model caches on local "
                "disk; from_spec derives it), or set the pool's root_volume_gib"
            )
        return self

    @model_validator(mode="after")
    def _pinned_in_prod(self) -> GpuNodePoolArgs:
        if production.is_production(self.stage) and production.unpinned_alias(self.pool.ami_alias):
            raise ValueError(production.unpinned_ami_message(f"pool {self.pool.name}: {self.pool.ami_alias}"))
        return self

    @classmethod
    def from_spec(
        cls, spec: PlatformSpec, pool_name: str, *, cluster_name: StrInput, node_role_name: StrInput,
        subnet_ids: StrListInput | None = None, security_group_ids: StrListInput | None = None,
    ) -> GpuNodePoolArgs:
        """The spec's pool, with root volume and cold start derived from the models that run on it, and the one zone of
        its cluster placement group (EFA pools)."""
        known_pool(spec, pool_name)
        pool = spec.topology.pool(pool_name)
        return cls(
            pool=pool,
            cluster_name=cluster_name,
            node_role_name=node_role_name,
            subnet_ids=subnet_ids,
            security_group_ids=security_group_ids,
            stage=spec.environment.stage,
            zones=spec.topology.pool_zones(pool_name),
            root_volume_gib=sizing.root_volume_gib(spec, pool),
            cold_start_s=karpenter.longest_cold_start_s(spec, pool_name),
            tags=spec.environment.tags,
        )

    @property
    def k8s_name(self) -> str:
        return self.name or self.pool.name

    @property
    def volume_gib(self) -> int | None:
        """The volume size used: ``root_volume_gib``, else the pool's."""
        return self.root_volume_gib if self.root_volume_gib is not None else self.pool.root_volume_gib


class GpuNodePool(pulumi.ComponentResource):
    """Karpenter ``EC2NodeClass`` + ``NodePool`` for one GPU pool (both named after the pool unless ``args.name``).

    Creates ``<name>-nodeclass`` (``karpenter.k8s.aws/v1`` EC2NodeClass) and ``<name>-nodepool``
    (``karpenter.sh/v1`` NodePool) through the Kubernetes provider in ``opts``, plus ``<name>-placement-group`` (an EC2
    cluster placement group, through the AWS provider) when the pool uses one.

    Expects on the cluster: Karpenter and its CRDs (``KarpenterController``; pass its ``chart`` in
    ``opts.depends_on`` when it is in the same program), the node role with an access entry, and subnets/security
    groups tagged for discovery (or ``subnet_ids``/``security_group_ids``). For the nodes to serve GPUs:
    ``NvidiaDevicePlugin``. See https://karpenter.sh/docs/concepts/nodepools/ and
    https://karpenter.sh/docs/concepts/disruption/
    """

    node_pool_name: pulumi.Output[str]
    """NodePool name as created; workloads select the pool with ``gpuscale.io/node-pool``."""
    node_class_name: pulumi.Output[str]

    def __init__(self, name: str, args: GpuNodePoolArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuscale:index:GpuNodePool", name, None, opts)
        pool = args.pool
        volume_gib = args.volume_gib or 0  # validated: never None here
        for warning in [*karpenter.disruption_warnings(pool, args.cold_start_s), *karpenter.capacity_warnings(pool),
                        *karpenter.network_layer_warnings(pool)]:
            pulumi.log.warn(warning, resource=self)
        if pool.cluster_placement:
            group = aws.ec2.PlacementGroup(
                f"{name}-placement-group",
                name=pulumi.Output.from_input(args.cluster_name).apply(lambda c: karpenter.placement_group_name(c, pool)),
                strategy="cluster", tags=args.tags, opts=child_opts(self, opts),
            )
            # the EC2NodeClass names the group: it must exist before Karpenter resolves it
            opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[group]))
        class_spec = node_class_spec(
            lambda cluster, role, subnets, groups: karpenter.ec2nodeclass_body(
                pool, cluster_name=cluster, node_role_name=role, root_volume_gib=volume_gib,
                tags=args.tags, subnet_ids=subnets, security_group_ids=groups, name=args.k8s_name, stage=args.stage,
            ),
            cluster_name=args.cluster_name, node_role_name=args.node_role_name,
            subnet_ids=args.subnet_ids, security_group_ids=args.security_group_ids,
        )
        pool_body = karpenter.nodepool_body(pool, zones=args.zones, name=args.k8s_name, cold_start_s=args.cold_start_s)
        node_class, node_pool = node_class_and_pool(
            self, name, f"GpuNodePool {name!r}", k8s_name=args.k8s_name, class_spec=class_spec, pool_body=pool_body,
            opts=opts,
        )
        self.node_pool_name = object_name(node_pool)
        self.node_class_name = object_name(node_class)
        self.register_outputs({"node_pool_name": self.node_pool_name, "node_class_name": self.node_class_name})
