"""Every condition, reason and event text ``gpuscale doctor`` matches, as the controllers write it, with its source.

Each constant is the literal (or the fixed part of a ``fmt.Sprintf`` format) at the pinned tag; the doctor matches
nothing else. Where a format has verbs, only a fixed fragment is kept and the comment quotes the whole format.
Sources (read with ``git show <tag>:<path>``):

- Karpenter core: kubernetes-sigs/karpenter v1.14.1 (the release ``versions.KARPENTER`` ships).
- Karpenter AWS provider: aws/karpenter-provider-aws v1.14.1.
- KAI Scheduler: kai-scheduler/KAI-Scheduler v0.17.0 (``versions.KAI_SCHEDULER``).
- kube-scheduler: kubernetes/kubernetes v1.36.3 (``versions.DEFAULT_KUBERNETES_VERSION`` 1.36; the Go module
  ``k8s.io/kubernetes@v1.36.3``). KAI runs the same filter plugins (its go.mod pins ``k8s.io/kubernetes v1.35.4``),
  so a KAI pod's fit error carries the same fragments.
"""

from __future__ import annotations

# --- kube-scheduler (kubernetes/kubernetes v1.36.3) ----------------------------------------------------------------

KUBE_FAILED_SCHEDULING = "FailedScheduling"
"""Event reason on the pod (``pkg/scheduler/schedule_one.go`` ``handleSchedulingFailure``: ``Eventf(pod, nil, Warning,
"FailedScheduling", "Scheduling", msg)``); Karpenter uses the same reason (its ``pkg/events/reason.go``)."""
KUBE_NO_NODE_AVAILABLE = "nodes are available"
"""``pkg/scheduler/framework/types.go``: ``NoNodeAvailableMsg = "0/%v nodes are available"``."""
KUBE_UNTOLERATED_TAINT = "node(s) had untolerated taint"
"""``pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go`` Filter: ``"node(s) had untolerated
taint(s)"`` (older releases: ``"node(s) had untolerated taint {%s: %s}"``; the fragment matches both)."""
KUBE_NODE_AFFINITY_MISMATCH = "node(s) didn't match Pod's node affinity/selector"
"""``pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go``: ``ErrReasonPod``."""
KUBE_INSUFFICIENT = "Insufficient "
"""``pkg/scheduler/framework/plugins/noderesources/fit.go``: ``fmt.Sprintf("Insufficient %v", rName)``."""

# --- Karpenter core (kubernetes-sigs/karpenter v1.14.1) --------------------------------------------------------------

KARPENTER_FAILED_TO_SCHEDULE = "Failed to schedule pod, "
"""``pkg/controllers/provisioning/scheduling/events.go`` ``PodFailedToScheduleEvent``: reason ``FailedScheduling``,
``fmt.Sprintf("Failed to schedule pod, %s", err)`` (errors of several NodePools joined by ``multierr``: ``"; "``)."""
KARPENTER_NOMINATED = "Nominated"
"""``pkg/events/reason.go``; ``events.go`` ``NominatePodEvent``: ``"Pod should schedule on: %s"`` with
``nodeclaim/<name>`` and/or ``node/<name>``."""
KARPENTER_NOMINATED_PREFIX = "Pod should schedule on: "
KARPENTER_LIMITS_EXCEEDED = "all available instance types exceed limits for nodepool"
"""``pkg/controllers/provisioning/scheduling/scheduler.go`` ``addToNewNodeClaim``."""
KARPENTER_NODE_LIMIT_EXHAUSTED = "node limits have been exhausted for nodepool"
"""Same function: the NodePool's ``limits.nodes`` is used up."""
KARPENTER_NO_INSTANCE_TYPE = "no instance type"
"""``pkg/controllers/provisioning/scheduling/nodeclaim.go`` ``InstanceTypeFilterError.Error``: every variant begins
``"no instance type met ..."`` / ``"no instance type has ..."`` / ``"no instance type which ..."``; ``CanAdd``:
``"no instance type satisfies both scheduling and dynamic resource requirements"``."""
KARPENTER_ALL_TYPES_FILTERED = "nodepool requirements filtered out all available instance types"
"""``scheduler.go``: the NodePool's own requirements leave no instance type."""
KARPENTER_NO_COMPATIBLE_INSTANCE_TYPES = "NoCompatibleInstanceTypes"
"""Event reason on the NodePool (``events.go`` ``NoCompatibleInstanceTypes``): ``"NodePool requirements filtered out
all compatible available instance types"``."""
KARPENTER_INCOMPATIBLE_REQUIREMENTS = "incompatible requirements"
"""``nodeclaim.go`` ``CanAdd``: ``fmt.Errorf("incompatible requirements, %w", err)`` (the pod's node selector or
affinity against the NodePool's requirements and labels)."""
KARPENTER_DID_NOT_TOLERATE = "did not tolerate taint"
"""``pkg/scheduling/taints.go`` ``ToleratesPod``: ``serrors.Wrap(fmt.Errorf("did not tolerate taint"), "taint", ...)``."""
KARPENTER_INSUFFICIENT_CAPACITY = "InsufficientCapacityError"
"""Event reason on the NodeClaim (``pkg/events/reason.go``; ``pkg/controllers/nodeclaim/lifecycle/events.go``:
``"NodeClaim %s event: %s"``); ``launch.go`` then deletes the NodeClaim."""
KARPENTER_NODECLASS_NOT_READY_EVENT = "NodeClassNotReady"
"""Event reason on the NodeClaim (``lifecycle/events.go`` ``NodeClassNotReadyEvent``)."""
NODECLAIM_LAUNCHED = "Launched"
NODECLAIM_REGISTERED = "Registered"
NODECLAIM_INITIALIZED = "Initialized"
"""``pkg/apis/v1/nodeclaim_status.go`` condition types."""
NODECLAIM_LAUNCH_FAILED = "LaunchFailed"
"""``lifecycle/launch.go``: ``SetUnknownWithReason(Launched, "LaunchFailed", ...)`` for a create error of no known
kind; a ``CreateError`` sets its own reason (the AWS provider's, below)."""
AWAITING_RECONCILIATION = "AwaitingReconciliation"
"""awslabs/operatorpkg ``status/condition_set.go`` ``SetUnknown``: the reason of a condition not yet decided (not a
failure). Karpenter v1.14.1's go.mod pins operatorpkg 4da4c353c5fa; read at snapshot 7a13865 (2026-02-17)."""
UNHEALTHY_DEPENDENTS = "UnhealthyDependents"
"""``condition_set.go`` ``recomputeRootCondition``: the root ``Ready`` condition goes False with this reason and the
message ``"<Type>=<Status>, ..."`` of the dependents that are not True; the NodePool's ``NodeClassReady`` copies the
EC2NodeClass's ``Ready`` reason and message."""
NODEPOOL_NODECLASS_READY = "NodeClassReady"
"""``pkg/apis/v1/nodepool_status.go``; ``pkg/controllers/nodepool/readiness/controller.go`` sets it False with reason
``NodeClassNotFound`` / ``NodeClassTerminating`` / ``NodeClassReadinessUnknown`` or the NodeClass's own Ready reason
and message."""

# --- Karpenter AWS provider (aws/karpenter-provider-aws v1.14.1) -----------------------------------------------------

EC2NODECLASS_AMIS_READY = "AMIsReady"
"""``pkg/apis/v1/ec2nodeclass_status.go`` ``ConditionTypeAMIsReady``."""
AMI_NOT_FOUND = "AMINotFound"
"""``pkg/controllers/nodeclass/ami.go``: ``SetFalse(AMIsReady, "AMINotFound", "AMISelector did not match any AMIs")``;
``pkg/errors/errors.go``: the launch ``CreateError`` reason for ``InvalidAMIID.NotFound``."""
AMI_SELECTOR_NO_MATCH = "AMISelector did not match any AMIs"
AMIS_NOT_READY = f"{EC2NODECLASS_AMIS_READY}=False"
"""How an unready ``AMIsReady`` shows in a root condition's message (``UNHEALTHY_DEPENDENTS``)."""

# --- KAI Scheduler (kai-scheduler/KAI-Scheduler v0.17.0) -------------------------------------------------------------

KAI_UNSCHEDULABLE = "Unschedulable"
"""``pkg/scheduler/cache/status_updater/default_status_updater.go`` ``markTaskUnschedulable``: a Warning event with
reason ``v1.PodReasonUnschedulable`` and, unless the PodGroup's ``markUnschedulable`` is false, the pod condition
``PodScheduled=False`` with that reason and the same message; ``markPodGroupUnschedulable``: the PodGroup's
``status.schedulingConditions`` entry ``UnschedulableOnNodePool`` with ``reasons[]``."""
KAI_POD_GROUP_ANNOTATION = "pod-group-name"
"""``pkg/common/constants/constants.go`` ``PodGroupAnnotationForPod``: the pod grouper sets it on every pod it groups."""
KAI_POD_GROUPER_WARNING = "PodGrouperWarning"
"""``constants.go``; ``pkg/podgrouper/pod_controller.go`` records the grouper's error on the pod with this reason."""
KAI_NON_PREEMPTIBLE_OVER_QUOTA = "NonPreemptibleOverQuota"
"""``pkg/apis/scheduling/v2alpha2/podgroup_types.go`` ``UnschedulableReason``."""
KAI_OVER_LIMIT = "OverLimit"
KAI_OVER_QUOTA_MESSAGE = "Non-preemptible workload is over quota"
"""``pkg/scheduler/api/unschedule_info.go`` ``GetBuildOverCapacityMessageForQueue``: ``"Non-preemptible workload is
over quota. %v Use a preemptible workload to go over quota."``."""
KAI_NO_NODES_WITH_RESOURCES = "no nodes with enough resources were found"
"""``pkg/scheduler/api/common_info/pod_errors.go`` ``ResourcesWereNotFoundMsg``."""
KAI_NOT_ENOUGH_GPUS = "node(s) didn't have enough resources: GPUs"
"""``pod_errors.go`` ``NewFitErrorInsufficientResource`` short message."""
KAI_GANG = "are required for gang scheduling"
"""``pkg/scheduler/actions/common/allocate.go``: ``"Resources were found for %d pods while %d are required for gang
scheduling. Additional pods cannot be scheduled due to: %s"`` (and the sub-group variant ``"... requires %d pods for
gang scheduling"``, matched by ``KAI_GANG_SUBGROUP``)."""
KAI_GANG_SUBGROUP = "pods for gang scheduling"
KAI_JOB_NOT_READY = "NotReady"
"""PodGroup event reason (``default_status_updater.go`` ``recordJobNotReadyEvent``): ``"Job is not ready for
scheduling. Waiting for %d pods, currently %d exist, %d are gated"``."""
KAI_JOB_NOT_READY_MESSAGE = "Job is not ready for scheduling."
KAI_TOPOLOGY_UNSATISFIED = "couldn't be satisfied for job"
"""``pkg/scheduler/plugins/topology/job_filtering.go`` ``getNoTopologyMatchError``: ``"topology %s, requirement %s
couldn't be satisfied for %s%s"`` with ``job <ns/name>``."""
KAI_TOPOLOGY_MISSING = "Requested topology"
"""``job_filtering.go``: ``"Requested topology %s does not exist"``."""
KAI_TOPOLOGY_CONFIG = "topology constraint error:"
"""``job_filtering.go`` ``newTopologyConstraintConfigError``: a constraint level the Topology does not have."""
