"""One served model on vLLM: a workload, Service, PodDisruptionBudget and PodMonitor per role, plus the P/D router.

Aggregated mode has one role; disaggregated mode runs ``prefill`` and ``decode`` as separate workloads (each scaled by
its own ``RoleAutoscaler``) joined by NIXL KV transfer and a ``PdRouter``. All object bodies come from
``gpuscale.manifests.vllm`` (pure, unit-tested); this module only wires resources.
See ``docs/layer3-serving.md``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from gpuscale.components.pd_router import PdRouter, PdRouterArgs
from gpuscale.manifests import iam, vllm
from gpuscale.manifests.vllm import VllmServiceArgs

__all__ = ["VllmService", "VllmServiceArgs"]


def _custom_resource(name: str, body: dict[str, Any], opts: pulumi.ResourceOptions) -> k8s.apiextensions.CustomResource:
    return k8s.apiextensions.CustomResource(
        name, api_version=body["apiVersion"], kind=body["kind"], metadata=body["metadata"], spec=body["spec"], opts=opts,
    )


class VllmService(pulumi.ComponentResource):
    """vLLM serving for one model (``VllmServiceArgs.from_platform(spec, sizing, model_name)``).

    Creates, per role ``<r>``: ``<name>-<r>`` (apps/v1 Deployment, or a LeaderWorkerSet when a replica spans nodes;
    ``replicas`` unset, the role's autoscaler owns it), ``<name>-<r>-service``, ``<name>-<r>-pdb``,
    ``<name>-<r>-podmonitor``. Once: ``<name>-serviceaccount``; for S3 weights with ``cluster_name`` given,
    ``<name>-weights-role`` / ``-weights-read`` / ``-weights-identity`` (IAM role, inline read-only policy on the
    model's prefix, EKS Pod Identity association); in disaggregated mode ``<name>-router`` (``PdRouter``).

    ``depends_on``: the charts that install the CRDs and schedulers these objects need (LWS, kube-prometheus-stack,
    KAI and its queues). The Kubernetes and AWS providers are inherited from ``opts``.
    """

    endpoint: pulumi.Output[str]
    """In-cluster URL clients call (the aggregated Service or the router's), ``http://<model>.<ns>.svc...:8000``."""
    workload_names: pulumi.Output[dict[str, str]]
    """Role -> workload name (the autoscalers' scale targets)."""
    workloads: dict[str, pulumi.CustomResource]
    """Role -> workload resource, for the role autoscaler's ``depends_on``."""
    router: PdRouter | None
    """The P/D router (disaggregated mode only)."""

    def __init__(
        self,
        name: str,
        args: VllmServiceArgs,
        *,
        cluster_name: pulumi.Input[str] | None = None,
        depends_on: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpuscale:index:VllmService", name, None, opts)
        deps = list(depends_on)
        sa_body = vllm.service_account_body(args)
        sa = k8s.core.v1.ServiceAccount(
            f"{name}-serviceaccount", metadata=sa_body["metadata"], automount_service_account_token=False,
            opts=pulumi.ResourceOptions(parent=self, depends_on=deps),
        )
        identity = self._weights_identity(name, args, cluster_name)
        # Pulumi waits for a Deployment to become available; a replica may need a node, the image and the weights
        minutes = math.ceil(args.sizing.rollout_deadline_s / 60)
        timeouts = pulumi.CustomTimeouts(create=f"{minutes}m", update=f"{minutes}m")
        self.workloads = {}
        for role in args.model.serving.roles:
            body = vllm.workload_body(args, role)
            wopts = pulumi.ResourceOptions(parent=self, depends_on=[sa, *identity, *deps], custom_timeouts=timeouts)
            if body["kind"] == "Deployment":
                workload: pulumi.CustomResource = k8s.apps.v1.Deployment(
                    f"{name}-{role}", metadata=body["metadata"], spec=body["spec"], opts=wopts,
                )
            else:
                workload = _custom_resource(f"{name}-{role}", body, wopts)
            self.workloads[role] = workload
            child = pulumi.ResourceOptions(parent=self, depends_on=deps)
            svc = vllm.service_body(args, role)
            k8s.core.v1.Service(f"{name}-{role}-service", metadata=svc["metadata"], spec=svc["spec"], opts=child)
            pdb = vllm.pdb_body(args, role)
            k8s.policy.v1.PodDisruptionBudget(f"{name}-{role}-pdb", metadata=pdb["metadata"], spec=pdb["spec"], opts=child)
            _custom_resource(f"{name}-{role}-podmonitor", vllm.pod_monitor_body(args, role), child)
        self.router = None
        if args.model.serving.mode == "disaggregated":
            self.router = PdRouter(
                f"{name}-router", PdRouterArgs.from_service(args),
                depends_on=[*deps, *self.workloads.values()],
                opts=pulumi.ResourceOptions(parent=self, custom_timeouts=timeouts),
            )
        self.endpoint = pulumi.Output.from_input(vllm.endpoint_url(args.model))
        self.workload_names = pulumi.Output.from_input(
            {role: vllm.workload_name(args.model.name, role) for role in args.model.serving.roles}
        )
        self.register_outputs({"endpoint": self.endpoint, "workload_names": self.workload_names})

    def _weights_identity(
        self, name: str, args: VllmServiceArgs, cluster_name: pulumi.Input[str] | None,
    ) -> list[pulumi.Resource]:
        """Read-only S3 access for the model's pods through EKS Pod Identity (no keys, no node-role grant)."""
        weights = args.model.weights
        if weights.scheme != "s3":
            return []
        if cluster_name is None:
            pulumi.log.warn(
                f"{args.model.name}: weights stream from {weights.uri} but no cluster_name was given, so no Pod "
                "Identity role is created; the vLLM pods need s3:GetObject on that prefix from somewhere else",
                resource=self,
            )
            return []
        child = pulumi.ResourceOptions(parent=self)
        invoke = pulumi.InvokeOptions(parent=self)
        trust = pulumi.Output.all(
            aws.get_partition_output(opts=invoke).partition, aws.get_region_output(opts=invoke).region,
            aws.get_caller_identity_output(opts=invoke).account_id, cluster_name,
        ).apply(lambda a: json.dumps(iam.pod_identity_trust_policy(
            partition=a[0], region=a[1], account_id=a[2], cluster_name=a[3],
            namespace=args.namespace, service_account=vllm.service_account_name(args.model.name),
        )))
        role = aws.iam.Role(
            f"{name}-weights-role",
            assume_role_policy=trust,
            description=f"gpuscale: vLLM pods of {args.model.name} read {weights.uri}",
            tags=args.tags,
            opts=child,
        )
        policy = aws.iam.RolePolicy(
            f"{name}-weights-read",
            role=role.name,
            policy=json.dumps(vllm.weights_read_policy(weights.uri, args.aws_region)),
            opts=child,
        )
        assoc = aws.eks.PodIdentityAssociation(
            f"{name}-weights-identity",
            cluster_name=cluster_name,
            namespace=args.namespace,
            service_account=vllm.service_account_name(args.model.name),
            role_arn=role.arn,
            tags=args.tags,
            opts=child,
        )
        return [policy, assoc]
