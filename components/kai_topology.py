"""The cluster's KAI ``Topology`` (``kai.scheduler/v1alpha1``), named ``gpuscale``, from ``spec.topology.levels``.

Levels are node labels, coarsest first. Who sets each default level on EKS (``research/serving-facts.md`` section 5):

- ``topology.kubernetes.io/zone`` (alias ``zone``): kubelet / cloud-controller-manager on every node; Karpenter also
  puts it on NodeClaims and can provision for it (a well-known label).
- ``topology.k8s.aws/network-node-layer-1`` .. ``-3`` (aliases ``spine``, ``block``, ``rack``; ``-4`` on 4-layer
  types): the AWS cloud-controller-manager, from EC2 ``DescribeInstanceTopology`` at node registration (CCM >= 1.30.4 /
  1.31.2 / 1.32.0; on EKS it runs in the managed control plane, so Karpenter nodes get them). Layer 1 is the broadest.
  Only instance types the topology API supports carry them (p4d/p5/p5e/p5en/p6, trn1/trn2, g6, ...).
  Karpenter does NOT set them and cannot launch a node "under" a given switch (they are known only after launch).
- ``kubernetes.io/hostname`` (alias ``node``): kubelet. KAI allows it only as the last level.
- Optional: ``nvidia.com/gpu.clique`` (GPU Feature Discovery, NVLink-fabric parts such as GB200 NVL72) and
  ``topology.k8s.aws/ultraserver-id`` (EKS UltraServers).

Caveats, and how the workload wiring handles them:

1. With a *required* placement, nodes lacking that level's label are ineligible. Network layers are therefore only
   ever *preferred*; the only required levels are the zone (multi-node replicas) and the hostname (single-pod ones),
   which every node carries.
2. Network-layer packing works on nodes that already exist. For hard co-location of new capacity use an EC2 placement
   group (``EC2NodeClass.spec.placementGroupSelector``) or capacity blocks.
3. The level structure is immutable (CEL rule ``oldSelf``): an update that adds, drops or reorders a nodeLabel is
   refused by the API server; only aliases may change. Changing levels means deleting the Topology first, while no
   pending workload names it.
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
from pulumi_kubernetes.apiextensions import CustomResource

from gpuscale.manifests.kai import topology_body
from gpuscale.spec.base import Spec
from gpuscale.spec.platform import PlatformSpec


class KaiTopologyArgs(Spec):
    """Inputs of ``KaiTopology``."""

    platform: PlatformSpec
    """The validated platform spec; its ``topology.levels`` are the Topology's levels."""


class KaiTopology(pulumi.ComponentResource):
    """The KAI Topology the workload wiring's placement annotations name.

    Creates ``<name>-topology`` (Topology ``gpuscale``, cluster-scoped). ``depends_on`` should hold
    ``KaiScheduler.chart`` (CRD). See KAI ``docs/topology/README.md``.
    """

    topology: CustomResource
    """The Topology resource."""
    topology_name: pulumi.Output[str]
    """Name workloads put in ``kai.scheduler/topology``."""

    def __init__(
        self, name: str, args: KaiTopologyArgs, *,
        depends_on: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpuscale:index:KaiTopology", name, None, opts)
        body = topology_body(args.platform)
        self.topology = CustomResource(
            f"{name}-topology",
            api_version=body["apiVersion"],
            kind=body["kind"],
            metadata=body["metadata"],
            spec=body["spec"],
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(depends_on)),
        )
        self.topology_name = pulumi.Output.from_input(str(body["metadata"]["name"]))
        self.register_outputs({"topology_name": self.topology_name})
