"""Pure IAM and EventBridge documents for the cluster and for Karpenter.

The Karpenter controller policies are rebuilt statement by statement from the official CloudFormation
template of aws/karpenter-provider-aws v1.14.1 (``website/content/en/docs/getting-started/
getting-started-with-karpenter/cloudformation.yaml``; ``research/serving-facts.md`` section 6). Every
mutating EC2/IAM action is scoped by a cluster tag in a condition key (``kubernetes.io/cluster/<name>``,
``eks:eks-cluster-name``), so the controller can only launch, tag and terminate what this cluster owns.

``unscoped_mutating_statements`` is the checker the tests (and a reviewer) run over every document.
"""

from __future__ import annotations

from typing import Any

from gpuscale.spec.base import Spec

POLICY_VERSION = "2012-10-17"

MUTATING_VERBS: tuple[str, ...] = (
    "Create",
    "Delete",
    "Run",
    "Terminate",
    "Put",
    "Tag",
    "Untag",
    "Update",
    "Attach",
    "Detach",
    "Pass",
    "Add",
    "Remove",
    "Send",
    "Modify",
    "Start",
    "Stop",
    "Reboot",
    "Associate",
    "Disassociate",
    "Set",
    "Replace",
    "Reset",
    "Cancel",
    "Request",
    "Import",
    "Enable",
    "Disable",
    "Revoke",
    "Authorize",
    "Assign",
    "Unassign",
    "Register",
    "Deregister",
    "Change",
    "Purge",
    "Upload",
    "Restore",
    "Release",
    "Allocate",
    "Apply",
    "Accept",
    "Reject",
)
"""Action-name prefixes that change state; ``Get``/``List``/``Describe``/``Receive`` are reads."""

KARPENTER_NODE_MANAGED_POLICIES: tuple[str, ...] = (
    "AmazonEKSWorkerNodePolicy",
    "AmazonEKS_CNI_Policy",
    "AmazonEC2ContainerRegistryPullOnly",
    "AmazonSSMManagedInstanceCore",
)
"""AWS managed policies on every node role (Karpenter CloudFormation ``KarpenterNodeRole``)."""

EKS_CLUSTER_MANAGED_POLICIES: tuple[str, ...] = ("AmazonEKSClusterPolicy",)
"""AWS managed policies on the EKS control-plane role."""

EBS_CSI_DRIVER_POLICY = "service-role/AmazonEBSCSIDriverPolicy"
"""AWS managed policy of the EBS CSI driver's controller (the ``aws-ebs-csi-driver`` add-on; Prometheus' volume)."""
EBS_CSI_SERVICE_ACCOUNT = ("kube-system", "ebs-csi-controller-sa")
"""Namespace and service account of the add-on's controller (the identity its Pod Identity association binds)."""
"""AWS managed policies on the EKS control-plane role."""

EKS_CLUSTER_ADMIN_ACCESS_POLICY = "AmazonEKSClusterAdminPolicy"
"""EKS access policy associated with ``admin_principal_arns``."""

INTERRUPTION_TARGET_ID = "KarpenterInterruptionQueueTarget"
"""EventBridge target id the upstream template uses for every interruption rule."""


def managed_policy_arn(partition: str, policy: str) -> str:
    return f"arn:{partition}:iam::aws:policy/{policy}"


def eks_access_policy_arn(partition: str, policy: str) -> str:
    return f"arn:{partition}:eks::aws:cluster-access-policy/{policy}"


def _doc(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"Version": POLICY_VERSION, "Statement": list(statements)}


def service_trust_policy(service: str, *, tag_session: bool = False) -> dict[str, Any]:
    """Trust policy letting one AWS service principal assume the role."""
    actions = ["sts:AssumeRole", "sts:TagSession"] if tag_session else ["sts:AssumeRole"]
    return _doc({"Effect": "Allow", "Principal": {"Service": service}, "Action": actions})


def node_role_trust_policy(dns_suffix: str = "amazonaws.com") -> dict[str, Any]:
    """EC2 instances (Karpenter and managed-node-group nodes) assume the node role."""
    return service_trust_policy(f"ec2.{dns_suffix}")


def cluster_role_trust_policy() -> dict[str, Any]:
    """The EKS control plane assumes the cluster role (``sts:TagSession`` for EKS Auto Mode-ready clusters)."""
    return service_trust_policy("eks.amazonaws.com", tag_session=True)


def pod_identity_trust_policy(
    *, partition: str, region: str, account_id: str, cluster_name: str,
    namespace: str | None = None, service_account: str | None = None,
) -> dict[str, Any]:
    """EKS Pod Identity: the agent assumes the role and tags the session, only on behalf of this account's cluster.

    The conditions are the session tags AWS documents EKS Pod Identity sending when it assumes a role
    (``eks-cluster-arn``, ``eks-cluster-name``, ``kubernetes-namespace``, ``kubernetes-service-account``,
    ``kubernetes-pod-name``, ``kubernetes-pod-uid``: EKS User Guide "Create IAM role with trust policy required by EKS
    Pod Identity", awsdocs/amazon-eks-user-guide ``latest/ug/manage-access/aws-access/pod-id-role.adoc``):

    - ``aws:RequestTag/eks-cluster-arn`` is this account's, region's and cluster's ARN: the confused-deputy guard
      (an association in another account or cluster carries another ARN);
    - ``aws:RequestTag/kubernetes-namespace`` / ``kubernetes-service-account`` when given: one service account only.

    Not ``aws:SourceAccount`` / ``aws:SourceArn``: AWS documents them for the EKS cluster role
    (``eks.amazonaws.com``), not for ``pods.eks.amazonaws.com``; a ``StringEquals`` on a key the service does not send
    denies every assume, which would lock out Karpenter, the EBS CSI driver and every weights role
    (``docs/upstream-readings.md``, item 11).
    """
    cluster_arn = f"arn:{partition}:eks:{region}:{account_id}:cluster/{cluster_name}"
    equals = {"aws:RequestTag/eks-cluster-arn": cluster_arn}
    if namespace is not None:
        equals["aws:RequestTag/kubernetes-namespace"] = namespace
    if service_account is not None:
        equals["aws:RequestTag/kubernetes-service-account"] = service_account
    return _doc({
        "Sid": "AllowEksPodIdentityForThisCluster",
        "Effect": "Allow",
        "Principal": {"Service": "pods.eks.amazonaws.com"},
        "Action": ["sts:AssumeRole", "sts:TagSession"],
        "Condition": {"StringEquals": equals},
    })


POD_IDENTITY_SESSION_TAGS = frozenset({
    "eks-cluster-arn", "eks-cluster-name", "kubernetes-namespace", "kubernetes-service-account", "kubernetes-pod-name",
    "kubernetes-pod-uid",
})
"""The request tags EKS Pod Identity sends (EKS User Guide ``pod-id-role.adoc``): the only keys a trust condition may
require."""


def secrets_encryption_policy(key_arn: str) -> dict[str, Any]:
    """What the cluster role needs on its KMS key to envelope-encrypt Kubernetes secrets, and nothing else."""
    return _doc(
        {
            "Sid": "AllowSecretsEnvelopeEncryption",
            "Effect": "Allow",
            "Action": ["kms:Encrypt", "kms:Decrypt", "kms:ListGrants", "kms:DescribeKey"],
            "Resource": key_arn,
        }
    )


class ControllerPolicyContext(Spec):
    """The plain values the Karpenter controller policies interpolate (resolved from Outputs by the component)."""

    cluster_name: str
    """EKS cluster name; it appears inside condition *keys*, hence ``Output.apply`` + ``json.dumps``."""
    region: str
    account_id: str
    partition: str = "aws"
    node_role_arn: str
    """The only role ``iam:PassRole`` may pass."""
    queue_arn: str
    """The interruption queue."""
    zonal_shift: bool = False
    """Add the read-only ARC zonal-shift statement (pairs with Helm ``settings.enableZonalShift``)."""


def _node_lifecycle(c: ControllerPolicyContext) -> dict[str, Any]:
    ec2 = f"arn:{c.partition}:ec2:{c.region}"
    owned = {f"aws:ResourceTag/kubernetes.io/cluster/{c.cluster_name}": "owned"}
    request_owned = {
        f"aws:RequestTag/kubernetes.io/cluster/{c.cluster_name}": "owned",
        "aws:RequestTag/eks:eks-cluster-name": c.cluster_name,
    }
    tagged = [
        f"{ec2}:*:{t}/*"
        for t in ("fleet", "instance", "volume", "network-interface", "launch-template", "spot-instances-request")
    ]
    return _doc(
        {
            # resources RunInstances only references (AMIs, subnets, SGs ...): they are not changed
            "Sid": "AllowScopedEC2InstanceAccessActions",
            "Effect": "Allow",
            "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
            "Resource": [
                f"{ec2}::image/*",
                f"{ec2}::snapshot/*",
                f"{ec2}:*:security-group/*",
                f"{ec2}:*:subnet/*",
                f"{ec2}:*:capacity-reservation/*",
                f"{ec2}:*:placement-group/*",
            ],
        },
        {
            "Sid": "AllowScopedEC2LaunchTemplateAccessActions",
            "Effect": "Allow",
            "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
            "Resource": f"{ec2}:*:launch-template/*",
            "Condition": {"StringEquals": owned, "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"}},
        },
        {
            "Sid": "AllowScopedEC2InstanceActionsWithTags",
            "Effect": "Allow",
            "Action": ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"],
            "Resource": tagged,
            "Condition": {"StringEquals": request_owned, "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"}},
        },
        {
            "Sid": "AllowScopedResourceCreationTagging",
            "Effect": "Allow",
            "Action": "ec2:CreateTags",
            "Resource": tagged,
            "Condition": {
                "StringEquals": {
                    **request_owned,
                    "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"],
                },
                "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
            },
        },
        {
            "Sid": "AllowScopedResourceTagging",
            "Effect": "Allow",
            "Action": "ec2:CreateTags",
            "Resource": f"{ec2}:*:instance/*",
            "Condition": {
                "StringEquals": owned,
                "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
                "StringEqualsIfExists": {"aws:RequestTag/eks:eks-cluster-name": c.cluster_name},
                "ForAllValues:StringEquals": {
                    "aws:TagKeys": ["eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"]
                },
            },
        },
        {
            "Sid": "AllowScopedDeletion",
            "Effect": "Allow",
            "Action": ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
            "Resource": [f"{ec2}:*:instance/*", f"{ec2}:*:launch-template/*"],
            "Condition": {"StringEquals": owned, "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"}},
        },
    )


def _iam_integration(c: ControllerPolicyContext) -> dict[str, Any]:
    profiles = f"arn:{c.partition}:iam::{c.account_id}:instance-profile/*"
    owned_here = {
        f"aws:ResourceTag/kubernetes.io/cluster/{c.cluster_name}": "owned",
        "aws:ResourceTag/topology.kubernetes.io/region": c.region,
    }
    request_here = {
        f"aws:RequestTag/kubernetes.io/cluster/{c.cluster_name}": "owned",
        "aws:RequestTag/eks:eks-cluster-name": c.cluster_name,
        "aws:RequestTag/topology.kubernetes.io/region": c.region,
    }
    return _doc(
        {
            "Sid": "AllowPassingInstanceRole",
            "Effect": "Allow",
            "Action": "iam:PassRole",
            "Resource": c.node_role_arn,
            "Condition": {"StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]}},
        },
        {
            "Sid": "AllowScopedInstanceProfileCreationActions",
            "Effect": "Allow",
            "Action": "iam:CreateInstanceProfile",
            "Resource": profiles,
            "Condition": {
                "StringEquals": request_here,
                "StringLike": {"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"},
            },
        },
        {
            "Sid": "AllowScopedInstanceProfileTagActions",
            "Effect": "Allow",
            "Action": "iam:TagInstanceProfile",
            "Resource": profiles,
            "Condition": {
                "StringEquals": {**owned_here, **request_here},
                "StringLike": {
                    "aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*",
                    "aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*",
                },
            },
        },
        {
            "Sid": "AllowScopedInstanceProfileActions",
            "Effect": "Allow",
            "Action": [
                "iam:AddRoleToInstanceProfile",
                "iam:RemoveRoleFromInstanceProfile",
                "iam:DeleteInstanceProfile",
            ],
            "Resource": profiles,
            "Condition": {
                "StringEquals": owned_here,
                "StringLike": {"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*"},
            },
        },
    )


def _eks_integration(c: ControllerPolicyContext) -> dict[str, Any]:
    return _doc(
        {
            "Sid": "AllowAPIServerEndpointDiscovery",
            "Effect": "Allow",
            "Action": "eks:DescribeCluster",
            "Resource": f"arn:{c.partition}:eks:{c.region}:{c.account_id}:cluster/{c.cluster_name}",
        }
    )


def _interruption(c: ControllerPolicyContext) -> dict[str, Any]:
    return _doc(
        {
            "Sid": "AllowInterruptionQueueActions",
            "Effect": "Allow",
            "Action": ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
            "Resource": c.queue_arn,
        }
    )


def _zonal_shift(c: ControllerPolicyContext) -> dict[str, Any]:
    return _doc(
        {
            "Sid": "AllowZonalShiftStatusReadOnly",
            "Effect": "Allow",
            "Action": "arc-zonal-shift:GetManagedResource",
            "Resource": "*",
            "Condition": {
                "StringEquals": {
                    "arc-zonal-shift:ResourceIdentifier": f"arn:{c.partition}:eks:{c.region}:{c.account_id}:cluster/{c.cluster_name}"
                }
            },
        }
    )


def _resource_discovery(c: ControllerPolicyContext) -> dict[str, Any]:
    reads = [
        "DescribeCapacityReservations",
        "DescribeImages",
        "DescribeInstances",
        "DescribeInstanceStatus",
        "DescribeInstanceTypeOfferings",
        "DescribeInstanceTypes",
        "DescribeLaunchTemplates",
        "DescribePlacementGroups",
        "DescribeSecurityGroups",
        "DescribeSpotPriceHistory",
        "DescribeSubnets",
    ]
    return _doc(
        {
            "Sid": "AllowRegionalReadActions",
            "Effect": "Allow",
            "Action": [f"ec2:{a}" for a in reads],
            "Resource": "*",
            "Condition": {"StringEquals": {"aws:RequestedRegion": c.region}},
        },
        {
            "Sid": "AllowSSMReadActions",
            "Effect": "Allow",
            "Action": "ssm:GetParameter",
            "Resource": f"arn:{c.partition}:ssm:{c.region}::parameter/aws/service/*",
        },
        {"Sid": "AllowPricingReadActions", "Effect": "Allow", "Action": "pricing:GetProducts", "Resource": "*"},
        {
            "Sid": "AllowUnscopedInstanceProfileListAction",
            "Effect": "Allow",
            "Action": "iam:ListInstanceProfiles",
            "Resource": "*",
        },
        {
            "Sid": "AllowInstanceProfileReadActions",
            "Effect": "Allow",
            "Action": "iam:GetInstanceProfile",
            "Resource": f"arn:{c.partition}:iam::{c.account_id}:instance-profile/*",
        },
    )


_CONTROLLER_POLICIES = {
    "node-lifecycle": _node_lifecycle,
    "iam-integration": _iam_integration,
    "eks-integration": _eks_integration,
    "interruption": _interruption,
    "resource-discovery": _resource_discovery,
    "zonal-shift": _zonal_shift,
}


def controller_policy_keys(zonal_shift: bool) -> list[str]:
    """Suffixes of the controller's policies (known before any Output resolves, so resource names are plain)."""
    return [k for k in _CONTROLLER_POLICIES if zonal_shift or k != "zonal-shift"]


def karpenter_controller_policies(c: ControllerPolicyContext) -> dict[str, dict[str, Any]]:
    """The controller's policies, keyed by a short suffix (one IAM managed policy each, as upstream).

    Kept as separate documents because a single managed policy is capped at 6,144 characters.
    """
    return {k: _CONTROLLER_POLICIES[k](c) for k in controller_policy_keys(c.zonal_shift)}


def interruption_queue_policy(queue_arn: str) -> dict[str, Any]:
    """EventBridge (and SQS) may send to the queue; nothing may use it over plain HTTP."""
    return {
        "Version": POLICY_VERSION,
        "Id": "EC2InterruptionPolicy",
        "Statement": [
            {
                "Sid": "AllowEventBridgeDelivery",
                "Effect": "Allow",
                "Principal": {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]},
                "Action": "sqs:SendMessage",
                "Resource": queue_arn,
            },
            {
                "Sid": "DenyHTTP",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "sqs:*",
                "Resource": queue_arn,
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            },
        ],
    }


def interruption_event_patterns() -> dict[str, dict[str, Any]]:
    """EventBridge patterns Karpenter handles, keyed by a short rule suffix (upstream rule names in comments)."""
    return {
        "scheduled-change": {"source": ["aws.health"], "detail-type": ["AWS Health Event"]},  # ScheduledChangeRule
        "spot-interruption": {"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]},
        "rebalance": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance Rebalance Recommendation"]},
        "instance-state-change": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance State-change Notification"]},
        "capacity-reservation-interruption": {
            "source": ["aws.ec2"],
            "detail-type": ["EC2 Capacity Reservation Instance Interruption Warning"],
        },
    }


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def is_mutating(action: str) -> bool:
    """Whether an IAM action (``service:Verb...``, wildcards allowed) can change state."""
    verb = action.partition(":")[2]
    if action == "*" or verb == "" or verb.startswith("*"):
        return True
    return verb.startswith(MUTATING_VERBS)


def unscoped_mutating_statements(doc: dict[str, Any], cluster_name: str | None = None) -> list[str]:
    """Allow statements granting a mutating action on ``"Resource": "*"`` without a cluster-scoping condition.

    A condition counts as scoping when it names ``cluster_name`` (in a key or a value); without a cluster name
    any condition counts. Returns one message per offending statement; ``[]`` means the document is clean.
    """
    problems: list[str] = []
    for i, st in enumerate(_as_list(doc.get("Statement", []))):
        if st.get("Effect") != "Allow":
            continue
        mutating = [a for a in _as_list(st.get("Action", [])) if is_mutating(a)]
        if "NotAction" in st:  # everything except a list: assume it includes writes
            mutating.append(f"NotAction {st['NotAction']}")
        if not mutating or "*" not in _as_list(st.get("Resource", [])):
            continue
        condition = st.get("Condition")
        scoped = bool(condition) and (cluster_name is None or cluster_name in repr(condition))
        if not scoped:
            problems.append(f"statement {st.get('Sid', i)}: {mutating} on Resource '*' without a cluster-tag condition")
    return problems
