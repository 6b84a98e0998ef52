"""The namespaces gpuscale's charts install into, and the rule every workload namespace must follow.

Each chart component (``gpuscale.components``) defaults its ``namespace`` to one of these constants, so this is the
one list of namespaces gpuscale's own controllers live in. A model's pods never go there: a workload in a controller's
namespace shares its RBAC, quotas and network policies, and deleting the model's namespace would delete the controller.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, TypeAdapter, ValidationError

from gpuscale.manifests.kai import KAI_NAMESPACE
from gpuscale.spec.base import Namespace

KARPENTER_NAMESPACE = "kube-system"
"""The Karpenter chart (the upstream getting-started default)."""
KEDA_NAMESPACE = "keda"
LWS_NAMESPACE = "lws-system"
PROMETHEUS_STACK_NAMESPACE = "monitoring"
"""kube-prometheus-stack; ``observability.prometheus_url``'s default points here."""
PROMETHEUS_ADAPTER_NAMESPACE = "prometheus-adapter"
DEVICE_PLUGIN_NAMESPACE = "nvidia-device-plugin"
DCGM_EXPORTER_NAMESPACE = "dcgm-exporter"

CHART_NAMESPACES: frozenset[str] = frozenset({
    KARPENTER_NAMESPACE, KAI_NAMESPACE, KEDA_NAMESPACE, LWS_NAMESPACE, PROMETHEUS_STACK_NAMESPACE,
    PROMETHEUS_ADAPTER_NAMESPACE, DEVICE_PLUGIN_NAMESPACE, DCGM_EXPORTER_NAMESPACE,
})
"""Namespaces gpuscale's Helm releases are installed in (the chart components' defaults)."""
SYSTEM_NAMESPACES: frozenset[str] = frozenset({"kube-system", "kube-public", "kube-node-lease"})
"""Namespaces Kubernetes itself owns."""
RESERVED_NAMESPACES: frozenset[str] = CHART_NAMESPACES | SYSTEM_NAMESPACES

_NAMESPACE: TypeAdapter[str] = TypeAdapter(Namespace)


def namespace_problem(namespace: str) -> str | None:
    """Why ``namespace`` cannot hold a model's workloads (not an RFC 1123 label, or a controller's), else ``None``."""
    try:
        _NAMESPACE.validate_python(namespace)
    except ValidationError as exc:  # the stack file's own check and message
        return str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
    if namespace in RESERVED_NAMESPACES:
        return (
            f"namespace {namespace!r} belongs to Kubernetes or a controller gpuscale installs; model workloads need "
            f"their own namespace (reserved: {', '.join(sorted(RESERVED_NAMESPACES))})"
        )
    return None


def workload_namespace(namespace: str) -> str:
    """``namespace`` if model workloads may use it, else a ``ValueError`` saying why (``namespace_problem``)."""
    problem = namespace_problem(namespace)
    if problem:
        raise ValueError(problem)
    return namespace


WorkloadNamespace = Annotated[str, AfterValidator(workload_namespace)]
"""A namespace model workloads may run in (see ``namespace_problem``)."""
