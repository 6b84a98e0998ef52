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

from collections.abc import Sequence
from typing import Literal

import pulumi
import pulumi_aws as aws
from pydantic import Field, model_validator

from gpuscale import sizing, versions
from gpuscale.components.node_pool_resources import node_class_and_pool
from gpuscale.manifests import karpenter
from gpuscale.spec.base import Spec
from gpuscale.spec.platform import PlatformSpec
from gpuscale.spec.topology import GpuNodePoolSpec


class GpuNodePoolArgs(Spec):
    """A GPU pool spec plus the cluster-level values its two objects need."""

    pool: GpuNodePoolSpec
    """The spec's pool (instance types, capacity types, GPU limit, disruption settings, AMI alias, EFA)."""
    cluster_name: str
    """EKS cluster name: subnets and security groups are discovered by ``karpenter.sh/discovery: <cluster>``."""
    stage: Literal["dev", "staging", "prod"]
    """Lifecycle stage; prod refuses an ``@latest`` AMI alias."""
    zones: list[str] = Field(min_length=1)
    """Zones nodes may launch in."""
    root_volume_gib: int = Field(gt=0)
    """Root (AL2023) or data (Bottlerocket) volume: image + model cache (``gpuscale.sizing.root_volume_gib``)."""
    cold_start_s: float = Field(default=0.0, ge=0)
    """Slowest cold start of the pool's models; a shorter ``consolidate_after`` is warned about."""
    tags: dict[str, str] = Field(default_factory=dict)
    """Tags on the instances, volumes and launch templates Karpenter creates."""

    @model_validator(mode="after")
    def _pinned_in_prod(self) -> GpuNodePoolArgs:
        if self.stage == "prod" and self.pool.ami_alias.endswith("@latest"):
            raise ValueError(
                f"pool {self.pool.name}: {self.pool.ami_alias} in prod drifts every GPU node whenever AWS publishes an "
                f"AMI; pin a version (e.g. {versions.EKS_AL2023_AMI_ALIAS})"
            )
        return self

    @classmethod
    def from_spec(cls, spec: PlatformSpec, pool_name: str) -> GpuNodePoolArgs:
        pool = spec.topology.pool(pool_name)
        return cls(
            pool=pool,
            cluster_name=spec.environment.cluster_name,
            stage=spec.environment.stage,
            zones=spec.topology.pool_zones(pool_name),
            root_volume_gib=sizing.root_volume_gib(spec, pool),
            cold_start_s=karpenter.longest_cold_start_s(spec, pool_name),
            tags=spec.environment.tags,
        )


class GpuNodePool(pulumi.ComponentResource):
    """Karpenter ``EC2NodeClass`` + ``NodePool`` for one GPU pool (both named after the pool).

    Creates ``<name>-nodeclass`` (``karpenter.k8s.aws/v1`` EC2NodeClass) and ``<name>-nodepool``
    (``karpenter.sh/v1`` NodePool), plus ``<name>-placement-group`` (EC2 cluster placement group) when the pool uses one. Pass the Karpenter chart in ``depends_on`` so both wait for its CRDs.
    See https://karpenter.sh/docs/concepts/nodepools/ and https://karpenter.sh/docs/concepts/disruption/
    """

    node_pool_name: pulumi.Output[str]
    """NodePool name; workloads select it with ``gpuscale.io/node-pool``."""
    node_class_name: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        args: GpuNodePoolArgs,
        *,
        node_role_name: pulumi.Input[str],
        depends_on: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpuscale:index:GpuNodePool", name, None, opts)
        pool = args.pool
        for warning in [*karpenter.disruption_warnings(pool, args.cold_start_s), *karpenter.capacity_warnings(pool)]:
            pulumi.log.warn(warning, resource=self)
        crds = list(depends_on)
        if pool.cluster_placement:
            crds.append(aws.ec2.PlacementGroup(
                f"{name}-placement-group", name=karpenter.placement_group_name(args.cluster_name, pool),
                strategy="cluster", tags=args.tags, opts=pulumi.ResourceOptions(parent=self),
            ))
        class_spec = pulumi.Output.from_input(node_role_name).apply(
            lambda role: karpenter.ec2nodeclass_body(
                pool,
                cluster_name=args.cluster_name,
                node_role_name=role,
                root_volume_gib=args.root_volume_gib,
                tags=args.tags,
            )["spec"]
        )
        node_class, node_pool = node_class_and_pool(
            self, name, k8s_name=pool.name, class_spec=class_spec,
            pool_body=karpenter.nodepool_body(pool, zones=args.zones),
            crds=crds,  # the Karpenter chart (its CRDs must exist first) and the placement group the class names
        )
        self.node_pool_name = node_pool.id.apply(lambda _: pool.name)
        self.node_class_name = node_class.id.apply(lambda _: pool.name)
        self.register_outputs({"node_pool_name": self.node_pool_name, "node_class_name": self.node_class_name})
