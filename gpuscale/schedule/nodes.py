"""The nodes a Karpenter NodePool can launch, as Node objects with what EKS, Karpenter and the AWS CCM put on them.

One node per possible node: the pool's instance type for its pods, as many as the NodePool ``limits`` admit (Karpenter
counts node capacity against limits), over the pool's zones in blocks of one gang's node count (Karpenter launches the
nodes of a pending zone-bound gang in one zone; single-pod replicas spread one node per zone in turn). Sources, all
at the pinned releases:

- Labels: Karpenter v1.14.1 ``pkg/providers/instancetype/types.go`` ``computeRequirements`` (every single-valued
  requirement becomes a node label) and ``pkg/apis/v1/labels.go``; the NodePool template's labels and taints; the
  kubelet's ``kubernetes.io/hostname``; the AWS cloud-controller-manager's ``topology.k8s.aws/network-node-layer-N``
  one per network node EC2 reports for the type (``GpuInstanceType.network_node_layers``, the catalogue data the KAI
  Topology is built from; none on types EC2 topology does not support).
- Allocatable: the EFA devices of EFA pools (``efa_devices``); Karpenter v1.14.1 ``types.go``: memory minus ``vmMemoryOverheadPercent`` (0.075), ``kubeReserved``
  (CPU by range; memory ``11 * maxPods + 255`` MiB), eviction threshold 100Mi; ``maxPods`` ENI-limited on AL2023.

Not modelled: DaemonSet pods (the serving pods request ``HOST_SHARE`` of the node, leaving room for them);
``topology.k8s.aws/zone-id`` (the zone ID mapping is per account); network-node IDs are synthetic (one layer-1 and
layer-2 node per zone, layer-3 blocks of ``NETWORK_BLOCK_NODES`` nodes), since EC2 assigns them at launch.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuscale import labels
from gpuscale.spec.catalogue import CATALOGUE, GpuInstanceType

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
REGION_LABEL = "topology.kubernetes.io/region"
ARCH_LABEL = "kubernetes.io/arch"
OS_LABEL = "kubernetes.io/os"
KARPENTER_NODECLASS_LABEL = "karpenter.k8s.aws/ec2nodeclass"
KARPENTER_REGISTERED_LABEL = "karpenter.sh/registered"
KARPENTER_INITIALIZED_LABEL = "karpenter.sh/initialized"
AWS_LABEL_PREFIX = "karpenter.k8s.aws/"

VM_MEMORY_OVERHEAD = 0.075
"""Karpenter ``settings.vmMemoryOverheadPercent`` default."""
EVICTION_HARD_MEMORY_MIB = 100
KUBE_RESERVED_EPHEMERAL_GIB = 1
EVICTION_HARD_NODEFS_FRACTION = 0.10
CPU_RESERVED_RANGES = ((0, 1000, 0.06), (1000, 2000, 0.01), (2000, 4000, 0.005), (4000, 1 << 31, 0.0025))
"""Karpenter ``kubeReservedResources``: (start millicores, end millicores, fraction reserved)."""

ENI_LIMITED_MAX_PODS: Mapping[str, int] = {
    "p5.48xlarge": 100, "p5.4xlarge": 118, "p5en.48xlarge": 198, "p4d.24xlarge": 737, "p4de.24xlarge": 737,
    "g6e.xlarge": 58, "g6e.2xlarge": 58, "g6e.12xlarge": 292, "g6e.24xlarge": 492, "g6e.48xlarge": 492,
    "g5.xlarge": 58, "g5.2xlarge": 58, "g5.12xlarge": 737, "g5.48xlarge": 345,
    "g6.xlarge": 58, "g6.12xlarge": 234, "g6.48xlarge": 737,
}
"""``ENILimitedPods``: default-card ENIs x (IPv4 per ENI - 1) + 2, from Karpenter v1.14.1
``zz_generated.vpclimits.go``."""

NETWORK_BLOCK_NODES = 4
"""Nodes per synthetic layer-3 network node (an assumption: EC2 does not document block sizes)."""
CAPACITY_TYPE_PREFERENCE = ("reserved", "spot", "on-demand")
"""Karpenter launches the cheapest allowed capacity type: reserved, then spot, then on-demand."""
_INSTANCE_SCHEME = re.compile(r"(^[a-z]+)(\-[0-9]+tb)?([0-9]+).*\.")
"""Karpenter ``instanceTypeScheme`` (category, generation)."""
MIB = 1024**2
GIB = 1024**3


class NodePoolError(ValueError):
    """A NodePool this replay cannot turn into nodes."""


@dataclass(frozen=True)
class PodRequest:
    """The largest request among the pods that target a pool, per resource."""

    cpu_millis: int
    memory_bytes: int
    gpus: int


def _requirement(pool: Mapping[str, Any], key: str) -> list[str]:
    for r in pool["spec"]["template"]["spec"].get("requirements", []):
        if r.get("key") == key and r.get("operator") == "In":
            return [str(v) for v in r.get("values", [])]
    return []


def parse_quantity(value: Any) -> float:
    """A Kubernetes quantity as a float in base units (cores, bytes, count)."""
    text = str(value)
    suffixes = {"Ki": 1024, "Mi": MIB, "Gi": GIB, "Ti": 1024**4, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "m": 1e-3}
    for suffix, factor in suffixes.items():
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * factor
    return float(text)


def allocatable(it: GpuInstanceType, root_volume_bytes: int | None) -> dict[str, str]:
    """Node ``status.allocatable`` as Karpenter predicts it (and the AL2023 kubelet configures it)."""
    pods = ENI_LIMITED_MAX_PODS[it.name]
    cpu_millis = it.vcpus * 1000
    reserved_cpu = 0
    for start, end, fraction in CPU_RESERVED_RANGES:
        if cpu_millis >= start:
            reserved_cpu += int((min(cpu_millis, end) - start) * fraction)
    mem_mib = it.memory_gib * 1024
    mem_mib -= math.ceil(mem_mib * VM_MEMORY_OVERHEAD)
    mem_mib -= 11 * pods + 255 + EVICTION_HARD_MEMORY_MIB
    out = {
        "cpu": f"{cpu_millis - reserved_cpu}m",
        "memory": f"{mem_mib}Mi",
        "pods": str(pods),
        labels.GPU_RESOURCE: str(it.gpus_per_node),
    }
    if root_volume_bytes is not None:
        storage = root_volume_bytes - KUBE_RESERVED_EPHEMERAL_GIB * GIB - math.ceil(root_volume_bytes * EVICTION_HARD_NODEFS_FRACTION)
        out["ephemeral-storage"] = str(storage)
    return out


def capacity(it: GpuInstanceType, root_volume_bytes: int | None) -> dict[str, str]:
    mem_mib = it.memory_gib * 1024
    out = {
        "cpu": str(it.vcpus),
        "memory": f"{mem_mib - math.ceil(mem_mib * VM_MEMORY_OVERHEAD)}Mi",
        "pods": str(ENI_LIMITED_MAX_PODS[it.name]),
        labels.GPU_RESOURCE: str(it.gpus_per_node),
    }
    if root_volume_bytes is not None:
        out["ephemeral-storage"] = str(root_volume_bytes)
    return out


def _fits(it: GpuInstanceType, request: PodRequest, root_volume_bytes: int | None) -> bool:
    alloc = allocatable(it, root_volume_bytes)
    return (
        it.gpus_per_node >= request.gpus
        and parse_quantity(alloc["cpu"]) * 1000 >= request.cpu_millis
        and parse_quantity(alloc["memory"]) >= request.memory_bytes
    )


def choose_instance_type(
    pool_name: str, types: Sequence[str], request: PodRequest | None, root_volume_bytes: int | None
) -> GpuInstanceType:
    """Karpenter's pick for the pool's pods: the cheapest allowed type the largest pod fits; without pods, the
    cheapest type; when nothing fits, the largest (so the scheduler's fit error names what is missing)."""
    unknown = [t for t in types if t not in CATALOGUE]
    if unknown or not types:
        raise NodePoolError(f"NodePool {pool_name}: instance types {unknown or 'missing'} are not in the GPU catalogue")
    candidates = sorted((CATALOGUE[t] for t in types), key=lambda it: (it.on_demand_usd_per_hour, it.name))
    if request is None:
        return candidates[0]
    fitting = [it for it in candidates if _fits(it, request, root_volume_bytes)]
    if fitting:
        return fitting[0]
    return max(candidates, key=lambda it: (it.gpus_per_node, it.vcpus, it.memory_gib, it.name))


def node_count(pool: Mapping[str, Any], it: GpuInstanceType, root_volume_bytes: int | None) -> int:
    """How many nodes of ``it`` fit under the NodePool's ``limits`` (counted on node capacity)."""
    limits = pool["spec"].get("limits") or {}
    if labels.GPU_RESOURCE not in limits:
        raise NodePoolError(f"NodePool {pool['metadata']['name']}: no {labels.GPU_RESOURCE} limit, so no bound on its nodes")
    cap = capacity(it, root_volume_bytes)
    counts = [
        math.floor(parse_quantity(limit) / parse_quantity(cap[resource]) + 1e-9)
        for resource, limit in limits.items() if resource in cap and parse_quantity(cap[resource]) > 0
    ]
    return max(0, min(counts))


def efa_devices(node_class: Mapping[str, Any] | None) -> int:
    """``vpc.amazonaws.com/efa`` devices a node of this EC2NodeClass offers: one per ``efa-only`` entry of its
    ``networkInterfaces`` (Karpenter v1.14.1 ``pkg/providers/instancetype/types.go`` counts them when the field is set;
    upstream-facts-2.md B4). gpuscale sets the field, and runs the EFA device plugin, on EFA pools only; 0 elsewhere."""
    if node_class is None:
        return 0
    return sum(1 for nic in node_class.get("spec", {}).get("networkInterfaces", []) if nic.get("interfaceType") == "efa-only")


def root_volume_bytes(node_class: Mapping[str, Any] | None) -> int | None:
    if node_class is None:
        return None
    for bdm in node_class.get("spec", {}).get("blockDeviceMappings", []):
        if bdm.get("rootVolume") and bdm.get("ebs", {}).get("volumeSize"):
            return int(parse_quantity(bdm["ebs"]["volumeSize"]))
    return None


def instance_labels(it: GpuInstanceType) -> dict[str, str]:
    """The labels EKS and Karpenter put on a node of this instance type (well-known, ``karpenter.k8s.aws/*`` and the
    GPU ones); zone and capacity type are the offering's, not the type's. ``gpuscale schedule``'s nodes and the e2e
    tier's kwok instance types both read them here."""
    family, size = it.name.split(".", 1)
    out = {
        INSTANCE_TYPE_LABEL: it.name,
        ARCH_LABEL: "amd64",
        OS_LABEL: "linux",
        AWS_LABEL_PREFIX + "instance-cpu": str(it.vcpus),
        AWS_LABEL_PREFIX + "instance-memory": str(it.memory_gib * 1024),
        AWS_LABEL_PREFIX + "instance-family": family,
        AWS_LABEL_PREFIX + "instance-size": size,
        AWS_LABEL_PREFIX + "instance-hypervisor": "nitro",
        AWS_LABEL_PREFIX + "instance-capability-flex": "false",
        AWS_LABEL_PREFIX + "instance-gpu-name": it.gpu.name.lower().replace(" ", "-"),
        AWS_LABEL_PREFIX + "instance-gpu-manufacturer": "nvidia",
        AWS_LABEL_PREFIX + "instance-gpu-count": str(it.gpus_per_node),
    }
    parts = _INSTANCE_SCHEME.match(it.name)
    if parts:
        out[AWS_LABEL_PREFIX + "instance-category"] = parts.group(1)
        out[AWS_LABEL_PREFIX + "instance-generation"] = parts.group(3)
    return out


def network_node_labels(it: GpuInstanceType, zone: str, index_in_zone: int) -> dict[str, str]:
    """The ``network-node-layer-N`` labels the AWS CCM writes on a node of ``it``: one per layer of the type's
    ``network_node_layers`` (none where EC2 topology does not support it). Synthetic IDs: one network node per zone on
    every layer but the last, which groups ``NETWORK_BLOCK_NODES`` nodes."""
    layers = it.network_node_layers
    block = index_in_zone // NETWORK_BLOCK_NODES
    return {
        f"{labels.NETWORK_NODE_LAYER_PREFIX}{layer}": f"nn-{zone}-{layer}" + (f"-{block}" if layer == layers else "")
        for layer in range(1, layers + 1)
    }


def pool_nodes(
    pool: Mapping[str, Any], node_class: Mapping[str, Any] | None, region: str, request: PodRequest | None,
    zone_block: int = 1,
) -> list[dict[str, Any]]:
    """Every node the NodePool can launch for pods of ``request`` size; ``zone_block`` consecutive nodes per zone."""
    name = pool["metadata"]["name"]
    template = pool["spec"]["template"]
    root = root_volume_bytes(node_class)
    it = choose_instance_type(name, _requirement(pool, INSTANCE_TYPE_LABEL), request, root)
    zones = _requirement(pool, labels.ZONE_LABEL)
    if not zones:
        raise NodePoolError(f"NodePool {name}: no {labels.ZONE_LABEL} requirement, so no zones to place nodes in")
    allowed = _requirement(pool, labels.KARPENTER_CAPACITY_TYPE_LABEL) or ["on-demand"]
    capacity_type = next((c for c in CAPACITY_TYPE_PREFERENCE if c in allowed), allowed[0])
    node_class_name = template["spec"].get("nodeClassRef", {}).get("name", name)
    efa = {labels.EFA_RESOURCE: str(n)} if (n := efa_devices(node_class)) else {}
    nodes: list[dict[str, Any]] = []
    per_zone: dict[str, int] = {}
    for i in range(node_count(pool, it, root)):
        zone = zones[(i // max(1, zone_block)) % len(zones)]
        index_in_zone = per_zone.get(zone, 0)
        per_zone[zone] = index_in_zone + 1
        node_name = f"{name}-{zone}-{index_in_zone}"
        node_labels = {
            **instance_labels(it),
            **template.get("metadata", {}).get("labels", {}),
            labels.ZONE_LABEL: zone,
            REGION_LABEL: region,
            labels.KARPENTER_CAPACITY_TYPE_LABEL: capacity_type,
            labels.KARPENTER_NODEPOOL_LABEL: name,
            KARPENTER_NODECLASS_LABEL: node_class_name,
            KARPENTER_REGISTERED_LABEL: "true",
            KARPENTER_INITIALIZED_LABEL: "true",
            labels.HOSTNAME_LABEL: node_name,
        }
        node_labels.update(network_node_labels(it, zone, index_in_zone))
        node: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": node_name, "labels": dict(sorted(node_labels.items()))},
            "spec": {"providerID": f"aws:///{zone}/i-{name}-{i:04d}"},
            "status": {
                "capacity": {**capacity(it, root), **efa},
                "allocatable": {**allocatable(it, root), **efa},
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            },
        }
        taints = template["spec"].get("taints")
        if taints:
            node["spec"]["taints"] = [dict(t) for t in taints]
        nodes.append(node)
    return nodes
