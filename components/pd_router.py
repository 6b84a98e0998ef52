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

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

from gpuscale.manifests import router, vllm
from gpuscale.manifests.router import PdRouterArgs

__all__ = ["PdRouter", "PdRouterArgs"]


class PdRouter(pulumi.ComponentResource):
    """vLLM Router for one disaggregated model.

    Creates ``<name>-serviceaccount``, ``<name>-role`` (get/list/watch pods in the model's namespace only),
    ``<name>-rolebinding``, ``<name>-deployment`` (one replica, CPU only, on-demand), ``<name>-pdb`` (minAvailable 1),
    ``<name>-service`` (named ``<model>``: the model's entry point) and ``<name>-podmonitor`` (router metrics on port
    29000).
    """

    endpoint: pulumi.Output[str]
    """In-cluster URL of the router, ``http://<model>.<ns>.svc.cluster.local:8000``."""
    service_name: pulumi.Output[str]
    """Name of the router's Service (the model name)."""

    def __init__(
        self, name: str, args: PdRouterArgs, *, depends_on: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpuscale:index:PdRouter", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, depends_on=list(depends_on))
        sa = router.router_service_account_body(args)
        account = k8s.core.v1.ServiceAccount(f"{name}-serviceaccount", metadata=sa["metadata"], opts=child)
        role_body = router.router_role_body(args)
        role = k8s.rbac.v1.Role(f"{name}-role", metadata=role_body["metadata"], rules=role_body["rules"], opts=child)
        rb = router.router_role_binding_body(args)
        binding = k8s.rbac.v1.RoleBinding(
            f"{name}-rolebinding", metadata=rb["metadata"], role_ref=rb["roleRef"], subjects=rb["subjects"],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[account, role, *depends_on]),
        )
        dep = router.router_deployment_body(args)
        k8s.apps.v1.Deployment(
            f"{name}-deployment", metadata=dep["metadata"], spec=dep["spec"],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[binding, *depends_on]),
        )
        pdb = router.router_pdb_body(args)
        k8s.policy.v1.PodDisruptionBudget(f"{name}-pdb", metadata=pdb["metadata"], spec=pdb["spec"], opts=child)
        svc = router.router_service_body(args)
        service = k8s.core.v1.Service(f"{name}-service", metadata=svc["metadata"], spec=svc["spec"], opts=child)
        pm = router.router_pod_monitor_body(args)
        k8s.apiextensions.CustomResource(
            f"{name}-podmonitor", api_version=pm["apiVersion"], kind=pm["kind"], metadata=pm["metadata"], spec=pm["spec"],
            opts=child,
        )
        self.service_name = service.metadata.name
        self.endpoint = pulumi.Output.from_input(
            f"http://{args.model}.{args.namespace}.svc.cluster.local:{vllm.HTTP_PORT}"
        )
        self.register_outputs({"endpoint": self.endpoint, "service_name": self.service_name})
