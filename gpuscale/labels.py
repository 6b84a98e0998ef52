"""Label, annotation, taint and resource keys shared across layers (one definition each)."""

from __future__ import annotations

GPU_RESOURCE = "nvidia.com/gpu"
"""Extended resource the NVIDIA device plugin advertises."""
EFA_RESOURCE = "vpc.amazonaws.com/efa"
"""Extended resource the AWS EFA device plugin advertises (one per EFA interface; each is exclusive to one pod)."""
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
CRITICALITY_LABEL = "gpuscale.io/criticality"
"""Autoscaler label (ScaledObject or HPA): the model's ``slo.criticality``, so the policy pack can apply the warm
minimum of a critical SLO (``gpuscale.guardrails.warm_minimum``) to the objects alone."""
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "gpuscale"

KARPENTER_NODEPOOL_LABEL = "karpenter.sh/nodepool"
KARPENTER_CAPACITY_TYPE_LABEL = "karpenter.sh/capacity-type"
KARPENTER_DISCOVERY_TAG = "karpenter.sh/discovery"
DO_NOT_DISRUPT_ANNOTATION = "karpenter.sh/do-not-disrupt"
ACK_UNSAFE_CONSOLIDATION_ANNOTATION = "gpuscale.io/acknowledge-underutilized-consolidation-evicts-inference"
"""NodePool annotation (value ``"true"``) set when the spec acknowledges non-``WhenEmpty``/short consolidation on a
GPU pool; the policy pack accepts such a NodePool instead of refusing it."""
COLD_START_ANNOTATION = "gpuscale.io/cold-start-seconds"
"""NodePool annotation: the cold start (seconds) of the slowest model on the pool, which sets its consolidateAfter floor
(``gpuscale.guardrails.consolidation``); the policy pack reads it."""
STAGE_TAG = "gpuscale.io/stage"
"""EC2NodeClass ``spec.tags`` key holding the stack's ``environment.stage``: how the policy pack knows production (the
EC2NodeClass's metadata is not the builders' to set: the components name it, and its spec is what they pass on)."""

KAI_SCHEDULER_NAME = "kai-scheduler"
KAI_QUEUE_LABEL = "kai.scheduler/queue"
KAI_TOPOLOGY_ANNOTATION = "kai.scheduler/topology"
KAI_TOPOLOGY_REQUIRED_ANNOTATION = "kai.scheduler/topology-required-placement"
KAI_TOPOLOGY_PREFERRED_ANNOTATION = "kai.scheduler/topology-preferred-placement"
KAI_PREEMPTION_DELAY_ANNOTATION = "kai.scheduler/preemption-delay"
"""Minimal pending time (a Go duration) before a PodGroup may evict others by preempt, reclaim or consolidation; read
from the owners first, then the pod (KAI v0.17.0 ``pkg/podgrouper/podgrouper/plugins/constants/constants.go``,
``defaultgrouper/default_grouper.go`` ``calcPodGroupPreemptionDelay``)."""
KAI_INFERENCE_PRIORITY_CLASS = "inference"
"""KAI default PriorityClass (125): non-preemptible, runs in quota only."""
KAI_TRAIN_PRIORITY_CLASS = "train"
"""KAI default PriorityClass (50): preemptible, may use over-quota GPUs."""
KAI_PREEMPTIBILITY_LABEL = "kai.scheduler/preemptibility"
"""Workload/pod label the podgrouper copies into ``PodGroup.spec.preemptibility`` (``preemptible``/``non-preemptible``)."""
LWS_GROUP_KEY_LABEL = "leaderworkerset.sigs.k8s.io/group-key"
"""Pod label LWS sets to the same value on every pod of one group (one replica)."""
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
"""Pod label LWS sets to the pod's index in its group; ``"0"`` is the leader (the only pod serving HTTP)."""
KEDA_PAUSED_ANNOTATION = "autoscaling.keda.sh/paused"
"""ScaledObject annotation (value ``"true"``) that freezes KEDA scaling at the current replica count."""
NETWORK_NODE_LAYER_PREFIX = "topology.k8s.aws/network-node-layer-"
"""Node labels the AWS cloud-controller-manager sets from EC2 DescribeInstanceTopology (layer 1 = broadest)."""

ZONE_LABEL = "topology.kubernetes.io/zone"
HOSTNAME_LABEL = "kubernetes.io/hostname"

SYSTEM_NODE_LABEL = "gpuscale.io/node-role"
SYSTEM_NODE_ROLE = "system"
"""The managed system node group carries ``gpuscale.io/node-role=system``; cluster controllers select it."""
CRITICAL_ADDONS_TAINT_KEY = "CriticalAddonsOnly"
"""Taint (``CriticalAddonsOnly=true:NoSchedule``) on the system node group; Karpenter, CoreDNS and other
controllers tolerate it, so application pods go to Karpenter nodes instead."""
