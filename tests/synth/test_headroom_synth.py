"""A stack with headroom synthesizes a CapacityBuffer per role whose spare nodes pay, valid against the CRD Karpenter
v1.14.1 installs, pointing at the role's own workload, with the chart's feature gate on; without headroom nothing."""

from __future__ import annotations

from functools import cache
from typing import Any

from gpuscale.sizing import size_platform
from gpuscale.spec.platform import PlatformSpec
from gpuscale.stackfile import load_stack_file
from gpuscale.synth.render import SynthResult, synth_spec
from tests.conftest import requires_shared, stack_path
from tests.k8s_schema import validate_object


def prod_with_headroom() -> PlatformSpec:
    """Prod with 10-minute bursts (longer than a replica's load on a spare node) and a CapacityBuffer for its 70B."""
    raw = load_stack_file(stack_path("prod")).model_dump(mode="json", exclude_unset=True)
    llama = raw["models"][0]
    llama["workload"]["burst"] = {"multiplier": 2.0, "duration_s": 600, "per_hour": 2}
    llama["headroom"] = {"mode": "capacity-buffer"}
    raw["topology"].setdefault("provisioning", {})["capacity_buffer_gate"] = True
    return PlatformSpec.model_validate(raw)


@cache
def synth() -> tuple[PlatformSpec, SynthResult]:
    spec = prod_with_headroom()
    return spec, synth_spec(spec, stack="prod")


def of_kind(result: SynthResult, kind: str) -> list[dict[str, Any]]:
    return [o for _, o in result.kubernetes_objects() if o["kind"] == kind]


def test_one_buffer_per_paying_role_naming_its_deployment_with_the_sized_pods() -> None:
    spec, result = synth()
    ms = size_platform(spec).models[0]
    want = {f"{ms.model}-{r.role}-headroom": r.headroom.pods for r in ms.roles if r.headroom and r.headroom.emitted}
    assert want  # the sizing says they pay on this stack
    buffers = {b["metadata"]["name"]: b for b in of_kind(result, "CapacityBuffer")}
    assert {n: b["spec"]["replicas"] for n, b in buffers.items()} == want
    deployments = {(d["metadata"]["namespace"], d["metadata"]["name"]) for d in of_kind(result, "Deployment")}
    for b in buffers.values():
        ref = b["spec"]["scalableRef"]
        assert ref["apiGroup"] == "apps" and ref["kind"] == "Deployment"
        assert (b["metadata"]["namespace"], ref["name"]) in deployments
        assert b["apiVersion"] == "autoscaling.x-k8s.io/v1beta1"
        assert b["spec"]["provisioningStrategy"] == "buffer.x-k8s.io/active-capacity"


@requires_shared
def test_buffers_are_valid_against_the_pinned_crd() -> None:
    _, result = synth()
    buffers = of_kind(result, "CapacityBuffer")
    assert buffers
    assert {b["metadata"]["name"]: validate_object(b) for b in buffers} == {b["metadata"]["name"]: [] for b in buffers}


def test_the_karpenter_chart_turns_the_gate_on_only_when_asked(stack_synths: dict[str, SynthResult]) -> None:
    def gates(result: SynthResult) -> object:
        [chart] = [c for c in result.charts() if c["release"] == "karpenter"]
        return chart["values"]["settings"].get("featureGates")

    assert gates(synth()[1]) == {"capacityBuffer": True}
    assert gates(stack_synths["prod"]) is None  # the chart's default (off) stands
    assert not of_kind(stack_synths["prod"], "CapacityBuffer")


def prod_with_placeholders() -> PlatformSpec:
    """The same bursty prod without the gate: its 70B keeps placeholder pods instead."""
    raw = prod_with_headroom().model_dump(mode="json", exclude_unset=True)
    raw["models"][0]["headroom"] = {"mode": "placeholder-pods"}
    raw["topology"]["provisioning"]["capacity_buffer_gate"] = False
    # room in chat's limit for the serving pods at max_replicas and every placeholder: else KAI could refuse a
    # placeholder while Karpenter launches it an empty node, which validate refuses (tests/test_placeholder_limits.py)
    raw["teams"][0]["children"][0]["gpu_limit"] = 64
    raw["teams"][0]["gpu_limit"] = 80  # and in inference's, which the search 8B's serving pods at max share
    return PlatformSpec.model_validate(raw)


@cache
def synth_placeholders() -> tuple[PlatformSpec, SynthResult]:
    spec = prod_with_placeholders()
    return spec, synth_spec(spec, stack="prod")


def test_placeholders_are_emitted_per_paying_role_in_the_models_queue_and_the_serving_pods_drop_the_delay() -> None:
    spec, result = synth_placeholders()
    ms = size_platform(spec).models[0]
    want = {f"{ms.model}-{r.role}-placeholder": r.headroom.pods for r in ms.roles if r.headroom and r.headroom.emitted}
    assert want  # they pay here (a placeholder pulled the image: the load is weights and engine only)
    deployments = {d["metadata"]["name"]: d for d in of_kind(result, "Deployment")}
    assert {n: deployments[n]["spec"]["replicas"] for n in want} == want
    [pc] = [p for p in of_kind(result, "PriorityClass") if p["metadata"]["name"].startswith("gpuscale-placeholder-")]
    queue = spec.queue_chain(spec.models[0].queue)[-1].name
    for name in want:
        pod = deployments[name]["spec"]["template"]
        assert pod["spec"]["priorityClassName"] == pc["metadata"]["name"]
        assert pod["metadata"]["labels"]["kai.scheduler/queue"] == queue
        serving = deployments[name.removesuffix("-placeholder")]
        assert serving["metadata"]["annotations"]["kai.scheduler/preemption-delay"] == "0s"
        assert serving["spec"]["template"]["metadata"]["annotations"]["kai.scheduler/preemption-delay"] == "0s"
    assert not of_kind(result, "CapacityBuffer")
    # the other model keeps the node-time delay
    other = deployments[f"{spec.models[1].name}-aggregated"]
    assert other["metadata"]["annotations"]["kai.scheduler/preemption-delay"] == f"{size_platform(spec).models[1].preemption_delay_s}s"


@requires_shared
def test_placeholders_are_valid_kubernetes_objects() -> None:
    _, result = synth_placeholders()
    objs = [o for o in of_kind(result, "Deployment") + of_kind(result, "PriorityClass")
            if "placeholder" in o["metadata"]["name"]]
    assert len(objs) >= 2
    assert {o["metadata"]["name"]: validate_object(o) for o in objs} == {o["metadata"]["name"]: [] for o in objs}


@requires_shared
def test_placeholder_objects_are_valid_against_the_pinned_schemas() -> None:
    _, result = synth_placeholders()
    objs = [o for _, o in result.kubernetes_objects()
            if (o["kind"] == "PriorityClass" and o["metadata"]["name"].startswith("gpuscale-placeholder-"))
            or (o["kind"] == "Deployment" and o["metadata"]["name"].endswith("-placeholder"))]
    assert {o["kind"] for o in objs} == {"PriorityClass", "Deployment"}
    assert {o["metadata"]["name"]: validate_object(o) for o in objs} == {o["metadata"]["name"]: [] for o in objs}
