"""Guardrails as pure rules over (resource type, properties); the CrossGuard pack in ``pack/`` calls them.

The pack ships with the package: ``pack_dir()`` (``gpuscale policy-path``, or ``python -m gpuscale.policy`` without
the cli extra) is the directory to pass to ``pulumi preview --policy-pack``; it needs the ``policy`` extra.
"""

from pathlib import Path

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
    requirement_admits_gpus,
    stack_from_urn,
)

__all__ = [
    "RESOURCE_RULES", "StackViolation", "ami_pinned", "autoscaler_metric", "autoscaler_role_scope",
    "autoscaler_target", "check_resources", "gang_scheduling", "gpu_nodepool_consolidation", "is_prod_stack",
    "nodepool_selects_gpus", "one_autoscaler_per_workload", "pack_dir", "requirement_admits_gpus", "stack_from_urn",
]


def pack_dir() -> Path:
    """The CrossGuard policy pack's directory (``PulumiPolicy.yaml`` and ``__main__.py``) in this installation."""
    return Path(__file__).resolve().parent / "pack"
