"""Metrics the doctor tells you to query to confirm a finding live, as the pinned exporters name them."""

from __future__ import annotations

# kubernetes-sigs/karpenter v1.14.1: namespace "karpenter" (pkg/metrics/constants.go), labels "nodepool" and
# "resource_type" (the resource name lower-cased, "-" -> "_": pkg/controllers/metrics/nodepool/controller.go)
KARPENTER_NODEPOOL_USAGE = "karpenter_nodepools_usage"
KARPENTER_NODEPOOL_LIMIT = "karpenter_nodepools_limit"
"""``pkg/controllers/metrics/nodepool/controller.go``."""
KARPENTER_NODECLAIMS_CREATED = "karpenter_nodeclaims_created_total"
KARPENTER_NODECLAIMS_DISRUPTED = "karpenter_nodeclaims_disrupted_total"
"""``pkg/metrics/metrics.go``; ``lifecycle/launch.go`` counts ``reason="insufficient_capacity"`` and
``reason="nodeclass_not_ready"`` here when it deletes a NodeClaim it could not launch."""
KARPENTER_CLOUDPROVIDER_ERRORS = "karpenter_cloudprovider_errors_total"
"""``pkg/cloudprovider/metrics/cloudprovider.go``: labels ``controller`` (the NodeClaim launcher is
``nodeclaim.lifecycle``, ``pkg/controllers/nodeclaim/lifecycle/controller.go``), ``method``, ``provider``, ``error``."""
KARPENTER_UNSCHEDULABLE_PODS = "karpenter_scheduler_unschedulable_pods_count"
"""``pkg/controllers/provisioning/scheduling/metrics.go``."""
KARPENTER_PROVISIONING_UNBOUND = "karpenter_pods_provisioning_unbound_time_seconds"
"""``pkg/controllers/metrics/pod/controller.go``."""

# kai-scheduler/KAI-Scheduler v0.17.0: namespace "kai" (pkg/common/constants DefaultMetricsNamespace), label
# "queue_name" (pkg/queuecontroller/metrics/metrics.go)
KAI_QUEUE_DESERVED_GPUS = "kai_queue_deserved_gpus"
KAI_QUEUE_ALLOCATED_GPUS = "kai_queue_allocated_gpus"
"""The queue controller's gauges (``pkg/queuecontroller/metrics/metrics.go``)."""
KAI_QUEUE_FAIR_SHARE_GPU = "kai_queue_fair_share_gpu"
"""The scheduler's gauge (``pkg/scheduler/metrics/metrics.go``)."""

# kubernetes/kubernetes v1.36.3: subsystem "scheduler" (pkg/scheduler/metrics/metrics.go)
KUBE_SCHEDULER_UNSCHEDULABLE_PODS = "scheduler_unschedulable_pods"
"""Labelled by the filter ``plugin`` that rejected the pod (``TaintToleration``, ``NodeAffinity``, ``NodeResourcesFit``)."""
KUBE_SCHEDULER_PENDING_PODS = "scheduler_pending_pods"


def nodepool_gpu(metric: str, pool: str) -> str:
    return f'{metric}{{nodepool="{pool}",resource_type="nvidia.com/gpu"}}'


def queue_gpus(metric: str, queue: str) -> str:
    return f'{metric}{{queue_name="{queue}"}}'
