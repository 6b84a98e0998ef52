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

from typing import Annotated

import pulumi
from pulumi_kubernetes.apiextensions import CustomResource
from pydantic import AfterValidator, Field

from gpuscale.components.children import child_opts, claim, object_name
from gpuscale.manifests.kai import topology_bodies, topology_body
from gpuscale.manifests.kai_wiring import TOPOLOGY_NAME
from gpuscale.spec.base import Spec
from gpuscale.spec.platform import PlatformSpec
from gpuscale.spec.topology import TopologyLevel, default_levels, level_problem


def _checked(levels: list[TopologyLevel]) -> list[TopologyLevel]:
    problem = level_problem(levels)
    if problem:
        raise ValueError(problem)
    return levels


class KaiTopologyArgs(Spec):
    """The topology levels, coarsest first (default: zone, the three AWS network layers, node)."""

    levels: Annotated[list[TopologyLevel], AfterValidator(_checked)] = Field(
        default_factory=default_levels, min_length=1, max_length=16,
    )
    """Node labels that name placement domains; ``kubernetes.io/hostname`` may only be last."""
    reduced: dict[str, Annotated[list[TopologyLevel], AfterValidator(_checked)]] = Field(default_factory=dict)
    """Further Topologies by name, for pools whose nodes lack some of ``levels`` (``gpuscale-<n>-network-layers``):
    KAI v0.17 leaves a node missing any level of a Topology out of it, so such pools' workloads name their own."""

    @classmethod
    def from_spec(cls, spec: PlatformSpec) -> KaiTopologyArgs:
        extra = {
            str(b["metadata"]["name"]): [lv for lv in spec.topology.levels
                                         if lv.node_label in {x["nodeLabel"] for x in b["spec"]["levels"]}]
            for b in topology_bodies(spec) if b["metadata"]["name"] != TOPOLOGY_NAME
        }
        return cls(levels=spec.topology.levels, reduced=extra)


class KaiTopology(pulumi.ComponentResource):
    """The KAI Topology the workload wiring's placement annotations name.

    Creates ``<name>-topology`` (Topology ``gpuscale``, cluster-scoped; one per cluster) and ``<name>-<topology>`` for
    every reduced level set in ``reduced``. Expects KAI on the cluster
    (``KaiScheduler``: its CRD; put ``KaiScheduler.chart`` in ``opts.depends_on`` when it is in the same program).
    Every ``VllmService`` whose wiring names a placement needs it. See KAI ``docs/topology/README.md``.
    """

    topology: CustomResource
    """The Topology resource."""
    topology_name: pulumi.Output[str]
    """Name workloads put in ``kai.scheduler/topology``."""
    reduced: dict[str, CustomResource]
    """The Topologies of the reduced level sets, by name."""

    def __init__(self, name: str, args: KaiTopologyArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuscale:index:KaiTopology", name, None, opts)
        claim(self, f"KaiTopology {name!r}", "kubernetes", "Topology", TOPOLOGY_NAME,
              fix="the workload wiring names one Topology per cluster: create it once")
        body = topology_body(args.levels)
        self.topology = CustomResource(
            f"{name}-topology",
            api_version=body["apiVersion"],
            kind=body["kind"],
            metadata=body["metadata"],
            spec=body["spec"],
            opts=child_opts(self, opts),
        )
        self.topology_name = object_name(self.topology)
        self.reduced = {}
        for k8s_name, levels in args.reduced.items():
            b = topology_body(levels, k8s_name)
            self.reduced[k8s_name] = CustomResource(
                f"{name}-{k8s_name}", api_version=b["apiVersion"], kind=b["kind"], metadata=b["metadata"],
                spec=b["spec"], opts=child_opts(self, opts),
            )
        self.register_outputs({"topology_name": self.topology_name})
