"""One served model on vLLM: a workload, Service, PodDisruptionBudget and PodMonitor per role, plus the P/D router.

Aggregated mode has one role; disaggregated mode runs ``prefill`` and ``decode`` as separate workloads (each scaled by
its own ``RoleAutoscaler``) joined by NIXL KV transfer and a ``PdRouter``. All object bodies come from
``gpuscale.manifests.vllm`` (pure, unit-tested); this module only resolves Inputs and wires resources.
See ``docs/layer3-serving.md``.
"""

from __future__ import annotations

import functools
import json
import math
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from gpuscale.components.children import child_opts, claim, known_model, object_name
from gpuscale.components.inputs import ClusterName, Image, Namespace, StrInput, lift, resolved
from gpuscale.components.pd_router import PdRouter, PdRouterArgs
from gpuscale.manifests import iam, vllm
from gpuscale.manifests.router import RouterSettings
from gpuscale.manifests.vllm import ServingSettings
from gpuscale.sizing import PlatformSizing
from gpuscale.spec.base import Spec
from gpuscale.spec.model import Role
from gpuscale.spec.platform import PlatformSpec

__all__ = ["ServingSettings", "VllmService", "VllmServiceArgs"]


class VllmServiceArgs(Spec):
    """One model's serving layer: the model, its sizing and its KAI wiring (``serving``), and where it runs.

    ``namespace``, ``image`` and ``cluster_name`` take other resources' Outputs (``ns.metadata.name``, an image built
    in the same program, ``cluster.name``).
    """

    serving: ServingSettings
    """Model, sizing, per-role KAI wiring, and the plain defaults (namespace and image from the model's spec)."""
    namespace: Namespace | None = None
    """Namespace of every object; default ``serving.namespace``. Must exist (e.g. a Namespace in the same program)."""
    image: Image | None = None
    """vLLM image; default ``serving.image`` (the model's ``serving.image``, the pinned release)."""
    cluster_name: ClusterName | None = None
    """EKS cluster, for the Pod Identity association of ``s3://`` weights; without it no AWS resource is created."""

    @classmethod
    def from_platform(
        cls, spec: PlatformSpec, sizing: PlatformSizing, model_name: str, *, namespace: StrInput | None = None,
        image: StrInput | None = None, cluster_name: StrInput | None = None,
    ) -> VllmServiceArgs:
        known_model(spec, model_name)
        return cls(
            serving=ServingSettings.from_platform(spec, sizing, model_name),
            namespace=namespace, image=image, cluster_name=cluster_name,
        )


Body = dict[str, Any] | pulumi.Output[dict[str, Any]]
Settings = ServingSettings | pulumi.Output[ServingSettings]


def part(body: Body, key: str) -> Any:
    """One top-level field of an object body (plain, or an Output when the body waits for an Input)."""
    return lift(body, lambda b: b[key])


def _custom_resource(name: str, body: Body, api_version: str, kind: str,
                     opts: pulumi.ResourceOptions) -> k8s.apiextensions.CustomResource:
    return k8s.apiextensions.CustomResource(
        name, api_version=api_version, kind=kind, metadata=part(body, "metadata"), spec=part(body, "spec"), opts=opts,
    )


class VllmService(pulumi.ComponentResource):
    """vLLM serving for one model (``VllmServiceArgs.from_platform(spec, sizing, model_name)``).

    Creates, per role ``<r>``: ``<name>-<r>`` (apps/v1 Deployment, or a LeaderWorkerSet when a replica spans nodes;
    ``replicas`` unset, the role's autoscaler owns it), ``<name>-<r>-service``, ``<name>-<r>-pdb``,
    ``<name>-<r>-podmonitor``. Once: ``<name>-serviceaccount``; for S3 weights with ``cluster_name`` given,
    ``<name>-weights-role`` / ``-weights-read`` / ``-weights-identity`` (IAM role, inline read-only policy on the
    model's prefix, EKS Pod Identity association); in disaggregated mode ``<name>-router`` (``PdRouter``).

    Expects on the cluster: the namespace; KAI with the model's leaf queue (``KaiScheduler``, ``QueueTree``) and the
    ``gpuscale`` Topology (``KaiTopology``); a GPU NodePool labelled ``gpuscale.io/node-pool: <model.node_pool>``
    (``GpuNodePool``) with the device plugin; prometheus-operator's PodMonitor CRD (``PrometheusStack``); the LWS
    controller when a replica spans nodes (``LwsController``); for S3 weights, the EKS Pod Identity agent. Put the
    ones this program creates in ``opts.depends_on``. Providers come from ``opts``.
    """

    endpoint: pulumi.Output[str]
    """In-cluster URL clients call (the aggregated Service or the router's), ``http://<model>.<ns>.svc...:8000``."""
    workload_names: pulumi.Output[dict[str, str]]
    """Role -> workload name (the autoscalers' scale targets)."""
    workloads: dict[str, pulumi.CustomResource]
    """Role -> workload resource, for the role autoscaler's ``depends_on``."""
    router: PdRouter | None
    """The P/D router (disaggregated mode only)."""

    def __init__(self, name: str, args: VllmServiceArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuscale:index:VllmService", name, None, opts)
        plain = args.serving
        model = plain.model
        namespace = args.namespace if args.namespace is not None else plain.namespace
        who = f"VllmService {name!r}"
        for role in model.serving.roles:
            claim(self, who, "kubernetes", "workload", vllm.workload_name(model.name, role), scope=namespace,
                  fix="serve the model once per namespace, or put the second one in another namespace")
        if args.image is None:  # an image given here (an Output) is the caller's to vouch for
            for warning in vllm.efa_image_warnings(plain):
                pulumi.log.warn(warning, resource=self)
        region = self._weights_region(plain)
        settings = resolved(plain, namespace=args.namespace, image=args.image, aws_region=region)

        sa = k8s.core.v1.ServiceAccount(
            f"{name}-serviceaccount", metadata=part(lift(settings, vllm.service_account_body), "metadata"),
            automount_service_account_token=False, opts=child_opts(self, opts),
        )
        identity = self._weights_identity(name, plain, settings, args.cluster_name, opts)
        # Pulumi waits for a Deployment to become available; a replica may need a node, the image and the weights
        minutes = math.ceil(plain.sizing.rollout_deadline_s / 60)
        timeouts = pulumi.CustomTimeouts(create=f"{minutes}m", update=f"{minutes}m")
        self.workloads = {}
        services: dict[Role, k8s.core.v1.Service] = {}
        for role in model.serving.roles:
            self.workloads[role] = self._workload(name, role, plain, settings, opts, [sa, *identity], timeouts)
            svc = lift(settings, functools.partial(vllm.service_body, role=role))
            services[role] = k8s.core.v1.Service(
                f"{name}-{role}-service", metadata=part(svc, "metadata"), spec=part(svc, "spec"),
                opts=child_opts(self, opts),
            )
            pdb = lift(settings, functools.partial(vllm.pdb_body, role=role))
            k8s.policy.v1.PodDisruptionBudget(
                f"{name}-{role}-pdb", metadata=part(pdb, "metadata"), spec=part(pdb, "spec"), opts=child_opts(self, opts),
            )
            _custom_resource(f"{name}-{role}-podmonitor", lift(settings, functools.partial(vllm.pod_monitor_body, role=role)),
                             "monitoring.coreos.com/v1", "PodMonitor", child_opts(self, opts))
        self.router = None
        if model.serving.mode == "disaggregated":
            self.router = PdRouter(
                f"{name}-router", PdRouterArgs(router=RouterSettings.from_service(plain), namespace=args.namespace),
                opts=child_opts(self, opts, *self.workloads.values(), custom_timeouts=timeouts),
            )
            self.endpoint = self.router.endpoint
        else:
            entry = services["aggregated"]
            self.endpoint = pulumi.Output.all(entry.metadata.name, entry.metadata.namespace).apply(
                lambda a: vllm.endpoint_url(a[0], a[1])
            )
        self.workload_names = pulumi.Output.all(**{r: object_name(w) for r, w in self.workloads.items()})
        self.register_outputs({"endpoint": self.endpoint, "workload_names": self.workload_names})

    def _workload(
        self, name: str, role: Role, plain: ServingSettings, settings: Settings,
        opts: pulumi.ResourceOptions | None, after: list[pulumi.Resource], timeouts: pulumi.CustomTimeouts,
    ) -> pulumi.CustomResource:
        body = lift(settings, functools.partial(vllm.workload_body, role=role))
        wopts = child_opts(self, opts, *after, custom_timeouts=timeouts)
        ref = vllm.workload_ref(plain.model.name, role, plain.shape)
        if ref.kind == "Deployment":
            return k8s.apps.v1.Deployment(f"{name}-{role}", metadata=part(body, "metadata"), spec=part(body, "spec"),
                                          opts=wopts)
        return _custom_resource(f"{name}-{role}", body, ref.api_version, ref.kind, wopts)

    def _weights_region(self, plain: ServingSettings) -> pulumi.Input[str] | None:
        """The region the S3 streamer talks to: the settings', else the AWS provider's (``s3://`` weights only)."""
        if plain.model.weights.scheme != "s3" or plain.aws_region:
            return None
        return aws.get_region_output(opts=pulumi.InvokeOptions(parent=self)).region

    def _weights_identity(
        self, name: str, plain: ServingSettings, settings: Settings,
        cluster_name: StrInput | None, opts: pulumi.ResourceOptions | None,
    ) -> list[pulumi.Resource]:
        """Read-only S3 access for the model's pods through EKS Pod Identity (no keys, no node-role grant)."""
        weights = plain.model.weights
        if weights.scheme != "s3":
            return []
        if cluster_name is None:
            pulumi.log.warn(
                f"{plain.model.name}: weights stream from {weights.uri} but no cluster_name was given, so no Pod "
                "Identity role is created; the vLLM pods need s3:GetObject on that prefix from somewhere else",
                resource=self,
            )
            return []
        invoke = pulumi.InvokeOptions(parent=self)
        trust = pulumi.Output.all(
            aws.get_partition_output(opts=invoke).partition, aws.get_region_output(opts=invoke).region,
            aws.get_caller_identity_output(opts=invoke).account_id, cluster_name, lift(settings, lambda s: s.namespace),
        ).apply(lambda a: json.dumps(iam.pod_identity_trust_policy(
            partition=a[0], region=a[1], account_id=a[2], cluster_name=a[3],
            namespace=a[4], service_account=vllm.service_account_name(plain.model.name),
        )))
        role = aws.iam.Role(
            f"{name}-weights-role",
            assume_role_policy=trust,
            description=f"gpuscale: vLLM pods of {plain.model.name} read {weights.uri}",
            tags=plain.tags,
            opts=child_opts(self, opts),
        )
        policy = aws.iam.RolePolicy(
            f"{name}-weights-read",
            role=role.name,
            policy=lift(settings, lambda s: json.dumps(vllm.weights_read_policy(weights.uri, s.aws_region or ""))),
            opts=child_opts(self, opts),
        )
        assoc = aws.eks.PodIdentityAssociation(
            f"{name}-weights-identity",
            cluster_name=cluster_name,
            namespace=lift(settings, lambda s: s.namespace),
            service_account=vllm.service_account_name(plain.model.name),
            role_arn=role.arn,
            tags=plain.tags,
            opts=child_opts(self, opts),
        )
        return [policy, assoc]
