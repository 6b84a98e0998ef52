"""``gpuscale validate`` and the policy pack agree on every rule they both apply (``gpuscale.guardrails``).

Each case changes one value of a shipped stack at, just below and just above a rule's threshold. ``validate`` reads the
changed stack as users write it (``validate_config``: the spec, then the feasibility and cross-layer checks); the pack
reads the objects that stack emits, built by the same builders the components call, from the changed spec taken as
given (``model_copy`` does not validate, so a value ``validate`` refuses is still emitted as asked). The verdicts must
match: accepted by one means no violation from the other. ``test_the_builders_emit_what_synth_emits`` ties the
builders to the real synth, so the pack reads what a ``pulumi preview`` would send it.

Where a builder refuses a value itself (a banned metric, an HPA at zero: the builders call the same guardrail), the
object is the one a hand-written program would send: the emitted object with that one field changed.
"""

from __future__ import annotations

import copy
import itertools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel

from gpuscale import sizing
from gpuscale.guardrails import consolidation, warm_minimum
from gpuscale.manifests import autoscaling, karpenter
from gpuscale.policy import rules
from gpuscale.spec.platform import PlatformSpec
from gpuscale.stackfile import StackConfigError, read_stack_config, validate_config
from gpuscale.synth.render import SynthResult
from tests.conftest import stack_path

Resources = list[tuple[str, dict[str, Any]]]
_TOKEN = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _tokens(path: str) -> list[str | int]:
    return [int(i) if i else name for name, i in _TOKEN.findall(path)]


def set_raw(raw: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """``raw`` (the stack file's ``gpuscale:*`` values) with ``path`` set, intermediate maps created."""
    out = copy.deepcopy(raw)
    node: Any = out
    tokens = _tokens(path)
    for here, nxt in itertools.pairwise(tokens):
        if isinstance(here, str) and here not in node:
            node[here] = [] if isinstance(nxt, int) else {}
        node = node[here]
    node[tokens[-1]] = value
    return out


def set_spec(model: Any, tokens: list[str | int], value: Any) -> Any:
    """The typed spec with one value replaced, not validated (``model_copy``): what the builders are handed."""
    head, rest = tokens[0], tokens[1:]
    if isinstance(head, int):
        items = list(model)
        items[head] = set_spec(items[head], rest, value) if rest else value
        return items
    assert isinstance(model, BaseModel)
    child = getattr(model, head)
    return model.model_copy(update={head: set_spec(child, rest, value) if rest else value})


@dataclass(frozen=True)
class Case:
    rule: str
    """The pack's rule name (``check_resources``)."""
    stack: str
    changes: tuple[tuple[str, Any], ...]
    """``(YAML path under gpuscale:, value)`` pairs applied to the stack."""
    paths: tuple[str, ...]
    """Where ``validate`` reports this rule (a refusal elsewhere means the case changed more than one rule)."""
    emit: Callable[[PlatformSpec, PlatformSpec], Resources]
    """The objects the pack reads: ``emit(base spec, changed spec)``."""

    def __str__(self) -> str:
        return f"{self.stack}: " + ", ".join(f"{p}={v!r}" for p, v in self.changes)


# --- what each rule reads, as the components emit it ------------------------------------------------------------


def nodepools(_: PlatformSpec, spec: PlatformSpec) -> Resources:
    """Every GPU NodePool as ``GpuNodePool`` builds it (``from_spec``: the pool's zones, its slowest cold start)."""
    return [(rules.NODEPOOL, karpenter.nodepool_body(
        p, zones=spec.topology.pool_zones(p.name), cold_start_s=karpenter.longest_cold_start_s(spec, p.name),
    )) for p in spec.topology.gpu_pools]


def nodeclasses(_: PlatformSpec, spec: PlatformSpec) -> Resources:
    return [(rules.EC2NODECLASS, karpenter.ec2nodeclass_body(
        p, cluster_name=spec.environment.cluster_name, node_role_name="node-role",
        root_volume_gib=sizing.root_volume_gib(spec, p), tags=dict(spec.environment.tags), stage=spec.environment.stage,
    )) for p in spec.topology.gpu_pools]


def autoscalers(spec: PlatformSpec) -> Resources:
    sized = sizing.size_platform(spec)
    out: Resources = []
    for m in spec.models:
        for role in m.serving.roles:
            body = autoscaling.autoscaler_body(autoscaling.AutoscalerSettings.from_platform(spec, sized, m.name, role))
            out.append((rules.SCALEDOBJECT if body["kind"] == "ScaledObject" else
                        "kubernetes:autoscaling/v2:HorizontalPodAutoscaler", body))
    return out


def metric_swapped(base: PlatformSpec, spec: PlatformSpec) -> Resources:
    """The base ScaledObject with the changed role's primary metric renamed in its trigger queries (the builders
    refuse a banned metric themselves, by the same rule)."""
    out: Resources = []
    for (rtype, body), m_base, m in zip(autoscalers(base), base.models, spec.models, strict=True):
        metric = m.autoscaling.aggregated.metric
        if metric is not None:
            primary = sizing.size_platform(base).model(m_base.name).role("aggregated").signals[0].metric
            body = copy.deepcopy(body)
            for trigger in body["spec"]["triggers"]:
                query = trigger.get("metadata", {}).get("query")
                if query is not None:
                    trigger["metadata"]["query"] = query.replace(primary, metric)
        out.append((rtype, body))
    return out


def hpa_at_minimum(base: PlatformSpec, spec: PlatformSpec) -> Resources:
    """The HPA of the base stack on backend hpa, holding the changed stack's warm minimum (the builder refuses 0)."""
    model = spec.models[0]
    hpa_base = set_spec(base, ["models", 0, "autoscaling", "backend"], "hpa")
    hpa_base = set_spec(hpa_base, ["models", 0, "autoscaling", "aggregated", "min_replicas"], 1)
    hpa_base = set_spec(hpa_base, ["models", 0, "front_door", "enabled"], False)
    [(rtype, body)] = autoscalers(hpa_base)
    body["spec"]["minReplicas"] = sizing.default_min_replicas(model, "aggregated")
    return [(rtype, body)]


# --- the cases --------------------------------------------------------------------------------------------------

POOL = "topology.gpu_pools[0]"
CONSOLIDATION = (f"{POOL}.consolidate_after", f"{POOL}.consolidation_policy")


def consolidation_cases() -> list[Case]:
    rule = "gpu-nodepool-consolidation"
    cases = [
        Case(rule, "dev", ((f"{POOL}.consolidate_after", after),), CONSOLIDATION, nodepools)
        # the hour: at, a second below, a second above, and issue 21's 30m
        for after in ("1h", "3599s", "3601s", "30m", "59m", "61m", "Never")
    ]
    cases += [
        Case(rule, "dev", ((f"{POOL}.consolidation_policy", policy),), CONSOLIDATION, nodepools)
        for policy in ("WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced")
    ]
    cases.append(Case(rule, "dev", (  # the override accepts both
        (f"{POOL}.consolidation_policy", "WhenEmptyOrUnderutilized"), (f"{POOL}.consolidate_after", "5m"),
        (f"{POOL}.acknowledge_underutilized_consolidation_evicts_inference", True),
    ), CONSOLIDATION, nodepools))
    return cases


def slow_cold_start_s() -> float:
    """prod's h100 pool with a 4000 s image pull: a cold start above the hour, which then sets the floor."""
    raw = set_raw(read_stack_config(stack_path("prod")), "topology.provisioning.image_pull_s", 4000)
    spec = PlatformSpec.model_validate(raw, strict=True)
    seconds = karpenter.longest_cold_start_s(spec, spec.topology.gpu_pools[0].name)
    assert seconds > consolidation.MIN_CONSOLIDATE_AFTER_S
    return seconds


def cold_start_cases() -> list[Case]:
    floor = math.ceil(slow_cold_start_s())
    return [
        Case("gpu-nodepool-consolidation", "prod", (
            # the slow pull lengthens the other pool's cold start too: keep it above its own floor
            ("topology.provisioning.image_pull_s", 4000), ("topology.gpu_pools[1].consolidate_after", "2h"),
            (f"{POOL}.consolidate_after", after),
        ), CONSOLIDATION, nodepools)
        for after in (f"{floor}s", f"{floor - 1}s", f"{floor + 1}s", "1h")
    ]


def metric_cases() -> list[Case]:
    path = "models[0].autoscaling.aggregated.metric"
    banned = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_DEV_FB_USED", "vllm:gpu_cache_usage_perc",
              "vllm:num_requests_swapped")
    allowed = ("vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:prompt_tokens_total")
    return [Case("autoscaler-metric", "dev", ((path, metric),), (path,), metric_swapped) for metric in (*banned, *allowed)]


def hpa_cases() -> list[Case]:
    rule = "hpa-min-replicas"
    base = (("models[0].autoscaling.backend", "hpa"), ("models[0].front_door.enabled", False))
    paths = ("models[0].autoscaling.aggregated.min_replicas",)
    cases = [Case(rule, "dev", (*base, ("models[0].autoscaling.aggregated.min_replicas", n)), paths, hpa_at_minimum)
             for n in (0, 1, 2)]
    # unset on a best-effort SLO: 0 by default, refused the same way
    unset = (*base, ("models[0].autoscaling.aggregated", {"max_replicas": 4}))
    cases.append(Case(rule, "dev", unset, paths, hpa_at_minimum))
    return cases


def all_autoscalers(_: PlatformSpec, spec: PlatformSpec) -> Resources:
    """Every role's autoscaler as ``RoleAutoscaler`` builds it, labelled with the model's criticality."""
    return autoscalers(spec)


def warm_minimum_cases() -> list[Case]:
    """prod's critical llama-70b: a role's warm minimum a replica below, at and above the floor, and the same
    one-replica minimum accepted by both once the SLO is no longer critical."""
    rule = "critical-warm-minimum"
    cases = [
        Case(rule, "prod", ((f"models[0].autoscaling.{role}.min_replicas", n),),
             (f"models[0].autoscaling.{role}.min_replicas",), all_autoscalers)
        for role in ("prefill", "decode")
        for n in (warm_minimum.CRITICAL_MIN_REPLICAS - 1, warm_minimum.CRITICAL_MIN_REPLICAS,
                  warm_minimum.CRITICAL_MIN_REPLICAS + 1)
    ]
    relaxed = (("models[0].slo.criticality", "standard"), ("models[0].autoscaling.decode.min_replicas", 1))
    cases.append(Case(rule, "prod", relaxed, ("models[0].autoscaling.decode.min_replicas",), all_autoscalers))
    return cases


def ami_cases() -> list[Case]:
    path = f"{POOL}.ami_alias"
    return [
        Case("prod-ami-pinned", stack, ((path, alias),), (path,), nodeclasses)
        for stack in ("prod", "staging", "dev") for alias in ("al2023@latest",)
    ] + [Case("prod-ami-pinned", "prod", (), (path,), nodeclasses),
         Case("prod-ami-pinned", "dev", (("environment.stage", "prod"), (path, "al2023@latest")), (path,), nodeclasses),
         Case("prod-ami-pinned", "prod", (("environment.stage", "staging"), (path, "al2023@latest")), (path,),
              nodeclasses)]


CASES = [*consolidation_cases(), *cold_start_cases(), *metric_cases(), *hpa_cases(), *warm_minimum_cases(), *ami_cases()]


def validate_verdict(case: Case) -> list[str]:
    """What ``validate`` refuses of the changed stack, at this rule's paths ([] accepted)."""
    raw = read_stack_config(stack_path(case.stack))
    for path, value in case.changes:
        raw = set_raw(raw, path, value)
    try:
        validate_config(raw, case.stack)
    except StackConfigError as exc:
        elsewhere = [p.line() for p in exc.problems if p.path not in case.paths]
        assert not elsewhere, f"{case} is refused for another rule too: {elsewhere}"
        return [p.line() for p in exc.problems]
    return []


def pack_verdict(case: Case) -> list[str]:
    """What the pack reports on the objects of the changed stack, for this rule."""
    base = PlatformSpec.model_validate(read_stack_config(stack_path(case.stack)), strict=True)
    spec = base
    for path, value in case.changes:
        tokens = _tokens(path)
        if tokens[-1] == "aggregated" and isinstance(value, dict):  # a whole role written anew
            value = type(base.models[0].autoscaling.aggregated).model_validate(value)
        spec = set_spec(spec, tokens, value)
    found = rules.check_resources(case.emit(base, spec))  # the stage comes from the objects' tags
    return [msg for _, rule, msg in found if rule == case.rule]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_validate_and_the_pack_agree(case: Case) -> None:
    refused, flagged = validate_verdict(case), pack_verdict(case)
    assert bool(refused) == bool(flagged), f"validate: {refused or 'accepts'}; pack: {flagged or 'accepts'}"


def test_every_rule_is_seen_refused_and_accepted() -> None:
    """The cases reach both sides of every rule (an agreement on 'accepted' alone would prove nothing)."""
    seen: dict[str, set[bool]] = {}
    for case in CASES:
        seen.setdefault(case.rule, set()).add(bool(pack_verdict(case)))
    assert seen == {rule: {True, False} for rule in
                    ("gpu-nodepool-consolidation", "autoscaler-metric", "hpa-min-replicas", "critical-warm-minimum",
                     "prod-ami-pinned")}


def test_dev_with_30m_is_refused_by_the_rule_the_pack_applies() -> None:
    """Issue 21: dev's GPU pool with ``consolidate_after: 30m`` was accepted by validate and refused by the pack."""
    case = next(c for c in CASES if c.stack == "dev" and c.changes == ((f"{POOL}.consolidate_after", "30m"),))
    [refused] = validate_verdict(case)
    [flagged] = pack_verdict(case)
    assert refused.startswith(f"gpuscale:{POOL}.consolidate_after: GPU pool l40s-spot: consolidate_after 30m is "
                              "shorter than 1h")
    assert flagged.startswith("GPU pool l40s-spot: consolidateAfter 30m is shorter than 1h")


def test_the_builders_emit_what_synth_emits(stack_synths: dict[str, SynthResult],
                                            stack_specs: dict[str, PlatformSpec]) -> None:
    """The objects the cases hand the pack are the synth's: same disruption, annotations, AMI terms, tags, triggers."""
    spec = stack_specs["dev"]
    recorded = {r["type"]: r["inputs"] for r in stack_synths["dev"].resources
                if r["type"] in (rules.NODEPOOL, rules.EC2NODECLASS, rules.SCALEDOBJECT)}
    [(_, pool)] = nodepools(spec, spec)
    [(_, nodeclass)] = nodeclasses(spec, spec)
    [(_, scaler)] = autoscalers(spec)
    assert recorded[rules.NODEPOOL]["spec"]["disruption"] == pool["spec"]["disruption"]
    assert recorded[rules.NODEPOOL]["metadata"]["annotations"] == pool["metadata"]["annotations"]
    assert recorded[rules.EC2NODECLASS]["spec"]["amiSelectorTerms"] == nodeclass["spec"]["amiSelectorTerms"]
    assert recorded[rules.EC2NODECLASS]["spec"]["tags"] == nodeclass["spec"]["tags"]  # the stage tag included
    assert recorded[rules.SCALEDOBJECT]["spec"]["triggers"] == scaler["spec"]["triggers"]
    assert recorded[rules.SCALEDOBJECT]["metadata"]["labels"] == scaler["metadata"]["labels"]  # the criticality label
    # and the pack finds nothing in the whole synth of every shipped stack
    for name, result in stack_synths.items():
        rows = [(r["type"], r["inputs"]) for r in result.resources]
        assert rules.check_resources(rows) == [], name
