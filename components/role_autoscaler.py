"""The autoscaler of one serving role: a KEDA ScaledObject (default) or an autoscaling/v2 HPA on custom metrics.

One per role, never one over prefill and decode together: prefill saturates on queued prompt work, decode on its step
time and KV-cache occupancy, and aggregated replicas on both. Each role scales on its signals (``gpuscale.signals``,
one object per trigger); the body comes from ``gpuscale.manifests.autoscaling`` (pure, unit-tested), which refuses a
query that does not select exactly one role. See ``docs/layer3-serving.md``.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from gpuscale.components.children import (
    child_opts,
    claim,
    known_model,
    object_kind,
    object_name,
    require_prometheus_url,
)
from gpuscale.components.inputs import Namespace, PrometheusUrl, StrInput, lift, resolved
from gpuscale.manifests import autoscaling
from gpuscale.manifests.autoscaling import AutoscalerSettings
from gpuscale.sizing import PlatformSizing
from gpuscale.spec.base import Spec
from gpuscale.spec.model import Role
from gpuscale.spec.platform import PlatformSpec

__all__ = ["AutoscalerSettings", "RoleAutoscaler", "RoleAutoscalerArgs"]


class RoleAutoscalerArgs(Spec):
    """One role's autoscaler (``autoscaler``: target, signals, sized numbers), and where it runs and reads.

    ``namespace`` and ``prometheus_url`` take other resources' Outputs (``ns.metadata.name``,
    ``PrometheusStack.prometheus_url``).
    """

    autoscaler: AutoscalerSettings
    """The role, its workload, backend, and the targets and bounds sizing derived."""
    namespace: Namespace | None = None
    """Namespace of the role's workload; default ``autoscaler.namespace``."""
    prometheus_url: PrometheusUrl | None = None
    """Prometheus the KEDA triggers query; default ``autoscaler.prometheus_url``."""

    @classmethod
    def from_platform(
        cls, spec: PlatformSpec, sizing: PlatformSizing, model_name: str, role: Role, *,
        namespace: StrInput | None = None, prometheus_url: StrInput | None = None,
    ) -> RoleAutoscalerArgs:
        known_model(spec, model_name, role)
        require_prometheus_url(spec, prometheus_url)
        return cls(
            autoscaler=AutoscalerSettings.from_platform(spec, sizing, model_name, role),
            namespace=namespace, prometheus_url=prometheus_url,
        )


class RoleAutoscaler(pulumi.ComponentResource):
    """Owns the replicas of one role's Deployment or LeaderWorkerSet.

    Creates ``<name>-scaledobject`` (``keda.sh/v1alpha1`` ScaledObject, backend ``keda``) or ``<name>-hpa``
    (``autoscaling/v2`` HorizontalPodAutoscaler on prometheus-adapter Pods metrics, backend ``hpa``).
    Expects the role's workload (``VllmService.workloads[role]``), KEDA (``KedaOperator``: its CRDs) or
    prometheus-adapter (``PrometheusAdapter``), and a Prometheus scraping the vLLM PodMonitors; put the ones this
    program creates in ``opts.depends_on``.
    """

    autoscaler_name: pulumi.Output[str]
    """Name of the ScaledObject or HPA."""
    autoscaler_kind: pulumi.Output[str]
    """``ScaledObject`` or ``HorizontalPodAutoscaler``."""

    def __init__(self, name: str, args: RoleAutoscalerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuscale:index:RoleAutoscaler", name, None, opts)
        plain = args.autoscaler
        settings = resolved(plain, namespace=args.namespace, prometheus_url=args.prometheus_url)
        body = lift(settings, autoscaling.autoscaler_body)
        plain_body = autoscaling.autoscaler_body(plain)  # refuses a bad target or query now, not at deploy time
        claim(self, f"RoleAutoscaler {name!r}", "kubernetes", plain_body["kind"], plain_body["metadata"]["name"],
              scope=args.namespace if args.namespace is not None else plain.namespace,
              fix="one autoscaler per role workload")
        for warning in autoscaling.scale_to_zero_warnings(plain):
            pulumi.log.warn(warning, resource=self)
        metadata, spec = lift(body, lambda b: b["metadata"]), lift(body, lambda b: b["spec"])
        child: pulumi.CustomResource
        if plain.backend == "keda":
            child = k8s.apiextensions.CustomResource(
                f"{name}-scaledobject", api_version=plain_body["apiVersion"], kind=plain_body["kind"],
                metadata=metadata, spec=spec, opts=child_opts(self, opts),
            )
        else:
            child = k8s.autoscaling.v2.HorizontalPodAutoscaler(
                f"{name}-hpa", metadata=metadata, spec=spec, opts=child_opts(self, opts),
            )
        self.autoscaler_name = object_name(child)
        self.autoscaler_kind = object_kind(child)
        self.register_outputs({"autoscaler_name": self.autoscaler_name, "autoscaler_kind": self.autoscaler_kind})
