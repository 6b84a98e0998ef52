"""InferencePlatform: the three stacks compose end to end under mocks, with charts before the CRs that need them."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from gpuscale.problems import Problems
from gpuscale.program import deploy
from gpuscale.spec.platform import PlatformSpec
from gpuscale.stackfile import validate_config
from gpuscale.synth.mocks import RecordedResource, run_program
from tests.conftest import STACKS


def build(spec: PlatformSpec) -> list[RecordedResource]:
    return run_program(lambda: deploy(spec), region=spec.environment.aws_region, stack=spec.environment.name)


@pytest.fixture(scope="module")
def prod_records(stack_specs: dict[str, PlatformSpec]) -> list[RecordedResource]:
    return build(stack_specs["prod"])


def by_type(records: list[RecordedResource], typ: str) -> list[RecordedResource]:
    return [r for r in records if r.type == typ]


def urn_of(records: list[RecordedResource], typ: str, predicate: Any = lambda r: True) -> list[str]:
    return [r.urn for r in records if r.type == typ and predicate(r)]


@pytest.mark.parametrize("stack", STACKS)
def test_each_stack_builds(stack_specs: dict[str, PlatformSpec], stack: str) -> None:
    records = build(stack_specs[stack])
    types = Counter(r.type for r in records)
    spec = stack_specs[stack]
    assert types["gpuscale:index:InferencePlatform"] == 1
    assert types["kubernetes:karpenter.sh/v1:NodePool"] == len(spec.topology.gpu_pools) + 1  # + the CPU pool
    assert types["kubernetes:scheduling.run.ai/v2:Queue"] == len(spec.queues())
    roles = sum(len(m.serving.roles) for m in spec.models)
    assert types["gpuscale:index:RoleAutoscaler"] == roles
    assert types["gpuscale:index:VllmService"] == len(spec.models)


def test_every_child_is_parented_under_the_platform(prod_records: list[RecordedResource]) -> None:
    (platform,) = by_type(prod_records, "gpuscale:index:InferencePlatform")
    parent_of = {r.urn: r.parent_urn for r in prod_records}

    def ancestors(urn: str) -> list[str]:
        chain = []
        while (urn := parent_of.get(urn, "")) in parent_of:
            chain.append(urn)
        return chain

    orphans = [r.name for r in prod_records if r is not platform and platform.urn not in ancestors(r.urn)]
    assert orphans == []


def test_custom_resources_wait_for_the_charts_that_install_their_crds(prod_records: list[RecordedResource]) -> None:
    charts = {r.name: r.urn for r in by_type(prod_records, "kubernetes:helm.sh/v4:Chart")}
    karpenter = charts["gpuscale-karpenter-chart"]
    kai = charts["gpuscale-kai-chart"]
    keda = charts["gpuscale-keda-chart"]
    prometheus = charts["gpuscale-prometheus-chart"]

    def parents_deps(r: RecordedResource) -> set[str]:
        # depends_on given to a component applies to its children through the parent chain
        deps = set(r.dependencies)
        parent = r.parent_urn
        while parent:
            owner = next((x for x in prod_records if x.urn == parent), None)
            if owner is None:
                break
            deps |= set(owner.dependencies)
            parent = owner.parent_urn
        return deps

    for r in by_type(prod_records, "kubernetes:karpenter.sh/v1:NodePool"):
        assert karpenter in parents_deps(r), r.name
    for r in by_type(prod_records, "kubernetes:scheduling.run.ai/v2:Queue"):
        assert kai in parents_deps(r), r.name
    for r in by_type(prod_records, "kubernetes:keda.sh/v1alpha1:ScaledObject"):
        assert keda in parents_deps(r), r.name
    for r in by_type(prod_records, "kubernetes:monitoring.coreos.com/v1:PodMonitor"):
        assert prometheus in parents_deps(r), r.name


def test_scaledobjects_target_their_own_role(prod_records: list[RecordedResource]) -> None:
    targets = Counter(r.inputs["spec"]["scaleTargetRef"]["name"] for r in by_type(prod_records, "kubernetes:keda.sh/v1alpha1:ScaledObject"))
    assert targets and all(n == 1 for n in targets.values())  # one autoscaler per workload
    assert {"llama-70b-fp8-prefill", "llama-70b-fp8-decode"} <= set(targets)


def test_aws_resources_use_the_region_of_the_spec(prod_records: list[RecordedResource]) -> None:
    (provider,) = [r for r in prod_records if r.type == "pulumi:providers:aws"]
    assert provider.inputs["region"] == "us-east-1"
    assert json.loads(provider.inputs["defaultTags"])["tags"]["gpuscale.io/environment"] == "prod"


def test_cross_layer_refusal_names_the_numbers_and_the_path(raw_stack) -> None:  # type: ignore[no-untyped-def]
    raw = raw_stack("prod")
    raw["models"][0]["autoscaling"]["decode"]["max_replicas"] = 20
    spec = PlatformSpec.model_validate(raw)  # each section alone is fine ...
    with pytest.raises(Problems) as info:
        build(spec)  # ... but the serving layer asks for more than the queue and the pool can give
    at = "gpuscale:models[0].autoscaling.decode.max_replicas: "
    problems = info.value.lines()
    # summed over both roles that share chat's quota and the h100 pool, naming each bound
    assert any(p.startswith(at + "max_replicas llama-70b-fp8/prefill 2 x 4 + llama-70b-fp8/decode 20 x 4 = 88 GPUs "
                            "exceed queue chat gpu_quota 40") for p in problems)
    assert any(p.startswith(at) and "= 88 GPUs exceed node pool h100 gpu_limit 64; Karpenter stops launching" in p
               for p in problems)
    with pytest.raises(Problems) as loaded:  # the stack-file loader (CLI and pulumi up alike) refuses the same
        validate_config(raw, "t")
    assert loaded.value.lines() == problems
