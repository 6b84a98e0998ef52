"""Karpenter's AWS side (node role, controller role, interruption queue) and the pinned Helm chart.

IAM follows the official CloudFormation template of aws/karpenter-provider-aws v1.14.1, rebuilt in
``gpuscale.manifests.iam``; the controller gets credentials through EKS Pod Identity.
See https://karpenter.sh/docs/getting-started/getting-started-with-karpenter/
"""

from __future__ import annotations

import functools
import json
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
from pydantic import Field

from gpuscale import versions
from gpuscale.components.children import child_opts, claim
from gpuscale.components.inputs import ClusterName, StrInput
from gpuscale.manifests import iam
from gpuscale.manifests.karpenter import karpenter_chart_values
from gpuscale.manifests.namespaces import KARPENTER_NAMESPACE
from gpuscale.spec.base import Spec
from gpuscale.spec.platform import PlatformSpec
from gpuscale.versions import HelmChartPin

RELEASE = "karpenter"
"""Helm release name (the upstream getting-started command's), so the chart's objects are named ``karpenter``."""
QUEUE_RETENTION_S = 300
"""Interruption messages older than five minutes are stale: a spot warning gives two."""


def _policy_description(cluster: str, key: str) -> str:
    return f"Karpenter controller of EKS cluster {cluster}: {key}"


def _policy_json(documents: dict[str, dict[str, Any]], key: str) -> str:
    return json.dumps(documents[key])


class KarpenterControllerArgs(Spec):
    """Karpenter for one cluster (``cluster_name``, which may be an Output): chart pin, namespace, service account,
    controller size, tags."""

    cluster_name: ClusterName
    """The EKS cluster Karpenter manages nodes for (e.g. ``EksCluster.cluster_name``)."""
    chart: HelmChartPin = versions.KARPENTER
    """Pinned ``oci://public.ecr.aws/karpenter/karpenter`` chart (CRDs included)."""
    namespace: str = KARPENTER_NAMESPACE
    """Namespace of the controller (the upstream getting-started default)."""
    service_account: str = "karpenter"
    """Service account bound to the controller role by Pod Identity."""
    replicas: int = Field(default=2, ge=1)
    """Controller replicas (leader-elected; two survive a system node loss)."""
    controller_cpu: str = "1"
    controller_memory: str = "1Gi"
    """Controller requests = limits (the upstream docs' 1 CPU / 1 GiB)."""
    zonal_shift: bool = False
    """Honour ARC zonal shifts (``settings.enableZonalShift``) and grant the read-only permission it needs."""
    tags: dict[str, str] = Field(default_factory=dict)
    """Tags on every AWS resource."""
    capacity_buffer: bool = False
    """Karpenter's ``CapacityBuffer`` feature gate (alpha in v1.14.1): ``CapacityBufferSet`` keeps spare nodes only
    with it on."""

    @classmethod
    def from_spec(cls, spec: PlatformSpec, *, cluster_name: StrInput) -> KarpenterControllerArgs:
        return cls(cluster_name=cluster_name, tags=spec.environment.tags,
                   capacity_buffer=spec.topology.provisioning.capacity_buffer_gate)


class KarpenterController(pulumi.ComponentResource):
    """Karpenter for one EKS cluster.

    Creates ``<name>-node-role`` (+ managed-policy attachments and an ``EC2_LINUX`` access entry
    ``<name>-node-access``), ``<name>-controller-role`` trusted by ``pods.eks.amazonaws.com`` with one policy per
    upstream statement group (``<name>-<group>``) and ``<name>-pod-identity``, the SQS queue ``<name>-queue``
    (+ ``<name>-queue-policy``), the EventBridge rules ``<name>-<event>`` with their targets, and the Helm chart
    ``<name>-chart``. IAM roles, policies and the queue are auto-named from these logical names (a random suffix),
    so two installations in one account never collide. Expects the cluster with its EKS Pod Identity agent and
    system nodes (``EksCluster``); the AWS and Kubernetes providers come from ``opts``.
    """

    node_role_name: pulumi.Output[str]
    """IAM role every EC2NodeClass names in ``spec.role``."""
    node_role_arn: pulumi.Output[str]
    controller_role_arn: pulumi.Output[str]
    interruption_queue_name: pulumi.Output[str]
    """SQS queue name, passed to the chart as ``settings.interruptionQueue``."""
    interruption_queue_arn: pulumi.Output[str]
    chart: k8s.helm.v4.Chart
    """The chart (it installs the NodePool/EC2NodeClass CRDs): node pools ``depends_on`` it."""

    def __init__(self, name: str, args: KarpenterControllerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuscale:index:KarpenterController", name, None, opts)
        self._tags = dict(args.tags)
        self._opts = opts
        invoke = pulumi.InvokeOptions(parent=self)
        partition = aws.get_partition_output(opts=invoke)
        account_id = aws.get_caller_identity_output(opts=invoke).account_id
        region = aws.get_region_output(opts=invoke).region
        cluster = pulumi.Output.from_input(args.cluster_name)
        claim(self, f"KarpenterController {name!r}", "kubernetes", "ServiceAccount", args.service_account,
              scope=args.namespace, fix="one Karpenter per cluster")

        node_role, node_deps = self._node_role(name, cluster, partition)
        queue = self._interruption_queue(name)
        controller_role, controller_deps = self._controller_identity(
            name, args, cluster, pulumi.Output.all(region, account_id, partition.partition), node_role, queue,
        )
        values = pulumi.Output.all(cluster, queue.name, region).apply(
            lambda a: karpenter_chart_values(
                cluster_name=a[0],
                queue_name=a[1],
                region=a[2],
                service_account=args.service_account,
                replicas=args.replicas,
                cpu=args.controller_cpu,
                memory=args.controller_memory,
                zonal_shift=args.zonal_shift,
                capacity_buffer=args.capacity_buffer,
            )
        )
        # the controller must find its credentials and its nodes must be able to join before it launches any
        self.chart = k8s.helm.v4.Chart(
            f"{name}-chart",
            name=RELEASE,  # explicit, like every other chart: Pulumi would otherwise derive one from the resource name
            chart=args.chart.chart,
            version=args.chart.version,
            namespace=args.namespace,
            values=values,
            opts=self._child(depends_on=[*controller_deps, *node_deps]),
        )
        self.node_role_name = node_role.name
        self.node_role_arn = node_role.arn
        self.controller_role_arn = controller_role.arn
        self.interruption_queue_name = queue.name
        self.interruption_queue_arn = queue.arn
        self.register_outputs(
            {
                "node_role_name": self.node_role_name,
                "node_role_arn": self.node_role_arn,
                "controller_role_arn": self.controller_role_arn,
                "interruption_queue_name": self.interruption_queue_name,
                "interruption_queue_arn": self.interruption_queue_arn,
            }
        )

    def _child(self, depends_on: list[pulumi.Resource] | None = None) -> pulumi.ResourceOptions:
        opts: pulumi.ResourceOptions = child_opts(self, self._opts, *(depends_on or []))
        return opts

    def _interruption_queue(self, name: str) -> aws.sqs.Queue:
        """The SQS queue Karpenter reads spot interruptions, rebalance recommendations and instance state changes
        from, with the EventBridge rules that feed it."""
        queue = aws.sqs.Queue(
            f"{name}-queue",
            message_retention_seconds=QUEUE_RETENTION_S,
            sqs_managed_sse_enabled=True,
            tags=self._tags,
            opts=self._child(),
        )
        aws.sqs.QueuePolicy(
            f"{name}-queue-policy",
            queue_url=queue.url,
            policy=queue.arn.apply(lambda arn: json.dumps(iam.interruption_queue_policy(arn))),
            opts=self._child(),
        )
        for event, pattern in iam.interruption_event_patterns().items():
            rule = aws.cloudwatch.EventRule(
                f"{name}-{event}",
                description=f"Karpenter interruption handling: {event}",
                event_pattern=json.dumps(pattern),
                tags=self._tags,
                opts=self._child(),
            )
            aws.cloudwatch.EventTarget(
                f"{name}-{event}-target",
                rule=rule.name,
                arn=queue.arn,
                target_id=iam.INTERRUPTION_TARGET_ID,
                opts=self._child(),
            )

        return queue

    def _controller_identity(
        self, name: str, args: KarpenterControllerArgs, cluster: pulumi.Output[str],
        where: pulumi.Output[list[str]], node_role: aws.iam.Role, queue: aws.sqs.Queue,
    ) -> tuple[aws.iam.Role, list[pulumi.Resource]]:
        """The controller's role (trusted by EKS Pod Identity for its service account in this cluster only, one
        policy per upstream statement group) and its Pod Identity association; returns the role and what the chart
        waits for."""
        region, account_id, partition = where[0], where[1], where[2]
        context = pulumi.Output.all(cluster, region, account_id, partition, node_role.arn, queue.arn).apply(
            lambda a: iam.ControllerPolicyContext(
                cluster_name=a[0],
                region=a[1],
                account_id=a[2],
                partition=a[3],
                node_role_arn=a[4],
                queue_arn=a[5],
                zonal_shift=args.zonal_shift,
            )
        )
        trust = pulumi.Output.all(partition, region, account_id, cluster).apply(
            lambda a: json.dumps(iam.pod_identity_trust_policy(
                partition=a[0], region=a[1], account_id=a[2], cluster_name=a[3],
                namespace=args.namespace, service_account=args.service_account,
            ))
        )
        controller_role, controller_deps = self._controller_role(name, args, cluster, context, trust)
        identity = aws.eks.PodIdentityAssociation(
            f"{name}-pod-identity",
            cluster_name=cluster,
            namespace=args.namespace,
            service_account=args.service_account,
            role_arn=controller_role.arn,
            tags=self._tags,
            opts=self._child(),
        )
        return controller_role, [identity, *controller_deps]

    def _node_role(
        self,
        name: str,
        cluster: pulumi.Output[str],
        partition: pulumi.Output[aws.GetPartitionResult],
    ) -> tuple[aws.iam.Role, list[pulumi.Resource]]:
        role = aws.iam.Role(
            f"{name}-node-role",
            description=cluster.apply(lambda c: f"Nodes Karpenter launches for EKS cluster {c}"),
            assume_role_policy=partition.dns_suffix.apply(lambda d: json.dumps(iam.node_role_trust_policy(d))),
            tags=self._tags,
            opts=self._child(),
        )
        deps: list[pulumi.Resource] = [
            aws.iam.RolePolicyAttachment(
                f"{name}-node-{policy.lower()}",
                role=role.name,
                policy_arn=partition.partition.apply(functools.partial(iam.managed_policy_arn, policy=policy)),
                opts=self._child(),
            )
            for policy in iam.KARPENTER_NODE_MANAGED_POLICIES
        ]
        # API authentication mode: the node role joins through an EC2_LINUX access entry (no aws-auth ConfigMap)
        deps.append(
            aws.eks.AccessEntry(
                f"{name}-node-access",
                cluster_name=cluster,
                principal_arn=role.arn,
                type="EC2_LINUX",
                tags=self._tags,
                opts=self._child(),
            )
        )
        return role, deps

    def _controller_role(
        self,
        name: str,
        args: KarpenterControllerArgs,
        cluster: pulumi.Output[str],
        context: pulumi.Output[iam.ControllerPolicyContext],
        trust: pulumi.Output[str],
    ) -> tuple[aws.iam.Role, list[pulumi.Resource]]:
        role = aws.iam.Role(
            f"{name}-controller-role",
            description=cluster.apply(lambda c: f"Karpenter controller of EKS cluster {c} (EKS Pod Identity)"),
            assume_role_policy=trust,
            tags=self._tags,
            opts=self._child(),
        )
        documents = context.apply(iam.karpenter_controller_policies)
        attachments: list[pulumi.Resource] = []
        for key in iam.controller_policy_keys(args.zonal_shift):
            policy = aws.iam.Policy(
                f"{name}-{key}",
                description=cluster.apply(functools.partial(_policy_description, key=key)),
                policy=documents.apply(functools.partial(_policy_json, key=key)),
                tags=self._tags,
                opts=self._child(),
            )
            attachments.append(
                aws.iam.RolePolicyAttachment(
                    f"{name}-{key}-attach",
                    role=role.name,
                    policy_arn=policy.arn,
                    opts=self._child(),
                )
            )
        return role, attachments
