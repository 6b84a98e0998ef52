"""Guardrails as pure rules over (resource type, properties); the CrossGuard pack in ``policy/`` calls them."""

from gpuscale.policy.rules import (
    RESOURCE_RULES,
    StackViolation,
    ami_pinned,
    autoscaler_metric,
    autoscaler_role_scope,
    autoscaler_target,
    check_resources,
    gang_scheduling,
    gpu_nodepool_consolidation,
    is_prod_stack,
    nodepool_selects_gpus,
    one_autoscaler_per_workload,
    stack_from_urn,
)

__all__ = [
    "RESOURCE_RULES", "StackViolation", "ami_pinned", "autoscaler_metric", "autoscaler_role_scope",
    "autoscaler_target", "check_resources", "gang_scheduling", "gpu_nodepool_consolidation", "is_prod_stack",
    "nodepool_selects_gpus", "one_autoscaler_per_workload", "stack_from_urn",
]
