"""One model's spare GPU nodes: a Karpenter ``CapacityBuffer`` per role whose sized headroom pays.

Bodies come from ``gpuscale.manifests.capacity_buffer`` (what Karpenter v1.14.1 does with them, and why KAI never sees
their virtual pods, is written there); this module only resolves Inputs and wires resources.
"""

from __future__ import annotations

import functools

import pulumi
import pulumi_kubernetes as k8s

from gpuscale.components.children import child_opts, claim, known_model, object_name
from gpuscale.components.inputs import Namespace, StrInput, lift, resolved
from gpuscale.manifests import capacity_buffer
from gpuscale.manifests.vllm import ServingSettings
from gpuscale.sizing import PlatformSizing
from gpuscale.spec.base import Spec
from gpuscale.spec.platform import PlatformSpec

__all__ = ["CapacityBufferSet", "CapacityBufferSetArgs"]


class CapacityBufferSetArgs(Spec):
    """One model's serving settings (its sizing holds each role's headroom) and the namespace its workloads are in."""

    serving: ServingSettings
    """``ServingSettings.from_platform(spec, sizing, model_name)``: the same the model's ``VllmService`` was built from."""
    namespace: Namespace | None = None
    """Namespace of the buffers; default ``serving.namespace``. The buffers reference the role's workload there."""

    @classmethod
    def from_platform(
        cls, spec: PlatformSpec, sizing: PlatformSizing, model_name: str, *, namespace: StrInput | None = None,
    ) -> CapacityBufferSetArgs:
        known_model(spec, model_name)
        return cls(serving=ServingSettings.from_platform(spec, sizing, model_name), namespace=namespace)

    @property
    def emits(self) -> bool:
        """Whether any role's headroom is an emitted CapacityBuffer."""
        return any(r.headroom is not None and r.headroom.mode == "capacity-buffer" and r.headroom.emitted
                   for r in self.serving.sizing.roles)


class CapacityBufferSet(pulumi.ComponentResource):
    """Spare GPU nodes for one model's scale-ups.

    Creates, per role ``<r>`` whose sized headroom is a paying CapacityBuffer, ``<name>-<r>`` (CapacityBuffer
    ``<model>-<r>-headroom``: ``scalableRef`` to the role's Deployment, ``replicas`` = N) and, for a multi-node replica,
    ``<name>-<r>-template`` (the PodTemplate it names, the worker pod's template). Expects Karpenter v1.14.1 with the
    ``CapacityBuffer`` feature gate (``KarpenterController`` with ``capacity_buffer: true``: its chart installs the CRD)
    and the role's workload (``VllmService``); put the ones this program creates in ``opts.depends_on``.
    """

    buffer_names: pulumi.Output[dict[str, str]]
    """Role -> CapacityBuffer name (roles without a buffer are absent)."""

    def __init__(self, name: str, args: CapacityBufferSetArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuscale:index:CapacityBufferSet", name, None, opts)
        plain = args.serving
        namespace = args.namespace if args.namespace is not None else plain.namespace
        settings = resolved(plain, namespace=args.namespace)
        names: dict[str, pulumi.Output[str]] = {}
        for sized in plain.sizing.roles:
            if sized.headroom is None or not capacity_buffer.headroom_bodies(plain, sized.role, sized.headroom):
                continue
            role, headroom = sized.role, sized.headroom
            claim(self, f"CapacityBufferSet {name!r}", "kubernetes", "CapacityBuffer",
                  capacity_buffer.buffer_name(plain.model.name, role), scope=namespace,
                  fix="one headroom per model and namespace")
            bodies = lift(settings, functools.partial(capacity_buffer.headroom_bodies, role=role, headroom=headroom))
            after: list[pulumi.Resource] = []
            if plain.shape.multi_node:
                template = lift(bodies, lambda b: b[0])
                after.append(k8s.core.v1.PodTemplate(
                    f"{name}-{role}-template", metadata=lift(template, lambda b: b["metadata"]),
                    template=lift(template, lambda b: b["template"]), opts=child_opts(self, opts),
                ))
            buffer = lift(bodies, lambda b: b[-1])
            cr = k8s.apiextensions.CustomResource(
                f"{name}-{role}", api_version=capacity_buffer.API_VERSION, kind="CapacityBuffer",
                metadata=lift(buffer, lambda b: b["metadata"]), spec=lift(buffer, lambda b: b["spec"]),
                opts=child_opts(self, opts, *after),
            )
            names[role] = object_name(cr)
        self.buffer_names = pulumi.Output.all(**names) if names else pulumi.Output.from_input({})
        self.register_outputs({"buffer_names": self.buffer_names})
