"""Placeholder pods (``headroom.mode: placeholder-pods``): a PriorityClass below every KAI class and, per paying role, a
Deployment of preemptible pods of one serving pod's size in the model's own queue, selected by nothing that selects the
serving pods; the serving pods of that model carry preemption delay 0 and the placeholders a year."""

from __future__ import annotations

from typing import Any

from gpuscale import headroom, labels
from gpuscale.manifests import kai, placeholder, vllm
from gpuscale.manifests.vllm import ServingSettings
from gpuscale.schedule.chart import PRIORITY_CLASSES
from gpuscale.sizing import size_platform
from gpuscale.spec.platform import PlatformSpec
from tests.conftest import requires_shared
from tests.k8s_schema import assert_valid
from tests.manifests.test_capacity_buffer import paying
from tests.specs import pd_raw


def with_placeholders(raw: dict[str, Any] | None = None) -> dict[str, Any]:
    raw = raw or pd_raw()
    raw["models"][0]["headroom"] = {"mode": "placeholder-pods"}
    return raw


def settings(raw: dict[str, Any]) -> ServingSettings:
    spec = PlatformSpec.model_validate(raw)
    return ServingSettings.from_platform(spec, size_platform(spec), spec.models[0].name)


def test_the_deployment_holds_n_pods_of_one_serving_pods_size_in_the_models_queue() -> None:
    s = settings(with_placeholders())
    body = placeholder.deployment_body(s, "decode", paying("placeholder-pods", replicas=3))
    serving = vllm.pod_template(s, "decode")
    assert body["metadata"]["name"] == "m70b-decode-placeholder" and body["metadata"]["namespace"] == s.namespace
    assert body["spec"]["replicas"] == 3
    pod = body["spec"]["template"]
    [box] = pod["spec"]["containers"]
    [vllm_box] = serving["spec"]["containers"]
    assert box["resources"] == vllm_box["resources"]  # the same GPUs, CPU and memory: Karpenter launches the same node
    assert box["image"] == s.image and box["command"] == ["sleep", "infinity"]  # pulls the serving image on the node
    assert pod["spec"]["nodeSelector"] == serving["spec"]["nodeSelector"]
    assert pod["spec"]["tolerations"] == serving["spec"]["tolerations"]
    assert pod["spec"]["schedulerName"] == labels.KAI_SCHEDULER_NAME
    assert pod["spec"]["terminationGracePeriodSeconds"] == 0
    wiring = s.wiring["decode"]
    for meta in (body["metadata"], pod["metadata"]):
        assert meta["labels"][labels.KAI_QUEUE_LABEL] == wiring.queue  # the serving pods' own leaf queue
        assert meta["labels"][labels.KAI_PREEMPTIBILITY_LABEL] == "preemptible"  # outside the non-preemptible quota
        assert meta["annotations"] == {labels.KAI_PREEMPTION_DELAY_ANNOTATION: headroom.PLACEHOLDER_PREEMPTION_DELAY}


def test_nothing_that_selects_serving_pods_selects_a_placeholder() -> None:
    s = settings(with_placeholders())
    for role in ("prefill", "decode"):
        pod_labels = placeholder.deployment_body(s, role, paying("placeholder-pods"))["spec"]["template"]["metadata"]["labels"]
        for r in ("prefill", "decode"):
            selector = vllm.serving_selector(s, r)
            assert not all(pod_labels.get(k) == v for k, v in selector.items())
        assert labels.MODEL_LABEL not in pod_labels and labels.ROLE_LABEL not in pod_labels


def test_the_priority_class_is_below_every_kai_class_and_preempts_nothing() -> None:
    s = settings(with_placeholders())
    pc = placeholder.priority_class_body(s)
    assert pc["value"] == headroom.PLACEHOLDER_PRIORITY < min(PRIORITY_CLASSES.values())
    assert pc["preemptionPolicy"] == "Never" and pc["globalDefault"] is False
    body = placeholder.deployment_body(s, "prefill", paying("placeholder-pods"))
    assert body["spec"]["template"]["spec"]["priorityClassName"] == pc["metadata"]["name"]


def test_serving_pods_of_a_model_with_placeholders_carry_no_preemption_delay() -> None:
    spec = PlatformSpec.model_validate(with_placeholders())
    plain = PlatformSpec.model_validate(pd_raw())
    node_time = size_platform(plain).models[0].preemption_delay_s
    assert node_time > 0
    for role in ("prefill", "decode"):
        held = vllm.kai_role_wiring(spec, spec.models[0], size_platform(spec).models[0].shape)[role]
        kept = vllm.kai_role_wiring(plain, plain.models[0], size_platform(plain).models[0].shape)[role]
        assert (held.preemption_delay_s, kept.preemption_delay_s) == (0, node_time)
        assert held.workload_annotations[labels.KAI_PREEMPTION_DELAY_ANNOTATION] == "0s"
        pg = kai.expected_podgroup(spec, spec.models[0], role, size_platform(spec).models[0].shape)
        assert pg["spec"]["preemptionDelay"] == "0s"


def test_only_paying_placeholder_roles_are_emitted() -> None:
    s = settings(with_placeholders())
    assert placeholder.placeholder_bodies(s) == []  # pd_raw's workload has no burst a spare node answers
    pays = s.sizing.model_copy(update={"roles": [
        r.model_copy(update={"headroom": paying("placeholder-pods") if r.role == "decode" else None})
        for r in s.sizing.roles]})
    pc, deployment = placeholder.placeholder_bodies(s.model_copy(update={"sizing": pays}))
    assert pc["kind"] == "PriorityClass" and deployment["metadata"]["name"] == "m70b-decode-placeholder"
    buffer = s.sizing.model_copy(update={"roles": [r.model_copy(update={"headroom": paying()}) for r in s.sizing.roles]})
    assert placeholder.placeholder_bodies(s.model_copy(update={"sizing": buffer})) == []  # a CapacityBuffer instead


@requires_shared
def test_bodies_are_valid() -> None:
    s = settings(with_placeholders())
    assert_valid(placeholder.priority_class_body(s), placeholder.deployment_body(s, "decode", paying("placeholder-pods")))
