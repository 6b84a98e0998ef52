"""The prefill/decode router of a disaggregated model: vLLM Router in Kubernetes service-discovery mode.

Why this router and this version: ``vllm/vllm-router:v0.1.17`` (``versions.VLLM_ROUTER``; vllm-project/router 0.1.17,
PyPI 2026-11-04, the newest release) is the vLLM project's own P/D-aware router. It works with the stock
``vllm/vllm-openai`` image and vLLM's built-in ``NixlConnector`` (no LMCache image as production-stack's P/D needs, no
Dynamo runtime or etcd/NATS), needs no CRDs, Gateway or sidecar (unlike llm-d's EPP: Envoy, an 8-CPU picker and a decode
sidecar), and finds prefill and decode pods by label, so the two autoscalers add and remove replicas without touching
it. Trade-offs: it is pre-1.0, and prefix-affinity state lives in each router process (``research/serving-facts.md``
2.1 and 2.5). It runs on CPU nodes only: no GPU toleration, no GPU node selector.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from gpuscale.components.children import child_opts, claim
from gpuscale.components.inputs import Namespace, lift, resolved
from gpuscale.manifests import router, vllm
from gpuscale.manifests.router import RouterSettings
from gpuscale.spec.base import Spec

__all__ = ["PdRouter", "PdRouterArgs", "RouterSettings"]


class PdRouterArgs(Spec):
    """The router of one disaggregated model (``router``) and the namespace it runs in, which may be an Output."""

    router: RouterSettings
    """Model, replicas, timeouts (``RouterSettings.from_service(VllmServiceArgs.serving)``)."""
    namespace: Namespace | None = None
    """Namespace it runs in and watches; default ``router.namespace``."""


def _part(body: dict[str, Any] | pulumi.Output[dict[str, Any]], key: str) -> Any:
    return lift(body, lambda b: b[key])


class PdRouter(pulumi.ComponentResource):
    """vLLM Router for one disaggregated model.

    Creates ``<name>-serviceaccount``, ``<name>-role`` (get/list/watch pods in the model's namespace only),
    ``<name>-rolebinding``, ``<name>-deployment`` (two replicas on different on-demand CPU nodes), ``<name>-pdb`` (minAvailable 1),
    ``<name>-service`` (named ``<model>``, the model's entry point; ``<model>-pd`` behind a front door, which
    then owns ``<model>``) and ``<name>-podmonitor`` (router metrics on port
    29000). Expects the namespace, the model's prefill and decode pods (``VllmService``, which creates this router), a
    CPU node pool and prometheus-operator's CRDs.
    """

    endpoint: pulumi.Output[str]
    """In-cluster URL of the router, ``http://<model>.<ns>.svc.cluster.local:8000``."""
    service_name: pulumi.Output[str]
    """Name of the router's Service (the model name; ``<model>-pd`` behind a front door)."""

    def __init__(self, name: str, args: PdRouterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuscale:index:PdRouter", name, None, opts)
        model = args.router.model
        # behind a front door the door's Service is <model> and the router's <model>-pd (router_service_name)
        claim(self, f"PdRouter {name!r}", "kubernetes", "Service",
              vllm.router_service_name(model, behind_door=args.router.behind_door),
              scope=args.namespace if args.namespace is not None else args.router.namespace,
              fix="one router per model and namespace")
        settings = resolved(args.router, namespace=args.namespace)
        sa = lift(settings, router.router_service_account_body)
        account = k8s.core.v1.ServiceAccount(f"{name}-serviceaccount", metadata=_part(sa, "metadata"),
                                             opts=child_opts(self, opts))
        role_body = lift(settings, router.router_role_body)
        role = k8s.rbac.v1.Role(f"{name}-role", metadata=_part(role_body, "metadata"), rules=_part(role_body, "rules"),
                                opts=child_opts(self, opts))
        rb = lift(settings, router.router_role_binding_body)
        binding = k8s.rbac.v1.RoleBinding(
            f"{name}-rolebinding", metadata=_part(rb, "metadata"), role_ref=_part(rb, "roleRef"),
            subjects=_part(rb, "subjects"), opts=child_opts(self, opts, account, role),
        )
        dep = lift(settings, router.router_deployment_body)
        k8s.apps.v1.Deployment(f"{name}-deployment", metadata=_part(dep, "metadata"), spec=_part(dep, "spec"),
                               opts=child_opts(self, opts, binding))
        pdb = lift(settings, router.router_pdb_body)
        k8s.policy.v1.PodDisruptionBudget(f"{name}-pdb", metadata=_part(pdb, "metadata"), spec=_part(pdb, "spec"),
                                          opts=child_opts(self, opts))
        svc = lift(settings, router.router_service_body)
        service = k8s.core.v1.Service(f"{name}-service", metadata=_part(svc, "metadata"), spec=_part(svc, "spec"),
                                      opts=child_opts(self, opts))
        pm = lift(settings, router.router_pod_monitor_body)
        k8s.apiextensions.CustomResource(
            f"{name}-podmonitor", api_version="monitoring.coreos.com/v1", kind="PodMonitor",
            metadata=_part(pm, "metadata"), spec=_part(pm, "spec"), opts=child_opts(self, opts),
        )
        self.service_name = service.metadata.name
        self.endpoint = pulumi.Output.all(service.metadata.name, service.metadata.namespace).apply(
            lambda a: vllm.endpoint_url(a[0], a[1])
        )
        self.register_outputs({"endpoint": self.endpoint, "service_name": self.service_name})
