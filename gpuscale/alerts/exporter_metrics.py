"""Every metric name (and label value) the alerts read that is not a vLLM metric, each beside where it was read.

vLLM names live in ``gpuscale.signals.vllm_metrics``, the front door's queue in ``gpuscale.manifests.front_door`` and
the DCGM fields in ``gpuscale.manifests.dcgm``: they are imported here, not respelled. Everything else was read in its
exporter's source at the tag gpuscale pins (``gpuscale.versions``) with ``git show <tag>:<path>``.
"""

from __future__ import annotations

from gpuscale.manifests import dcgm, front_door

# ---------------------------------------------------------------- Karpenter v1.14.1 (kubernetes-sigs/karpenter)
KARPENTER_NODEPOOL_USAGE = "karpenter_nodepools_usage"
"""``pkg/controllers/metrics/nodepool/controller.go`` L58-70: Namespace ``karpenter`` (``pkg/metrics/constants.go``
L27), Subsystem ``nodepools`` (``pkg/metrics/metrics.go`` L28), Name ``usage``; labels ``resource_type``, ``nodepool``;
the value is ``nodePool.Status.Resources[k]`` (L129-137)."""
KARPENTER_NODEPOOL_LIMIT = "karpenter_nodepools_limit"
"""Same file L45-57: ``spec.limits[k]`` of the NodePool, only for resources that have a limit."""
KARPENTER_GPU_RESOURCE_TYPE = "nvidia.com/gpu"
"""The ``resource_type`` value of the GPU: ``strings.ReplaceAll(strings.ToLower(string(k)), "-", "_")`` (same file,
L133): lower case with dashes turned to underscores, the ``/`` and ``.`` kept, so ``nvidia.com/gpu`` stays as it is."""
KARPENTER_NODE_ALLOCATABLE = "karpenter_nodes_allocatable"
"""``pkg/controllers/metrics/node/controller.go`` L65-74 (Subsystem ``nodes``, Name ``allocatable``); labels
``node_name`` (L46), ``resource_type`` and each well-known label's name part snake-cased (L291-301): ``nodepool`` for
``karpenter.sh/nodepool``. gpuscale joins it to a node's taints by ``node_name``."""
KARPENTER_DISRUPTED_TAINT = "karpenter.sh/disrupted"
"""``pkg/apis/v1/taints.go`` L27 (``DisruptedTaintKey``): the taint Karpenter puts on a node it is draining."""

# ---------------------------------------------------------------- KAI Scheduler v0.17.0 (kai-scheduler/KAI-Scheduler)
KAI_QUEUE_ALLOCATED_GPUS = "kai_queue_allocated_gpus"
"""``pkg/queuecontroller/metrics/metrics.go`` L120-126 (Name ``queue_allocated_gpus``) with the queue controller's
``--metrics-namespace`` default ``kai`` (``cmd/queuecontroller/app/options.go`` L41, ``pkg/common/constants/constants.go``
L19); set from the Queue's ``status.allocated`` GPU entry (``getAllocatedGpus``, L222-229)."""
KAI_QUEUE_DESERVED_GPUS = "kai_queue_deserved_gpus"
"""Same file L96-102: the Queue's ``spec.resources.gpu.quota``."""
KAI_QUEUE_LABEL = "queue_name"
"""Same file L25 (``queueNameLabel``): the Queue's ``metadata.name``."""

# ---------------------------------------------------------------- KEDA v2.20.2 (kedacore/keda)
KEDA_SCALER_ERRORS = "keda_scaler_detail_errors_total"
"""``pkg/metricscollector/prommetrics.go`` L80-88: Namespace ``keda``, Subsystem ``scaler``, Name
``detail_errors_total``; labels ``namespace, metric, scaledObject, scaler, triggerIndex, type`` (L35). There is no
``keda_scaler_errors_total`` at v2.20.2 (the name older KEDA docs use); ``RecordScalerError`` (L266-277) increments
this one on every failed poll of a trigger."""
KEDA_EMPTY_UPSTREAM = "keda_scaler_empty_upstream_responses_total"
"""Same file L107-115: a trigger's query returned an empty result; labels ``namespace, scaledResource, triggerName,
metricName, resourceType, ignoreNullValues``."""
KEDA_METRIC_VALUE = "keda_scaler_metrics_value"
"""Same file L44-52: the value each trigger last read (NaN when the query answered NaN)."""
KEDA_HPA_PREFIX = "keda-hpa-"
"""The HPA KEDA creates for a ScaledObject: ``keda-hpa-<name>`` (``controllers/keda/hpa.go`` L401-403)."""

# ---------------------------------------------------------------- kube-state-metrics v2.20.0 (kubernetes/kube-state-metrics)
# kube-prometheus-stack 88.0.0 bundles kube-state-metrics; the names below are at v2.20.0 (``internal/store/``), the
# newest tag read: the chart's exact bundled version was not checked (docs/layer3-serving.md, "Alerts")
KSM_POD_CREATED = "kube_pod_created"
"""``internal/store/pod.go`` L592: the pod's creation time, Unix seconds."""
KSM_POD_READY = "kube_pod_status_ready"
"""``internal/store/pod.go`` L1672: one series per ``condition`` (``true``/``false``/``unknown``), 1 on the pod's."""
KSM_POD_PHASE = "kube_pod_status_phase"
"""``internal/store/pod.go`` L1504: one series per ``phase``, 1 on the pod's."""
KSM_NODE_TAINT = "kube_node_spec_taint"
"""``internal/store/node.go`` L291: one series per taint (``key``, ``value``, ``effect``)."""
KSM_HPA_DESIRED = "kube_horizontalpodautoscaler_status_desired_replicas"
"""``internal/store/horizontalpodautoscaler.go`` L354, label ``horizontalpodautoscaler``."""
KSM_HPA_CURRENT = "kube_horizontalpodautoscaler_status_current_replicas"
"""Same file L335: the replicas the HPA last saw (what an ``AverageValue`` target is multiplied by)."""
KSM_HPA_CONDITION = "kube_horizontalpodautoscaler_status_condition"
"""Same file L423-437: one series per condition ``type`` and ``status`` (``true``/``false``/``unknown``, lower-cased by
``addConditionMetrics``, ``internal/store/utils.go`` L68-79), 1 on the condition's status."""

# ---------------------------------------------------------------- the HPA controller, Kubernetes v1.36.3
HPA_SCALING_ACTIVE = "ScalingActive"
"""The condition ``pkg/controller/podautoscaler/horizontal.go`` sets False (reason ``FailedGetPodsMetric``, L587 and
L1143-1150) when the custom metrics API fails for every metric, or for one while the others would scale down
(L354-356); True (``ValidMetricFound``, L358) otherwise, so one failing metric among several that scale up stays True."""
HPA_SYNC_PERIOD_S = 15
"""``--horizontal-pod-autoscaler-sync-period``'s default (``pkg/controller/podautoscaler/config/v1alpha1/defaults.go``
L40-41): the HPA reads its metrics every 15 s (EKS does not change it)."""

# ---------------------------------------------------------------- kube-apiserver's aggregator, v1.36.3 (k8s.io/kube-aggregator v0.36.3)
AGGREGATOR_UNAVAILABLE = "aggregator_unavailable_apiservice"
"""``pkg/controllers/status/metrics/metrics.go`` L36-42: 1 per APIService the aggregator marks unavailable, label
``name``; kube-prometheus-stack scrapes the API server."""
CUSTOM_METRICS_APISERVICE = "v1beta1.custom.metrics.k8s.io"
"""The APIService prometheus-adapter registers (chart 5.3.0, ``templates/custom-metrics-apiservice.yaml`` L19)."""

# ---------------------------------------------------------------- llm-d router v0.10.0 (llm-d/llm-d-router)
EPP_QUEUE_SIZE = front_door.QUEUE_METRIC
EPP_REQUESTS = "llm_d_epp_flow_control_requests_total"
"""``pkg/epp/metrics/llm_d_router_metrics.go`` (Subsystem ``llm_d_epp``, L28) and ``docs/metrics.md`` L283-296: one
increment per request at its terminal ``outcome``."""
EPP_OUTCOME_TTL = "EvictedTTL"
"""The ``outcome`` of a request the door held past its TTL (the hold limit, ``defaultRequestTTL``): answered 503."""
EPP_OUTCOME_CAPACITY = "RejectedCapacity"
"""The ``outcome`` of a request refused because the door already held ``maxRequests`` (the queue bound)."""

# ---------------------------------------------------------------- DCGM exporter (NVIDIA/dcgm-exporter 4.5.3-4.8.2)
DCGM_XID = dcgm.XID_METRIC
DCGM_ECC_UNCORRECTABLE = dcgm.ECC_UNCORRECTABLE_METRIC
