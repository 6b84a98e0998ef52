"""The shipped stacks under the shipped program: each composes, and the cluster it creates is the one the CLI names."""

from __future__ import annotations

from collections import Counter

import pytest

from gpuscale.program import deploy
from gpuscale.spec.platform import PlatformSpec
from gpuscale.synth.mocks import run_program
from tests.conftest import STACKS


@pytest.mark.parametrize("stack", STACKS)
def test_each_stack_composes(stack_specs: dict[str, PlatformSpec], stack: str) -> None:
    spec = stack_specs[stack]
    records = run_program(lambda: deploy(spec), region=spec.environment.aws_region, stack=stack)
    types = Counter(r.type for r in records)
    assert types["kubernetes:karpenter.sh/v1:NodePool"] == len(spec.topology.gpu_pools) + 1  # + the CPU pool
    assert types["kubernetes:scheduling.run.ai/v2:Queue"] == len(spec.queues())
    assert types["gpuscale:index:VllmService"] == len(spec.models)
    assert types["gpuscale:index:RoleAutoscaler"] == sum(len(m.serving.roles) for m in spec.models)
    (cluster,) = [r for r in records if r.type == "aws:eks/cluster:Cluster"]
    # `gpuscale validate` and the plan print environment.cluster_name; the program creates exactly that cluster
    assert cluster.inputs["name"] == spec.environment.cluster_name
