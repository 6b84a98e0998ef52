"""``ModelOnCluster`` and spare nodes: ``capacity_buffer_gate`` (a typed arg: components read no config) lets a model's
``headroom.mode: capacity-buffer`` emit its CapacityBuffer; without it the mode is refused at the arg's path;
``placeholder-pods`` needs no gate and emits the placeholders in the team's queue."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpuscale.components import ModelOnCluster, ModelOnClusterArgs, Refused
from gpuscale.manifests import capacity_buffer
from tests.components.support import k8s_object, of_type, run
from tests.components.test_user_programs import POOL, SHORT_MODEL, TEAM


def bursty(mode: str) -> dict[str, Any]:
    """The shipped short-form model with 10-minute bursts (longer than a replica's load on a spare node)."""
    m = copy.deepcopy(SHORT_MODEL)
    m["workload"]["burst"] = {"multiplier": 2.0, "duration_s": 600, "per_hour": 2}
    m["headroom"] = {"mode": mode}
    return m


def args(mode: str, **extra: Any) -> ModelOnClusterArgs:
    return ModelOnClusterArgs(model=bursty(mode), pool=POOL, team=TEAM, aws_region="eu-west-1",
                              prometheus_url="http://prometheus.monitoring.svc:9090", namespace="team-b-llm", **extra)


def test_the_gate_arg_emits_the_sized_capacity_buffer() -> None:
    a = args("capacity-buffer", capacity_buffer_gate=True)
    [role] = a.sizing(a.platform_spec()).models[0].roles
    assert role.headroom is not None and role.headroom.emitted and role.headroom.pods >= 1
    records = run(lambda: ModelOnCluster("llama-8b", a))
    [buffer] = [r for r in of_type(records, "kubernetes:autoscaling.x-k8s.io/v1beta1:CapacityBuffer")]
    body = k8s_object(buffer)
    assert body["metadata"]["name"] == capacity_buffer.buffer_name("llama-8b", "aggregated")
    assert body["metadata"]["namespace"] == "team-b-llm"
    assert body["spec"]["replicas"] == role.headroom.pods
    assert body["spec"]["scalableRef"]["name"] == "llama-8b-aggregated"
    assert not [r for r in records if r.type == "kubernetes:scheduling.k8s.io/v1:PriorityClass"]


def test_without_the_gate_a_capacity_buffer_is_refused_at_the_models_headroom() -> None:
    with pytest.raises(Refused, match=r"ModelOnClusterArgs\.model\.headroom\.mode: .*capacity_buffer_gate"):
        ModelOnCluster("llama-8b", args("capacity-buffer"))


def test_no_headroom_emits_no_buffer_even_with_the_gate() -> None:
    records = run(lambda: ModelOnCluster("llama-8b", args("none", capacity_buffer_gate=True)))
    assert not of_type(records, "kubernetes:autoscaling.x-k8s.io/v1beta1:CapacityBuffer")


def test_placeholders_need_no_gate_and_sit_in_the_teams_queue() -> None:
    records = run(lambda: ModelOnCluster("llama-8b", args("placeholder-pods")))
    assert not of_type(records, "kubernetes:autoscaling.x-k8s.io/v1beta1:CapacityBuffer")
    deployments = {r.name: k8s_object(r) for r in of_type(records, "kubernetes:apps/v1:Deployment")}
    holder = deployments["llama-8b-placeholders-aggregated"]
    assert holder["metadata"]["labels"]["kai.scheduler/queue"] == TEAM.name
    assert holder["metadata"]["namespace"] == "team-b-llm"
    serving = deployments["llama-8b-aggregated"]
    assert serving["metadata"]["annotations"]["kai.scheduler/preemption-delay"] == "0s"
    [pc] = of_type(records, "kubernetes:scheduling.k8s.io/v1:PriorityClass")
    assert holder["spec"]["template"]["spec"]["priorityClassName"] == pc.inputs["metadata"]["name"]
