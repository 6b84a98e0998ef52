"""Label, annotation, taint and resource keys shared across layers (one definition each)."""

from __future__ import annotations

GPU_RESOURCE = "nvidia.com/gpu"
"""Extended resource the NVIDIA device plugin advertises."""
GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TAINT_VALUE = "true"
GPU_TAINT_EFFECT = "NoSchedule"
"""Every GPU NodePool taints its nodes ``nvidia.com/gpu=true:NoSchedule``; only GPU workloads tolerate it."""
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
"""Node label the device plugin's default affinity requires (no NFD on Karpenter nodes)."""

NODE_POOL_LABEL = "gpuscale.io/node-pool"
"""Node label naming the gpuscale GPU pool; workloads select their pool with it."""
MODEL_LABEL = "gpuscale.io/model"
"""Pod label: the model a pod serves."""
ROLE_LABEL = "gpuscale.io/role"
"""Pod label: ``aggregated``, ``prefill`` or ``decode``; autoscaler queries and the router select on it."""
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "gpuscale"

KARPENTER_NODEPOOL_LABEL = "karpenter.sh/nodepool"
KARPENTER_CAPACITY_TYPE_LABEL = "karpenter.sh/capacity-type"
KARPENTER_DISCOVERY_TAG = "karpenter.sh/discovery"
DO_NOT_DISRUPT_ANNOTATION = "karpenter.sh/do-not-disrupt"

KAI_SCHEDULER_NAME = "kai-scheduler"
KAI_QUEUE_LABEL = "kai.scheduler/queue"
KAI_TOPOLOGY_ANNOTATION = "kai.scheduler/topology"
KAI_TOPOLOGY_REQUIRED_ANNOTATION = "kai.scheduler/topology-required-placement"
KAI_TOPOLOGY_PREFERRED_ANNOTATION = "kai.scheduler/topology-preferred-placement"
KAI_INFERENCE_PRIORITY_CLASS = "inference"
"""KAI default PriorityClass (125): non-preemptible, runs in quota only."""
KAI_TRAIN_PRIORITY_CLASS = "train"
"""KAI default PriorityClass (50): preemptible, may use over-quota GPUs."""

ZONE_LABEL = "topology.kubernetes.io/zone"
HOSTNAME_LABEL = "kubernetes.io/hostname"
