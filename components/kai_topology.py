"""The cluster's KAI ``Topology`` objects (``kai.scheduler/v1alpha1``): one per level set the GPU pools carry.

``gpuscale`` holds every level of ``spec.topology.levels``; a pool whose instance types carry fewer AWS network layers
(g5, g6, p5.4xlarge carry none) gets ``gpuscale-<n>-network-layers`` without them, because KAI v0.17 leaves a node that
lacks any level of a Topology out of its tree (``gpuscale.manifests.kai_wiring``).

Levels are node labels, coarsest first. Who sets each default level on EKS (``research/serving-facts.md`` section 5):

- ``topology.kubernetes.io/zone`` (alias ``zone``): kubelet / cloud-controller-manager on every node; Karpenter also
  puts it on NodeClaims and can provision for it (a well-known label).
- ``topology.k8s.aws/network-node-layer-1`` .. ``-3`` (aliases ``spine``, ``block``, ``rack``; ``-4`` on 4-layer
  types): the AWS cloud-controller-manager, from EC2 ``DescribeInstanceTopology`` at node registration (CCM >= 1.30.4 /
  1.31.2 / 1.32.0; on EKS it runs in the managed control plane, so Karpenter nodes get them). Layer 1 is the broadest.
  Only instance types the topology API supports carry them (p4d/p5/p5e/p5en/p6, trn1/trn2, g6e, ...; the catalogue's
  ``network_node_layers``).
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

from gpuscale.manifests.kai import topology_bodies
from gpuscale.manifests.kai_wiring import TOPOLOGY_NAME
from gpuscale.spec.base import Spec
from gpuscale.spec.platform import PlatformSpec


class KaiTopologyArgs(Spec):
    """Inputs of ``KaiTopology``."""

    platform: PlatformSpec
    """The validated platform spec; its ``topology.levels`` and the pools' instance types decide the Topologies."""


class KaiTopology(pulumi.ComponentResource):
    """The KAI Topologies the workload wiring's placement annotations name.

    Creates ``<name>-topology`` (Topology ``gpuscale``) and ``<name>-<topology>`` for every reduced level set, all
    cluster-scoped. ``depends_on`` should hold ``KaiScheduler.chart`` (CRD). See KAI ``docs/topology/README.md``.
    """

    topologies: dict[str, CustomResource]
    """The Topology resources by Kubernetes name."""
    topology_names: pulumi.Output[list[str]]
    """Names workloads put in ``kai.scheduler/topology``."""

    def __init__(
        self, name: str, args: KaiTopologyArgs, *,
        depends_on: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpuscale:index:KaiTopology", name, None, opts)
        self.topologies = {}
        for body in topology_bodies(args.platform):
            k8s_name = str(body["metadata"]["name"])
            self.topologies[k8s_name] = CustomResource(
                f"{name}-topology" if k8s_name == TOPOLOGY_NAME else f"{name}-{k8s_name}",
                api_version=body["apiVersion"],
                kind=body["kind"],
                metadata=body["metadata"],
                spec=body["spec"],
                opts=pulumi.ResourceOptions(parent=self, depends_on=list(depends_on)),
            )
        self.topology_names = pulumi.Output.from_input(list(self.topologies))
        self.register_outputs({"topology_names": self.topology_names})
