"""The autoscaler of one serving role: a KEDA ScaledObject (default) or an autoscaling/v2 HPA on custom metrics.

One per role, never one over prefill and decode together: prefill saturates on queued prompts
(``vllm:num_requests_waiting``), decode on KV-cache occupancy (``vllm:kv_cache_usage_perc``), and aggregated replicas on
both. Bodies and queries come from ``gpuscale.manifests.autoscaling`` (pure, unit-tested), which refuses a
query that does not select exactly one role. See ``docs/layer3-serving.md``.
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

from gpuscale.manifests import autoscaling
from gpuscale.manifests.autoscaling import RoleAutoscalerArgs

__all__ = ["RoleAutoscaler", "RoleAutoscalerArgs"]


class RoleAutoscaler(pulumi.ComponentResource):
    """Owns the replicas of one role's Deployment or LeaderWorkerSet.

    Creates ``<name>-scaledobject`` (``keda.sh/v1alpha1`` ScaledObject, backend ``keda``) or ``<name>-hpa``
    (``autoscaling/v2`` HorizontalPodAutoscaler on prometheus-adapter Pods metrics, backend ``hpa``).
    ``depends_on``: the role's workload (``VllmService.workloads[role]``) and the KEDA chart (its CRDs) or the
    prometheus-adapter chart.
    """

    autoscaler_name: pulumi.Output[str]
    """Name of the ScaledObject or HPA."""
    autoscaler_kind: pulumi.Output[str]
    """``ScaledObject`` or ``HorizontalPodAutoscaler``."""

    def __init__(
        self, name: str, args: RoleAutoscalerArgs, *, depends_on: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpuscale:index:RoleAutoscaler", name, None, opts)
        body = autoscaling.autoscaler_body(args)
        for warning in autoscaling.scale_to_zero_warnings(args):
            pulumi.log.warn(warning, resource=self)
        child = pulumi.ResourceOptions(parent=self, depends_on=list(depends_on))
        if args.backend == "keda":
            k8s.apiextensions.CustomResource(
                f"{name}-scaledobject", api_version=body["apiVersion"], kind=body["kind"],
                metadata=body["metadata"], spec=body["spec"], opts=child,
            )
        else:
            k8s.autoscaling.v2.HorizontalPodAutoscaler(f"{name}-hpa", metadata=body["metadata"], spec=body["spec"], opts=child)
        self.autoscaler_name = pulumi.Output.from_input(body["metadata"]["name"])
        self.autoscaler_kind = pulumi.Output.from_input(body["kind"])
        self.register_outputs({"autoscaler_name": self.autoscaler_name, "autoscaler_kind": self.autoscaler_kind})
