"""Guardrails as pure rules over (resource type, properties); the CrossGuard pack in ``pack/`` calls them.

The rules' thresholds, overrides and messages are defined once in ``gpuscale.guardrails`` (the spec imports the same
definitions); ``rules`` reads them off resources, ``gpu_nodepool`` decides which NodePools launch GPU nodes.
The pack ships with the package: ``pack_dir()`` (``gpuscale policy-path``, or ``python -m gpuscale.policy`` without
the cli extra) is the directory to pass to ``pulumi preview --policy-pack``; it needs the ``policy`` extra.
"""

from pathlib import Path

from gpuscale.policy.gpu_nodepool import nodepool_selects_gpus, requirement_admits_gpus, requirements_admit_gpus
from gpuscale.policy.rules import (
    RESOURCE_RULES,
    STACK_RULES,
    StackViolation,
    ami_pinned,
    autoscaler_metric,
    autoscaler_role_scope,
    autoscaler_target,
    check_resources,
    critical_warm_minimum,
    gang_scheduling,
    gpu_nodepool_consolidation,
    hpa_min_replicas,
    nodepool_patches,
    one_autoscaler_per_workload,
)

__all__ = [
    "RESOURCE_RULES", "STACK_RULES", "StackViolation", "ami_pinned", "autoscaler_metric", "autoscaler_role_scope",
    "autoscaler_target", "check_resources", "critical_warm_minimum", "gang_scheduling", "gpu_nodepool_consolidation", "hpa_min_replicas",
    "nodepool_patches", "nodepool_selects_gpus", "one_autoscaler_per_workload", "pack_dir", "requirement_admits_gpus",
    "requirements_admit_gpus",
]


def pack_dir() -> Path:
    """The CrossGuard policy pack's directory (``PulumiPolicy.yaml`` and ``__main__.py``) in this installation."""
    return Path(__file__).resolve().parent / "pack"
