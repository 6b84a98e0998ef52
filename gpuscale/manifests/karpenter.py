"""Pure builders for Karpenter: GPU and CPU NodePools/EC2NodeClasses, the chart values, the device plugin values.

Schemas: ``karpenter.sh/v1`` NodePool and ``karpenter.k8s.aws/v1`` EC2NodeClass of aws/karpenter-provider-aws
v1.14.1 (``../shared/crds/karpenter-aws/``); facts in ``research/upstream-facts.md`` section 1 and
``research/serving-facts.md`` sections 3.1 and 7.

GPU pools are conservative by construction:

- ``consolidationPolicy: WhenEmpty`` with ``consolidateAfter: 1h`` (spec defaults): a node is only removed once
  no serving pod has come or gone for an hour, so Karpenter never evicts live inference to repack nodes;
- ``expireAfter: Never``: expiry is *forceful* (budgets and ``karpenter.sh/do-not-disrupt`` do not hold it), so
  a GPU node is never recycled mid-day on a timer. AMI updates roll through *drift* instead, which the
  disruption budgets govern: one node at a time, and only inside the pool's drift window (a ``Drifted`` budget of 0
  nodes covers the rest of the day);
- no ``terminationGracePeriod``: in Karpenter v1.14.1 drift is an "eventual" disruption that, on a NodeClaim with a
  grace period, ignores blocking PDBs and ``do-not-disrupt`` (kubernetes-sigs/karpenter ``disruption/types.go``
  ``NewCandidate``) and force-deletes serving pods when it elapses. Without one, a drifted node is only drained when
  every PDB on it allows the eviction, i.e. when each role on it keeps its ready floor; Karpenter launches the
  replacement node first (drift pre-spins replacements);
- every node is tainted ``nvidia.com/gpu=true:NoSchedule`` and labelled ``nvidia.com/gpu.present=true`` (the
  device plugin's default node affinity, since Karpenter nodes run no Node Feature Discovery).
"""

from __future__ import annotations

import math
from typing import Any

from gpuscale import labels, sizing, versions
from gpuscale.guardrails import consolidation
from gpuscale.manifests import cold_start
from gpuscale.problems import Problem
from gpuscale.spec.platform import PlatformSpec
from gpuscale.spec.topology import CPU_POOL_NAME, CpuNodePoolSpec, DisruptionBudget, GpuNodePoolSpec

NODEPOOL_API = "karpenter.sh/v1"
EC2NODECLASS_API = "karpenter.k8s.aws/v1"
NODECLASS_GROUP = "karpenter.k8s.aws"

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
INSTANCE_CATEGORY_LABEL = "karpenter.k8s.aws/instance-category"
INSTANCE_GENERATION_LABEL = "karpenter.k8s.aws/instance-generation"
ARCH_LABEL = "kubernetes.io/arch"

GPU_ROOT_IOPS = 10_000
GPU_ROOT_THROUGHPUT_MIB_S = 500
"""gp3 performance of GPU root volumes: image extraction sits on the cold-start path (Karpenter docs use 10k IOPS)."""
BOTTLEROCKET_OS_VOLUME_GIB = 4
CPU_ROOT_VOLUME_GIB = 50
CPU_EXPIRE_AFTER = "720h"
"""CPU nodes hold no loaded model, so they may be recycled monthly (the Karpenter default)."""
CPU_TERMINATION_GRACE_PERIOD = "1h"
"""How long a CPU node being drained (expired, drifted, consolidated) waits for pods whose PDB refuses the eviction
before Karpenter deletes them (kubernetes-sigs/karpenter v1.14.1 ``pkg/controllers/node/termination/terminator``).
Without it, a lone entry-point pod behind ``minAvailable: 1`` (a single EPP, or the leader of two) keeps its expired
node cordoned forever (``gpuscale.manifests.entry_point``). An hour covers any drain a PDB can allow (a router's
successor is Ready in a minute); on drift, a grace period also makes Karpenter pick nodes with blocking PDBs, which is
fine here: nothing on a CPU node takes a cold start to replace."""
CPU_MIN_GENERATION = 5
MEMORY_GIB_PER_VCPU = {"c": 2, "m": 4, "r": 8}
"""Host memory per vCPU of each EC2 instance category (for the CPU pool's memory limit)."""

IMDS_OPTIONS: dict[str, Any] = {
    "httpEndpoint": "enabled",
    "httpProtocolIPv6": "disabled",
    "httpPutResponseHopLimit": 1,
    "httpTokens": "required",
}
"""IMDSv2 only, hop limit 1: pods (one network hop away) cannot read the node role's credentials."""


# --------------------------------------------------------------------------------------------- GPU pools


def longest_cold_start_s(spec: PlatformSpec, pool_name: str) -> float:
    """The slowest cold start (node + GPU ready + image + weights + engine) among the pool's models, as sizing computed
    it for each model's sized shape (``ModelSizing.cold_start``); 0 if none."""
    slowest = sizing.slowest_cold_start(spec, sizing.size_platform(spec), pool_name)
    return slowest[1] if slowest is not None else 0.0


def gpu_node_limits(pool: GpuNodePoolSpec) -> dict[str, Any]:
    """``nvidia.com/gpu`` is the budget; cpu/memory are set so they never bind before it, whatever the type mix.

    For each instance type, ``ceil(gpu_limit / gpus_per_node)`` nodes reach the GPU limit; the cpu and memory
    limits are the largest such node count times that type's vCPUs / memory.
    """
    nodes = {it.name: math.ceil(pool.gpu_limit / it.gpus_per_node) for it in pool.instances}
    cpu = max(nodes[it.name] * it.vcpus for it in pool.instances)
    memory = max(nodes[it.name] * it.memory_gib for it in pool.instances)
    return {labels.GPU_RESOURCE: pool.gpu_limit, "cpu": cpu, "memory": f"{memory}Gi"}


def budgets_body(budgets: list[DisruptionBudget]) -> list[dict[str, Any]]:
    return [b.model_dump(exclude_none=True) for b in budgets]


def efa_devices_per_pod(pool: GpuNodePoolSpec, instance_type: str, gpus_per_pod: int) -> int:
    """``vpc.amazonaws.com/efa`` devices one pod requests: its share of the node's EFA-only interfaces (Karpenter
    advertises one device per ``efa-only`` entry of the EC2NodeClass); 0 off EFA pools."""
    if not pool.efa:
        return 0
    interfaces = min(it.efa_interfaces for it in pool.instances)
    gpus = next(it.gpus_per_node for it in pool.instances if it.name == instance_type)
    return max(1, interfaces * gpus_per_pod // gpus)


def gpu_node_labels(pool: GpuNodePoolSpec) -> dict[str, str]:
    return {**pool.labels, labels.NODE_POOL_LABEL: pool.name, labels.GPU_PRESENT_LABEL: "true"}


def gpu_taint() -> dict[str, str]:
    return {"key": labels.GPU_TAINT_KEY, "value": labels.GPU_TAINT_VALUE, "effect": labels.GPU_TAINT_EFFECT}


def object_metadata(name: str) -> dict[str, Any]:
    """Every Karpenter object gpuscale emits: an explicit name and the managed-by label."""
    return {"name": name, "labels": {labels.MANAGED_BY_LABEL: labels.MANAGED_BY}}


def nodepool_body(
    pool: GpuNodePoolSpec, *, zones: list[str] | None, name: str | None = None, cold_start_s: float = 0.0,
) -> dict[str, Any]:
    """The GPU NodePool: safe disruption (no terminationGracePeriod, drift only in the window), GPU taint, GPU/cpu/memory
    limits, instance and capacity types.

    ``name`` is the NodePool's (and its EC2NodeClass's) name in the cluster, default the pool's; pods select the pool
    by the ``gpuscale.io/node-pool`` node label, which stays the pool's name whatever the object is called.
    ``cold_start_s`` (the slowest model's, ``longest_cold_start_s``) is written as an annotation when known, so the
    policy pack applies the same ``consolidateAfter`` floor as ``gpuscale validate``.
    """
    name = name or pool.name
    metadata = object_metadata(name)
    annotations: dict[str, str] = {}
    if cold_start_s > 0:
        annotations[labels.COLD_START_ANNOTATION] = str(math.ceil(cold_start_s))
    if pool.acknowledge_underutilized_consolidation_evicts_inference:
        # the policy pack accepts an unsafe GPU NodePool only when it carries the spec's acknowledgement
        annotations[labels.ACK_UNSAFE_CONSOLIDATION_ANNOTATION] = "true"
    if annotations:
        metadata["annotations"] = annotations
    return {
        "apiVersion": NODEPOOL_API,
        "kind": "NodePool",
        "metadata": metadata,
        "spec": {
            "template": {
                "metadata": {"labels": gpu_node_labels(pool)},
                "spec": {
                    "nodeClassRef": {"group": NODECLASS_GROUP, "kind": "EC2NodeClass", "name": name},
                    "requirements": [
                        {"key": INSTANCE_TYPE_LABEL, "operator": "In", "values": list(pool.instance_types)},
                        {
                            "key": labels.KARPENTER_CAPACITY_TYPE_LABEL,
                            "operator": "In",
                            "values": list(pool.capacity_types),
                        },
                        *zone_requirement(zones),
                    ],
                    "taints": [gpu_taint()],
                    "expireAfter": pool.expire_after,
                },
            },
            "limits": gpu_node_limits(pool),
            "disruption": {
                "consolidationPolicy": pool.consolidation_policy,
                "consolidateAfter": pool.consolidate_after,
                "budgets": budgets_body(pool.effective_budgets),
            },
        },
    }


def zone_requirement(zones: list[str] | None) -> list[dict[str, Any]]:
    """Nodes only in ``zones``; no requirement (every zone of the selected subnets) when none are given."""
    return [{"key": labels.ZONE_LABEL, "operator": "In", "values": list(zones)}] if zones else []


def efa_network_interfaces(efa_interfaces: int) -> list[dict[str, Any]]:
    """The EC2 layout for EFA on multi-card instances: ENA primary + EFA-only on card 0, EFA-only on every other card.

    (AWS EC2 user guide "Maximize network bandwidth ... with multiple network cards"; the CRD requires the
    primary ``interface`` at card 0 / device 0 and at most one ``efa-only`` per card.)
    """
    if efa_interfaces <= 0:
        return []
    nics = [
        {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"},
        {"networkCardIndex": 0, "deviceIndex": 1, "interfaceType": "efa-only"},
    ]
    nics += [
        {"networkCardIndex": card, "deviceIndex": 0, "interfaceType": "efa-only"} for card in range(1, efa_interfaces)
    ]
    return nics


def ami_family(alias: str) -> str:
    return alias.partition("@")[0]


def block_device_mappings(
    alias: str, volume_gib: int, *, iops: int | None = None, throughput: int | None = None
) -> list[dict[str, Any]]:
    """Encrypted gp3. AL2023 has one root volume; Bottlerocket keeps a small OS volume and puts images on ``/dev/xvdb``."""
    ebs: dict[str, Any] = {
        "volumeSize": f"{volume_gib}Gi",
        "volumeType": "gp3",
        "encrypted": True,
        "deleteOnTermination": True,
    }
    if iops is not None:
        ebs["iops"] = iops
    if throughput is not None:
        ebs["throughput"] = throughput
    if ami_family(alias) == "bottlerocket":
        os_volume = {
            "volumeSize": f"{BOTTLEROCKET_OS_VOLUME_GIB}Gi",
            "volumeType": "gp3",
            "encrypted": True,
            "deleteOnTermination": True,
        }
        return [{"deviceName": "/dev/xvda", "ebs": os_volume}, {"deviceName": "/dev/xvdb", "ebs": ebs}]
    return [{"deviceName": "/dev/xvda", "rootVolume": True, "ebs": ebs}]


def discovery_selector(cluster_name: str) -> list[dict[str, Any]]:
    return [{"tags": {labels.KARPENTER_DISCOVERY_TAG: cluster_name}}]


def placement_group_name(cluster_name: str, pool: GpuNodePoolSpec) -> str:
    """Name of the cluster placement group of an EFA pool (EC2 names are unique per account and region)."""
    return f"{cluster_name}-{pool.name}"


def selector_terms(ids: list[str] | None, cluster_name: str) -> list[dict[str, Any]]:
    """Subnet or security-group selector terms: exactly ``ids`` when given, else every one tagged
    ``karpenter.sh/discovery: <cluster>`` (terms are ORed; an ``id`` term takes no other field)."""
    if ids:
        return [{"id": i} for i in ids]
    return discovery_selector(cluster_name)


def ec2nodeclass_body(
    pool: GpuNodePoolSpec,
    *,
    cluster_name: str,
    node_role_name: str,
    root_volume_gib: int,
    tags: dict[str, str],
    subnet_ids: list[str] | None = None,
    security_group_ids: list[str] | None = None,
    name: str | None = None,
    stage: str | None = None,
) -> dict[str, Any]:
    """The GPU EC2NodeClass: pinned AMI alias (the NVIDIA variant is picked per type), IMDSv2, sized root volume, EFA
    interfaces and a cluster placement group on EFA pools.

    ``stage`` (the spec's ``environment.stage``) is tagged ``gpuscale.io/stage`` in ``spec.tags``: how the policy pack
    knows production (``gpuscale.guardrails.production``); the instances carry it too.

    Subnets and security groups are the given ids, or discovered by the cluster's ``karpenter.sh/discovery`` tag.
    """
    spec: dict[str, Any] = {
        "amiSelectorTerms": [{"alias": pool.ami_alias}],
        "role": node_role_name,
        "subnetSelectorTerms": selector_terms(subnet_ids, cluster_name),
        "securityGroupSelectorTerms": selector_terms(security_group_ids, cluster_name),
        "metadataOptions": dict(IMDS_OPTIONS),
        "blockDeviceMappings": block_device_mappings(
            pool.ami_alias, root_volume_gib, iops=GPU_ROOT_IOPS, throughput=GPU_ROOT_THROUGHPUT_MIB_S
        ),
        "tags": {**tags, labels.NODE_POOL_LABEL: pool.name, **({labels.STAGE_TAG: stage} if stage else {})},
    }
    if all(it.local_nvme_gib > 0 for it in pool.instances):
        # kubelet and containerd on the striped NVMe: image pulls and model caches off EBS, and Karpenter counts
        # the instance store as ephemeral-storage (it does not detect a RAID0 it did not configure itself)
        spec["instanceStorePolicy"] = "RAID0"
    if pool.efa:
        spec["networkInterfaces"] = efa_network_interfaces(min(it.efa_interfaces for it in pool.instances))
    if pool.cluster_placement:
        # Karpenter v1.11+ resolves the group by name (needs ec2:DescribePlacementGroups, in the controller policy)
        spec["placementGroupSelector"] = {"name": placement_group_name(cluster_name, pool)}
    if pool.reservations:
        # one id term per reservation, ODCR or Capacity Block alike: Karpenter v1.14.1 reads the type and end date from
        # EC2 (pkg/apis/v1/ec2nodeclass_status.go CapacityReservationFromEC2), launches only into active ones and
        # drains a block's nodes 40 min before its end (gpuscale.guardrails.reservations); the NodeClass has no date field
        spec["capacityReservationSelectorTerms"] = [{"id": r.id} for r in pool.reservations]
    spec = cold_start.apply_image_pull(pool, spec)  # SOCI parallel pull, or the image pre-pulled on a snapshot
    return {
        "apiVersion": EC2NODECLASS_API,
        "kind": "EC2NodeClass",
        "metadata": object_metadata(name or pool.name),
        "spec": spec,
    }


def disruption_warnings(pool: GpuNodePoolSpec, cold_start_s: float) -> list[str]:
    """What an acknowledged pool accepts (the spec refuses it unless acknowledged): the consolidation rule's breaches."""
    if not pool.acknowledge_underutilized_consolidation_evicts_inference:
        return []
    found = consolidation.breaches(
        consolidation.NODEPOOL, pool=pool.name, policy=pool.consolidation_policy, after=pool.consolidate_after,
        after_s=pool.consolidate_after_s, cold_start_s=cold_start_s,
    )
    return [f"{message} (acknowledged on this pool)" for _, message in found]


def capacity_warnings(pool: GpuNodePoolSpec) -> list[str]:
    """Settings that are valid but cannot take effect."""
    if "reserved" in pool.capacity_types and not pool.reservations:
        return [
            f"GPU pool {pool.name}: capacity type 'reserved' without capacity_reservation_ids or capacity_reservations; "
            "Karpenter only launches into reservations its EC2NodeClass selects, so this pool gets on-demand/spot "
            "capacity only"
        ]
    if pool.reservations and "reserved" not in pool.capacity_types:
        return [
            f"GPU pool {pool.name}: capacity reservations {[r.id for r in pool.reservations]} are selected but "
            "capacity_types has no 'reserved', so Karpenter never launches into them; add reserved to capacity_types"
        ]
    return []


def network_layer_warnings(pool: GpuNodePoolSpec) -> list[str]:
    """A pool mixing instance types with different EC2 network layer counts: which layers its KAI Topology keeps."""
    layers = {it.name: it.network_node_layers for it in pool.instances}
    if len(set(layers.values())) <= 1:
        return []
    kept = min(layers.values())
    return [
        f"GPU pool {pool.name} mixes instance types with different EC2 network layers "
        f"({', '.join(f'{name}: {n}' for name, n in layers.items())}): its KAI Topology keeps the {kept} layer(s) "
        "every one of them carries, so nodes of each type stay schedulable, but replicas are packed under a network "
        "switch on those layers only; split the pool by instance type to keep the finer layers"
    ]


# --------------------------------------------------------------------------------------------- CPU pool


def cpu_node_limits(pool: CpuNodePoolSpec) -> dict[str, Any]:
    memory = pool.cpu_limit * max(MEMORY_GIB_PER_VCPU[c] for c in pool.instance_categories)
    return {"cpu": pool.cpu_limit, "memory": f"{memory}Gi"}


def cpu_nodepool_body(pool: CpuNodePoolSpec, *, zones: list[str] | None, name: str = CPU_POOL_NAME) -> dict[str, Any]:
    """The general-purpose NodePool: no GPU taint; may repack (nothing on it holds a loaded model)."""
    return {
        "apiVersion": NODEPOOL_API,
        "kind": "NodePool",
        "metadata": object_metadata(name),
        "spec": {
            "template": {
                "metadata": {"labels": {labels.NODE_POOL_LABEL: name}},
                "spec": {
                    "nodeClassRef": {"group": NODECLASS_GROUP, "kind": "EC2NodeClass", "name": name},
                    "requirements": [
                        {"key": INSTANCE_CATEGORY_LABEL, "operator": "In", "values": list(pool.instance_categories)},
                        {"key": INSTANCE_GENERATION_LABEL, "operator": "Gt", "values": [str(CPU_MIN_GENERATION)]},
                        {"key": ARCH_LABEL, "operator": "In", "values": ["amd64"]},
                        {
                            "key": labels.KARPENTER_CAPACITY_TYPE_LABEL,
                            "operator": "In",
                            "values": list(pool.capacity_types),
                        },
                        *zone_requirement(zones),
                    ],
                    "expireAfter": CPU_EXPIRE_AFTER,
                    "terminationGracePeriod": CPU_TERMINATION_GRACE_PERIOD,
                },
            },
            "limits": cpu_node_limits(pool),
            "disruption": {
                "consolidationPolicy": pool.consolidation_policy,
                "consolidateAfter": pool.consolidate_after,
                "budgets": [{"nodes": "10%"}],
            },
        },
    }


def cpu_ec2nodeclass_body(
    *,
    cluster_name: str,
    node_role_name: str,
    ami_alias: str,
    tags: dict[str, str],
    name: str = CPU_POOL_NAME,
    subnet_ids: list[str] | None = None,
    security_group_ids: list[str] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": EC2NODECLASS_API,
        "kind": "EC2NodeClass",
        "metadata": object_metadata(name),
        "spec": {
            "amiSelectorTerms": [{"alias": ami_alias}],
            "role": node_role_name,
            "subnetSelectorTerms": selector_terms(subnet_ids, cluster_name),
            "securityGroupSelectorTerms": selector_terms(security_group_ids, cluster_name),
            "metadataOptions": dict(IMDS_OPTIONS),
            "blockDeviceMappings": block_device_mappings(ami_alias, CPU_ROOT_VOLUME_GIB),
            "tags": {**tags, labels.NODE_POOL_LABEL: name},
        },
    }


# --------------------------------------------------------------------------------------------- Helm values


def system_node_selector() -> dict[str, str]:
    return {labels.SYSTEM_NODE_LABEL: labels.SYSTEM_NODE_ROLE}


def karpenter_chart_values(
    *,
    cluster_name: str,
    queue_name: str,
    region: str,
    service_account: str,
    replicas: int,
    cpu: str,
    memory: str,
    zonal_shift: bool = False,
    capacity_buffer: bool = False,
) -> dict[str, Any]:
    """Values of the Karpenter chart: cluster, interruption queue, Pod Identity service account, system nodes, and
    the ``CapacityBuffer`` feature gate when a model keeps spare nodes that way (the chart's
    ``settings.featureGates.capacityBuffer``, rendered into ``FEATURE_GATES``; karpenter-provider-aws v1.14.1
    ``charts/karpenter/templates/deployment.yaml``; unset, the chart's default ``false`` stands).

    The controller runs on the managed system node group (never on nodes it manages: the chart's default
    affinity already requires ``karpenter.sh/nodepool DoesNotExist``), tolerating its CriticalAddonsOnly taint.
    Requests equal limits (Guaranteed QoS) so node pressure never evicts the autoscaler.
    """
    resources = {"cpu": cpu, "memory": memory}
    settings: dict[str, Any] = {
        "clusterName": cluster_name,
        "interruptionQueue": queue_name,
        "enableZonalShift": zonal_shift,
    }
    if capacity_buffer:
        settings["featureGates"] = {"capacityBuffer": True}
    return {
        "settings": settings,
        "serviceAccount": {"create": True, "name": service_account},
        "replicas": replicas,
        "nodeSelector": system_node_selector(),
        "tolerations": [{"key": labels.CRITICAL_ADDONS_TAINT_KEY, "operator": "Exists"}],
        # Pod Identity supplies credentials; the region must not come from IMDS (hop limit 1 blocks pods)
        "controller": {
            "resources": {"requests": resources, "limits": resources},
            "env": [{"name": "AWS_REGION", "value": region}],
        },
    }


def device_plugin_values(*, skip_pools: list[str] | None = None) -> dict[str, Any]:
    """Values of the NVIDIA device plugin chart that land the DaemonSet on Karpenter GPU nodes.

    The chart's default affinity wants an NFD label or ``nvidia.com/gpu.present=true``; Karpenter nodes have
    no NFD, so our NodePools set the latter and we require exactly it. ``skip_pools`` (Bottlerocket pools,
    whose OS ships its own plugin) are excluded by the ``gpuscale.io/node-pool`` label.
    """
    match: list[dict[str, Any]] = [{"key": labels.GPU_PRESENT_LABEL, "operator": "In", "values": ["true"]}]
    if skip_pools:
        match.append({"key": labels.NODE_POOL_LABEL, "operator": "NotIn", "values": sorted(skip_pools)})
    return {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": match}]}
            }
        },
        "tolerations": [
            {"key": labels.GPU_TAINT_KEY, "operator": "Exists", "effect": labels.GPU_TAINT_EFFECT},
            {"key": labels.CRITICAL_ADDONS_TAINT_KEY, "operator": "Exists"},
        ],
        "priorityClassName": "system-node-critical",
        "gfd": {"enabled": False},
        "nfd": {"enabled": False},
        # MOFED would mount every /dev/infiniband/uverbs* into GPU pods, including the EFA devices the EFA device plugin
        # hands out one pod at a time. v0.20.0 leaves it off (chart value null, so no MOFED_ENABLED env); the EKS user
        # guide says newer plugins default it on, so say it (upstream-facts-2.md B4).
        "mofedEnabled": False,
    }


def efa_pools(spec: PlatformSpec) -> list[str]:
    """GPU pools with ``efa: true`` (the EFA device plugin runs on exactly these)."""
    return sorted(p.name for p in spec.topology.gpu_pools if p.efa)


def efa_device_plugin_values(pools: list[str], image_repository: str) -> dict[str, Any]:
    """Values of the ``aws-efa-k8s-device-plugin`` chart (aws/eks-charts v0.5.30) that land its DaemonSet on the EFA
    pools only and let it past their GPU taint.

    The chart's required node affinity is one term per ``supportedInstanceLabels.keys`` entry, ``<key> In <values>``
    (plus ``eks.amazonaws.com/compute-type NotIn [auto]``): keyed on ``gpuscale.io/node-pool`` it selects exactly the EFA
    pools. Its only default toleration is ``CriticalAddonsOnly``, so without ours it never runs on tainted GPU nodes and
    no pod ever gets a ``vpc.amazonaws.com/efa`` device. ``image_repository`` is the plugin in the cluster's region's
    EKS registry (``versions.efa_device_plugin_repository``): the chart's default is us-west-2's, which nodes in any
    other region pull across regions (slower, billed, and unreachable through an in-region ECR VPC endpoint).
    """
    return {
        "image": {"repository": image_repository},
        "supportedInstanceLabels": {"keys": [labels.NODE_POOL_LABEL], "values": sorted(pools)},
        "tolerations": [{"key": labels.GPU_TAINT_KEY, "operator": "Exists", "effect": labels.GPU_TAINT_EFFECT}],
    }


def efa_region_problems(spec: PlatformSpec) -> list[Problem]:
    """An EFA pool in a region with no documented EKS image registry: the device plugin would have no image to pull."""
    region = spec.environment.aws_region
    if not efa_pools(spec) or versions.efa_device_plugin_repository(region) is not None:
        return []
    known = ", ".join(sorted(versions.eks_addon_registries()))
    return [Problem("environment.aws_region",
        f"{region} has no Amazon EKS add-on image registry gpuscale knows (gpuscale/upstream/eks_addon_registries.tsv, "
        f"from the EKS User Guide's add-ons-images page), so the EFA device plugin of pool(s) {', '.join(efa_pools(spec))} "
        f"has no image there. Use one of {known}, or set efa: false on the pool(s)")]
