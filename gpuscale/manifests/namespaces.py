"""The namespaces gpuscale's charts install into, and the rule every workload namespace must follow.

Each chart component (``gpuscale.components``) defaults its ``namespace`` to one of these constants, so this is the
one list of namespaces gpuscale's own controllers live in. A model's pods never go there: a workload in a controller's
namespace shares its RBAC, quotas and network policies, and deleting the model's namespace would delete the controller.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

from gpuscale.manifests.kai import KAI_NAMESPACE

KARPENTER_NAMESPACE = "kube-system"
"""The Karpenter chart (the upstream getting-started default)."""
KEDA_NAMESPACE = "keda"
LWS_NAMESPACE = "lws-system"
PROMETHEUS_STACK_NAMESPACE = "monitoring"
"""kube-prometheus-stack; ``observability.prometheus_url``'s default points here."""
PROMETHEUS_ADAPTER_NAMESPACE = "prometheus-adapter"
DEVICE_PLUGIN_NAMESPACE = "nvidia-device-plugin"

CHART_NAMESPACES: frozenset[str] = frozenset({
    KARPENTER_NAMESPACE, KAI_NAMESPACE, KEDA_NAMESPACE, LWS_NAMESPACE, PROMETHEUS_STACK_NAMESPACE,
    PROMETHEUS_ADAPTER_NAMESPACE, DEVICE_PLUGIN_NAMESPACE,
})
"""Namespaces gpuscale's Helm releases are installed in (the chart components' defaults)."""
SYSTEM_NAMESPACES: frozenset[str] = frozenset({"kube-system", "kube-public", "kube-node-lease"})
"""Namespaces Kubernetes itself owns."""
RESERVED_NAMESPACES: frozenset[str] = CHART_NAMESPACES | SYSTEM_NAMESPACES

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_LABEL_MAX = 63


def namespace_problem(namespace: str) -> str | None:
    """Why ``namespace`` cannot hold a model's workloads (not a DNS-1123 label, or a controller's), else ``None``."""
    if len(namespace) > DNS1123_LABEL_MAX or not _DNS1123_LABEL.match(namespace):
        return (
            f"namespace {namespace!r} is not a DNS-1123 label: use at most {DNS1123_LABEL_MAX} lowercase letters, "
            "digits and '-', starting and ending with a letter or digit (e.g. inference)"
        )
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
