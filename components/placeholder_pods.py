"""One model's spare GPU nodes held by low-priority placeholder pods under KAI (``headroom.mode: placeholder-pods``).

Bodies come from ``gpuscale.manifests.placeholder`` (why they sit in the model's queue, and why the serving pods then
carry no preemption delay, is written there and in ``gpuscale.headroom``); this module only resolves Inputs and wires
resources.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from gpuscale.components.children import child_opts, claim, known_model, object_name
from gpuscale.components.inputs import Namespace, StrInput, lift, resolved
from gpuscale.manifests import placeholder
from gpuscale.manifests.vllm import ServingSettings
from gpuscale.sizing import PlatformSizing
from gpuscale.spec.base import Spec
from gpuscale.spec.platform import PlatformSpec

__all__ = ["PlaceholderPodSet", "PlaceholderPodSetArgs"]


class PlaceholderPodSetArgs(Spec):
    """One model's serving settings (its sizing holds each role's headroom) and the namespace its workloads are in."""

    serving: ServingSettings
    """``ServingSettings.from_platform(spec, sizing, model_name)``: the same the model's ``VllmService`` was built from
    (its KAI wiring carries the serving pods' preemption delay 0 that lets them evict the placeholders)."""
    namespace: Namespace | None = None
    """Namespace of the placeholders; default ``serving.namespace``. They must share the model's KAI queue."""

    @classmethod
    def from_platform(
        cls, spec: PlatformSpec, sizing: PlatformSizing, model_name: str, *, namespace: StrInput | None = None,
    ) -> PlaceholderPodSetArgs:
        known_model(spec, model_name)
        return cls(serving=ServingSettings.from_platform(spec, sizing, model_name), namespace=namespace)

    @property
    def emits(self) -> bool:
        """Whether any role's headroom is emitted as placeholder pods."""
        return any(placeholder.emits(r.headroom) for r in self.serving.sizing.roles)


class PlaceholderPodSet(pulumi.ComponentResource):
    """Placeholder pods for one model's scale-ups.

    Creates ``<name>-priority`` (the model's PriorityClass, below every KAI class) and, per role ``<r>`` whose sized
    headroom is paying placeholder pods, ``<name>-<r>`` (Deployment ``<model>-<r>-placeholder``: N x pods per replica
    pods of a serving pod's size, preemptible, in the model's queue). Expects KAI and the model's queue; put the
    resources this program creates for them in ``opts.depends_on``.
    """

    deployment_names: pulumi.Output[dict[str, str]]
    """Role -> placeholder Deployment name (roles without placeholders are absent)."""
    priority_class_name: pulumi.Output[str]
    """The placeholders' PriorityClass ("" when no role has placeholders)."""

    def __init__(self, name: str, args: PlaceholderPodSetArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuscale:index:PlaceholderPodSet", name, None, opts)
        plain = args.serving
        namespace = args.namespace if args.namespace is not None else plain.namespace
        settings = resolved(plain, namespace=args.namespace)
        names: dict[str, pulumi.Output[str]] = {}
        self.priority_class_name = pulumi.Output.from_input("")
        if args.emits:
            pc = lift(settings, placeholder.priority_class_body)
            klass = k8s.scheduling.v1.PriorityClass(
                f"{name}-priority", metadata=lift(pc, lambda b: b["metadata"]), value=lift(pc, lambda b: b["value"]),
                global_default=lift(pc, lambda b: b["globalDefault"]),
                preemption_policy=lift(pc, lambda b: b["preemptionPolicy"]),
                description=lift(pc, lambda b: b["description"]), opts=child_opts(self, opts),
            )
            self.priority_class_name = object_name(klass)
            for sized in plain.sizing.roles:
                if not placeholder.emits(sized.headroom):
                    continue
                role, headroom = sized.role, sized.headroom
                assert headroom is not None
                claim(self, f"PlaceholderPodSet {name!r}", "kubernetes", "Deployment",
                      placeholder.deployment_name(plain.model.name, role), scope=namespace,
                      fix="one headroom per model and namespace")
                body = lift(settings, lambda s, role=role, h=headroom: placeholder.deployment_body(s, role, h))
                deployment = k8s.apps.v1.Deployment(
                    f"{name}-{role}", metadata=lift(body, lambda b: b["metadata"]), spec=lift(body, lambda b: b["spec"]),
                    opts=child_opts(self, opts, klass),
                )
                names[role] = object_name(deployment)
        self.deployment_names = pulumi.Output.all(**names) if names else pulumi.Output.from_input({})
        self.register_outputs({"deployment_names": self.deployment_names,
                               "priority_class_name": self.priority_class_name})

