"""Pure builders for the prefill/decode router: vLLM Router (``vllm/vllm-router``) in Kubernetes discovery mode.

The router watches this model's pods by label (``--prefill-selector`` / ``--decode-selector``), sends each request to a
prefill pod, then to a decode pod that pulls the KV cache over NIXL. Because it discovers pods itself, the prefill and
decode autoscalers can add or remove replicas without touching the router. Facts: ``research/serving-facts.md`` 2.1, 2.5.

Two routers, by choice (issue 22, item 8): one router with a ``minAvailable: 1`` PDB can never be evicted, so the CPU
node it runs on, once ``expireAfter: 720h`` expires it, stays cordoned and draining until something deletes the pod.
Two replicas on different on-demand nodes with the same PDB let every drain (expiry, consolidation, drift) move one at
a time while the other serves (``gpuscale.manifests.entry_point``), and a lost node never takes the entry point. The
cost: ``cache_aware`` keeps its prefix tree in process, so each router learns the prefixes of the requests it routes;
a hot shared prefix (a system prompt) is learned by both within a few requests, but consecutive turns of one
conversation reach the same router half the time. Rollouts stay ``maxSurge: 1,
maxUnavailable: 0``. A stateless policy that survives replicas (``consistent_hash``) was not chosen: it keys on session
headers, not prompt prefixes, and its behaviour at the pinned router version could not be read here.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import Field

from gpuscale import labels, versions
from gpuscale.manifests import entry_point
from gpuscale.manifests.namespaces import WorkloadNamespace
from gpuscale.manifests.vllm import HTTP_PORT, ServingSettings, router_service_name, selector_labels
from gpuscale.spec.base import Spec
from gpuscale.spec.model import Role

METRICS_PORT = 29000
"""vLLM Router's Prometheus listener (``--prometheus-port`` default; bound to 0.0.0.0 so it can be scraped)."""
PREFILL_POLICY = "cache_aware"
"""Prefill: send a prompt where its prefix is likely cached (research 2.1 recommendation)."""
DECODE_POLICY = "power_of_two"
"""Decode: the less loaded of two random decode pods (research 2.1 recommendation)."""


class RouterSettings(Spec):
    """The router of one disaggregated model."""

    model: str
    """Model name; the router's Service is ``<model>``, the client entry point."""
    namespace: WorkloadNamespace
    """Namespace it watches (and runs in)."""
    replicas: int = Field(default=2, ge=1, le=16)
    """Two routers on different nodes, so a drain moves one while the other serves (module docstring); one replica
    cannot be evicted past its PDB, so its node waits for the CPU pool's ``terminationGracePeriod``."""
    request_timeout_s: int
    """``--request-timeout-secs``: the SLO request timeout."""
    worker_startup_timeout_s: int
    """``--worker-startup-timeout-secs``: how long a discovered pod may take to become healthy (a cold start)."""
    leaders_only: bool = False
    """Multi-node replicas: route only to LWS leaders (workers serve no HTTP)."""
    behind_door: bool = False
    """A front door owns the ``<model>`` Service; the router's is then ``<model>-pd``."""

    @classmethod
    def from_service(cls, args: ServingSettings) -> RouterSettings:
        m = args.model
        if m.serving.mode != "disaggregated":
            raise ValueError(f"model {m.name} is served {m.serving.mode}; only disaggregated serving needs a P/D router")
        return cls(
            model=m.name,
            namespace=args.namespace,
            request_timeout_s=math.ceil(m.slo.request_timeout_s),
            worker_startup_timeout_s=math.ceil(args.sizing.cold_start.total_s),
            leaders_only=args.shape.multi_node,
            behind_door=m.has_front_door,
        )


def router_name(model: str) -> str:
    return f"{model}-router"


def router_labels(model: str) -> dict[str, str]:
    """Router pods carry the model label but never a role label: no role selector (PDB, PodMonitor, autoscaler
    query) can pick them up."""
    return {
        "app.kubernetes.io/name": "vllm-router",
        "app.kubernetes.io/instance": model,
        "app.kubernetes.io/component": "router",
        labels.MANAGED_BY_LABEL: labels.MANAGED_BY,
        labels.MODEL_LABEL: model,
    }


def router_selector(model: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "vllm-router", "app.kubernetes.io/instance": model}


def role_selector_args(args: RouterSettings, role: Role) -> list[str]:
    sel = selector_labels(args.model, role)
    if args.leaders_only:
        sel[labels.LWS_WORKER_INDEX_LABEL] = "0"
    return [f"{k}={v}" for k, v in sel.items()]


def router_args(args: RouterSettings) -> list[str]:
    return [
        "--host", "0.0.0.0",
        "--port", str(HTTP_PORT),
        "--vllm-pd-disaggregation",
        "--kv-connector", "nixl",
        "--service-discovery",
        "--service-discovery-namespace", args.namespace,
        "--service-discovery-port", str(HTTP_PORT),
        "--prefill-selector", *role_selector_args(args, "prefill"),
        "--decode-selector", *role_selector_args(args, "decode"),
        "--prefill-policy", PREFILL_POLICY,
        "--decode-policy", DECODE_POLICY,
        "--request-timeout-secs", str(args.request_timeout_s),
        "--worker-startup-timeout-secs", str(args.worker_startup_timeout_s),
        "--prometheus-host", "0.0.0.0",
        "--prometheus-port", str(METRICS_PORT),
    ]


def _meta(args: RouterSettings, name: str) -> dict[str, Any]:
    return {"name": name, "namespace": args.namespace, "labels": router_labels(args.model)}


def router_deployment_body(args: RouterSettings) -> dict[str, Any]:
    """CPU only: no GPU toleration or node selector, so it lands on the general-purpose pool, on-demand and one replica
    per node (``entry_point.affinity``)."""
    probe = {"port": "http"}
    container = {
        "name": "router",
        "image": versions.VLLM_ROUTER.ref,
        "imagePullPolicy": "IfNotPresent",
        "command": ["vllm-router"],
        "args": router_args(args),
        "ports": [
            {"name": "http", "containerPort": HTTP_PORT, "protocol": "TCP"},
            {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"},
        ],
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "4Gi"}},
        # /health reports worker health (503 while a vLLM pod loads): probe the router itself instead
        "readinessProbe": {"httpGet": {"path": "/readiness", **probe}, "periodSeconds": 10, "failureThreshold": 3},
        "livenessProbe": {"httpGet": {"path": "/liveness", **probe}, "periodSeconds": 15, "failureThreshold": 4},
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(args, router_name(args.model)),
        "spec": {
            "replicas": args.replicas,  # no autoscaler owns the router
            "selector": {"matchLabels": router_selector(args.model)},
            # the new router is ready before the old one goes: a rollout never leaves the model without an entry point
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {
                "metadata": {"labels": router_labels(args.model)},
                "spec": {
                    "serviceAccountName": router_name(args.model),
                    "affinity": entry_point.affinity(router_selector(args.model)),
                    "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                    # in-flight requests finish before the router exits (it proxies whole requests)
                    "terminationGracePeriodSeconds": args.request_timeout_s + 15,
                    "containers": [container],
                },
            },
        },
    }


def router_service_body(args: RouterSettings) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(args, router_service_name(args.model, behind_door=args.behind_door)),
        "spec": {
            "type": "ClusterIP",
            "selector": router_selector(args.model),
            "ports": [{"name": "http", "port": HTTP_PORT, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def router_service_account_body(args: RouterSettings) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(args, router_name(args.model))}


def router_role_body(args: RouterSettings) -> dict[str, Any]:
    """Least privilege: read pods in this one namespace (a namespaced Role, not the upstream example's ClusterRole)."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": _meta(args, router_name(args.model)),
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
    }


def router_role_binding_body(args: RouterSettings) -> dict[str, Any]:
    name = router_name(args.model)
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": _meta(args, name),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": args.namespace}],
    }


def router_pod_monitor_body(args: RouterSettings) -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": _meta(args, router_name(args.model)),
        "spec": {
            "selector": {"matchLabels": router_selector(args.model)},
            "podTargetLabels": [labels.MODEL_LABEL],
            "podMetricsEndpoints": [{"port": "metrics", "path": "/metrics"}],
        },
    }


def router_pdb_body(args: RouterSettings) -> dict[str, Any]:
    """No voluntary eviction takes the last Ready router (``entry_point.pdb_body``)."""
    return entry_point.pdb_body(router_name(args.model), args.namespace, router_labels(args.model),
                                router_selector(args.model))


def router_objects(args: RouterSettings) -> list[dict[str, Any]]:
    """Every object of the router, in apply order (RBAC before the pods that use it)."""
    return [
        router_service_account_body(args),
        router_role_body(args),
        router_role_binding_body(args),
        router_deployment_body(args),
        router_pdb_body(args),
        router_service_body(args),
        router_pod_monitor_body(args),
    ]
