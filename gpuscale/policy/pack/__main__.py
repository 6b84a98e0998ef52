"""gpuscale CrossGuard policy pack: ``pulumi preview --policy-pack "$(gpuscale policy-path)"``.

Every policy calls a pure rule from ``gpuscale.policy.rules`` (tested directly, and run offline by
``gpuscale synth``); this file only adapts them to the policy SDK. It ships inside the package
(``gpuscale/policy/pack/``) and needs the ``policy`` extra (``pip install 'gpuscale[policy]'``). It applies to any Pulumi program, so users who
import our components into their own programs, or write their own manifests, get the same guardrails. Kubernetes
objects inside ``helm.v4.Chart`` are separate resources to CrossGuard, so chart-rendered NodePools and
ScaledObjects are checked too.

Production is the spec's ``environment.stage == "prod"`` (``gpuscale.guardrails.production``): the pack reads it from
the ``gpuscale.io/stage`` tag gpuscale writes on every GPU EC2NodeClass. For resources gpuscale did not emit, name the
stack's stage in the config (``--policy-pack-config cfg.json``): ``{"prod-ami-pinned": {"stage": "prod"}}``.

The pack object is only built when the Pulumi engine runs this file as ``__main__`` (constructing a
``PolicyPack`` starts its gRPC server and never returns); importing the module gives ``POLICIES`` for tests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    PolicyPack,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from gpuscale import labels
from gpuscale.guardrails.warm_minimum import CRITICAL_MIN_REPLICAS
from gpuscale.policy import rules

PACK_NAME = "gpuscale"

Rule = Callable[[str, Mapping[str, Any]], list[str]]


def resource_policy(name: str, description: str, rule: Rule) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        # the rules read the SDK's proxies directly: only a field a rule actually reads can be "unknown during
        # preview" (the SDK then notes that the policy could not run), not every unrelated field of the resource
        for message in rule(args.resource_type, args.props):
            report_violation(message, None)

    return ResourceValidationPolicy(
        name=name, description=description, validate=validate, enforcement_level=EnforcementLevel.MANDATORY
    )


def validate_prod_ami(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    stage = args.get_config().get("stage")
    for message in rules.ami_pinned(args.resource_type, args.props, stage=str(stage) if stage else None):
        report_violation(message, None)


StackRule = Callable[[Sequence[tuple[str, Mapping[str, Any]]]], list[rules.StackViolation]]


def stack_policy(name: str, description: str, rule: StackRule) -> StackValidationPolicy:
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        resources = [(r.resource_type, r.props) for r in args.resources]
        for v in rule(resources):
            report_violation(v.message, args.resources[v.index].urn)

    return StackValidationPolicy(
        name=name, description=description, validate=validate, enforcement_level=EnforcementLevel.MANDATORY
    )


POLICIES: list[Policy] = [
    resource_policy(
        "gpu-nodepool-consolidation",
        "A NodePool whose requirements admit GPU instance types uses consolidationPolicy WhenEmpty with "
        "consolidateAfter >= max(1h, the cold start gpuscale annotates), so Karpenter never evicts in-flight "
        "inference to repack nodes (acknowledge with the gpuscale annotation).",
        rules.gpu_nodepool_consolidation,
    ),
    resource_policy(
        "autoscaler-metric",
        "ScaledObject triggers and HPA metrics never use DCGM duty cycle, DCGM profiling counters, GPU memory or "
        "vLLM metric names the pinned vLLM no longer exposes.",
        rules.autoscaler_metric,
    ),
    resource_policy(
        "hpa-min-replicas",
        "An HPA holds at least one replica (HPAScaleToZero is an alpha gate, off on EKS); scale to zero needs KEDA.",
        rules.hpa_min_replicas,
    ),
    resource_policy(
        "critical-warm-minimum",
        f"An autoscaler labelled {labels.CRITICALITY_LABEL}: critical keeps at least {CRITICAL_MIN_REPLICAS} replicas "
        "(minReplicaCount / minReplicas), so a node drift or spot reclaim never leaves a critical role without a serving replica.",
        rules.critical_warm_minimum,
    ),
    resource_policy(
        "autoscaler-role-scope",
        "No autoscaler's query or selector spans prefill and decode (they saturate on different signals).",
        rules.autoscaler_role_scope,
    ),
    resource_policy(
        "gang-scheduling-multi-pod-gpu",
        "A LeaderWorkerSet whose replica is several GPU pods is gang-scheduled by kai-scheduler in a KAI queue.",
        rules.gang_scheduling,
    ),
    ResourceValidationPolicy(
        name="prod-ami-pinned",
        description="In production stacks an EC2NodeClass pins its AMI (no @latest alias, no floating SSM parameter).",
        validate=validate_prod_ami,
        enforcement_level=EnforcementLevel.MANDATORY,
        config_schema=PolicyConfigSchema(
            properties={"stage": {"type": "string", "enum": ["dev", "staging", "prod"],
                                  "description": "environment.stage of the stack, for resources without the "
                                                 "gpuscale.io/stage tag"}},
        ),
    ),
    stack_policy(
        "one-autoscaler-per-workload",
        "No two ScaledObjects/HPAs scale the same workload (they overwrite each other's replicas).",
        rules.one_autoscaler_per_workload,
    ),
    stack_policy(
        "gpu-nodepool-patch-consolidation",
        "A NodePoolPatch is checked as the NodePool it produces: a GPU pool stays WhenEmpty above its floor.",
        rules.nodepool_patches,
    ),
]


if __name__ == "__main__":
    PolicyPack(name=PACK_NAME, policies=POLICIES, enforcement_level=EnforcementLevel.MANDATORY)
