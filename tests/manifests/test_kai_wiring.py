"""KAI workload wiring: leaf queue, priority, preemptibility, gang size and topology placement per role."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest

from gpuscale import labels, sizing
from gpuscale.manifests.kai_wiring import (
    PD_NETWORK_AFFINITY_WEIGHT,
    PD_ZONE_AFFINITY_WEIGHT,
    TOPOLOGY_NAME,
    KaiPodWiring,
    kai_pod_wiring,
)
from gpuscale.spec.model import ModelDeployment
from gpuscale.spec.platform import PlatformSpec
from gpuscale.stackfile import read_stack_config, validate_config
from tests.conftest import requires_shared, stack_path
from tests.k8s_schema import assert_valid

LAYER3 = "topology.k8s.aws/network-node-layer-3"


def gang_raw() -> dict[str, Any]:
    """Prod, with the search model replaced by Llama-70B BF16 TP4 x PP2 on 4-GPU g6e.12xlarge: 8 GPUs over 2 nodes."""
    raw = read_stack_config(stack_path("prod"))
    raw["topology"]["gpu_pools"][1]["instance_types"] = ["g6e.12xlarge"]
    model = copy.deepcopy(raw["models"][1])
    model.update(
        name="llama-70b-bf16",
        architecture=dict(raw["models"][0]["architecture"], weight_precision="bf16"),
        parallelism={"tensor_parallel_size": 4, "pipeline_parallel_size": 2, "allow_tensor_parallel_over_pcie": True},
        # one 8-GPU replica is what search's 12-GPU quota holds: a peak it can carry (0.04 was, until sizing counted a
        # lone prompt's pipeline fill, as the engine steps it; it now reads about 0.034)
        workload=dict(model["workload"], base_rps=0.02, peak_rps=0.03),
    )
    raw["models"][1] = model
    return raw


def gang_spec() -> PlatformSpec:
    return validate_config(gang_raw(), "gang")


def wiring(spec: PlatformSpec, model: ModelDeployment, role: str) -> KaiPodWiring:
    shape = sizing.replica_shape(model, spec.topology.pool(model.node_pool))
    return kai_pod_wiring(spec, model, role, shape)  # type: ignore[arg-type]


def delay(spec: PlatformSpec, model: ModelDeployment) -> dict[str, str]:
    """The preemption-delay annotation every workload of ``model`` carries beside its topology annotations."""
    return {labels.KAI_PREEMPTION_DELAY_ANNOTATION: f"{sizing.size_platform(spec).model(model.name).preemption_delay_s}s"}


def test_prod_decode_is_routed_to_kai_in_its_leaf_queue(prod_spec: PlatformSpec) -> None:
    w = wiring(prod_spec, prod_spec.models[0], "decode")
    assert w.scheduler_name == "kai-scheduler"
    assert w.queue == "chat" and "chat" in prod_spec.leaf_queue_names()
    assert w.priority_class_name == "inference" and w.preemptibility == "non-preemptible"
    assert w.workload_labels == {labels.KAI_QUEUE_LABEL: "chat", labels.KAI_PREEMPTIBILITY_LABEL: "non-preemptible"}
    assert w.pod_labels == {
        labels.KAI_QUEUE_LABEL: "chat", labels.KAI_PREEMPTIBILITY_LABEL: "non-preemptible",
        labels.MODEL_LABEL: "llama-70b-fp8", labels.ROLE_LABEL: "decode",
    }


def test_single_node_replica_is_not_split_and_stays_on_one_node(prod_spec: PlatformSpec) -> None:
    # TP4 on an 8-GPU p5: one pod, one node, one NVLink domain
    w = wiring(prod_spec, prod_spec.models[0], "prefill")
    assert w.gang_min_member == 1 and w.lws_startup_policy is None
    assert w.topology_required_level == labels.HOSTNAME_LABEL and w.topology_preferred_level is None
    expected = {labels.KAI_TOPOLOGY_ANNOTATION: TOPOLOGY_NAME, labels.KAI_TOPOLOGY_REQUIRED_ANNOTATION: labels.HOSTNAME_LABEL,
                **delay(prod_spec, prod_spec.models[0])}
    # the podgrouper reads the PodGroup's topology from the owner (Deployment), the pod carries a mirror
    assert w.workload_annotations == expected and w.pod_annotations == expected


def test_prefill_and_decode_prefer_each_other_close(prod_spec: PlatformSpec) -> None:
    for role, other in (("prefill", "decode"), ("decode", "prefill")):
        w = wiring(prod_spec, prod_spec.models[0], role)
        assert w.affinity is not None
        aff = w.affinity["podAffinity"]
        assert "requiredDuringSchedulingIgnoredDuringExecution" not in aff  # a single-pod replica has no gang to pin
        terms = aff["preferredDuringSchedulingIgnoredDuringExecution"]
        assert [(t["weight"], t["podAffinityTerm"]["topologyKey"]) for t in terms] == [
            (PD_NETWORK_AFFINITY_WEIGHT, LAYER3), (PD_ZONE_AFFINITY_WEIGHT, labels.ZONE_LABEL),
        ]
        for t in terms:
            assert t["podAffinityTerm"]["labelSelector"]["matchLabels"] == {
                labels.MODEL_LABEL: "llama-70b-fp8", labels.ROLE_LABEL: other,
            }


def test_aggregated_single_node_model_has_no_affinity(prod_spec: PlatformSpec) -> None:
    w = wiring(prod_spec, prod_spec.models[1], "aggregated")
    assert w.queue == "search" and w.affinity is None and w.gang_min_member == 1


def test_model_in_preemptible_queue_gets_train_priority(raw_stack) -> None:  # type: ignore[no-untyped-def]
    raw = raw_stack("prod")
    raw["models"][1]["queue"] = "training"
    raw["models"][1]["node_pool"] = "l40s"
    spec = validate_config(raw, "test")
    w = wiring(spec, spec.models[1], "aggregated")
    assert w.priority_class_name == "train" and w.preemptibility == "preemptible"
    assert w.workload_labels[labels.KAI_PREEMPTIBILITY_LABEL] == "preemptible"


def test_eight_gpu_replica_over_two_nodes_is_one_gang() -> None:
    spec = gang_spec()
    model = spec.models[1]
    shape = sizing.replica_shape(model, spec.topology.pool(model.node_pool))
    assert (shape.gpus, shape.nodes, shape.pods, shape.gpus_per_pod) == (8, 2, 2, 4)
    w = kai_pod_wiring(spec, model, "aggregated", shape)
    assert w.gang_min_member == shape.pods == 2
    # LeaderReady would hand the leader to KAI alone (minMember 1): the partial placement a gang prevents
    assert w.lws_startup_policy == "LeaderCreated"


def test_multi_node_replica_is_zone_bound_and_prefers_one_rack() -> None:
    spec = gang_spec()
    w = wiring(spec, spec.models[1], "aggregated")
    assert w.topology_required_level == labels.ZONE_LABEL  # pipeline traffic (EFA/NCCL) never crosses zones
    assert w.topology_preferred_level == LAYER3  # network labels are absent on some types: preferred only
    assert w.workload_annotations == {
        labels.KAI_TOPOLOGY_ANNOTATION: TOPOLOGY_NAME,
        labels.KAI_TOPOLOGY_REQUIRED_ANNOTATION: labels.ZONE_LABEL,
        labels.KAI_TOPOLOGY_PREFERRED_ANNOTATION: LAYER3,
        **delay(spec, spec.models[1]),
    }
    assert w.affinity is not None
    (term,) = w.affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    # Karpenter then launches every node of one pending gang in one zone; the key scopes it to one LWS group
    assert term["topologyKey"] == labels.ZONE_LABEL
    assert term["matchLabelKeys"] == [labels.LWS_GROUP_KEY_LABEL]
    assert term["labelSelector"]["matchLabels"] == {labels.MODEL_LABEL: "llama-70b-bf16", labels.ROLE_LABEL: "aggregated"}
    assert "preferredDuringSchedulingIgnoredDuringExecution" not in w.affinity["podAffinity"]


@pytest.mark.parametrize("name", ["dev", "staging", "prod", "gang"])
def test_every_replica_wider_than_a_node_is_gang_scheduled(stack_specs: dict[str, PlatformSpec], name: str) -> None:
    spec = gang_spec() if name == "gang" else stack_specs[name]
    for model in spec.models:
        shape = sizing.replica_shape(model, spec.topology.pool(model.node_pool))
        for role in model.serving.roles:
            w = kai_pod_wiring(spec, model, role, shape)
            assert w.gang_min_member == shape.pods
            assert (w.lws_startup_policy == "LeaderCreated") == (shape.nodes > 1)
            assert w.scheduler_name == labels.KAI_SCHEDULER_NAME
            assert w.queue in spec.leaf_queue_names()


def test_placement_only_names_levels_of_the_topology(raw_stack) -> None:  # type: ignore[no-untyped-def]
    raw = gang_raw()
    raw["topology"]["levels"] = [{"node_label": labels.ZONE_LABEL, "alias": "zone"}]
    spec = validate_config(raw, "test")
    multi = wiring(spec, spec.models[1], "aggregated")
    assert (multi.topology_required_level, multi.topology_preferred_level) == (labels.ZONE_LABEL, None)
    single = wiring(spec, spec.models[0], "prefill")
    # no hostname level: no KAI topology constraint at all (a missing level would leave the PodGroup unschedulable)
    assert single.workload_annotations == delay(spec, spec.models[0]) and single.topology_required_level is None
    # without a network level, prefill/decode proximity falls back to the zone alone
    assert single.affinity is not None
    terms = single.affinity["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert [t["podAffinityTerm"]["topologyKey"] for t in terms] == [labels.ZONE_LABEL]


def _pod(w: KaiPodWiring, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "inference", "labels": w.pod_labels, "annotations": w.pod_annotations},
        "spec": {
            "schedulerName": w.scheduler_name,
            "priorityClassName": w.priority_class_name,
            "affinity": w.affinity or {},
            "containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.33.0"}],
        },
    }


@requires_shared
def test_wiring_lands_in_valid_pod_and_leaderworkerset_fields(prod_spec: PlatformSpec) -> None:
    spec = gang_spec()
    gang = wiring(spec, spec.models[1], "aggregated")
    pods = [_pod(gang, "gang")]
    pods += [_pod(wiring(prod_spec, prod_spec.models[0], role), f"pd-{role}") for role in ("prefill", "decode")]
    template = {
        "metadata": {"labels": gang.pod_labels, "annotations": gang.pod_annotations},
        "spec": pods[0]["spec"],
    }
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": "llama-70b-bf16", "namespace": "inference",
                     "labels": gang.workload_labels, "annotations": gang.workload_annotations},
        "spec": {
            "startupPolicy": gang.lws_startup_policy,
            "leaderWorkerTemplate": {"size": gang.gang_min_member, "leaderTemplate": template, "workerTemplate": template},
        },
    }
    assert_valid(*pods, lws)


def test_every_workload_waits_the_sized_node_time_before_it_may_evict(prod_spec: PlatformSpec) -> None:
    plat = sizing.size_platform(prod_spec)
    for model in prod_spec.models:
        ms = plat.model(model.name)
        cold = ms.cold_start
        # the pending time ends at the bind: node Ready plus the GPUs registered, not the image or the weights
        assert ms.preemption_delay_s == math.ceil(cold.node_s + cold.gpu_ready_s)
        assert cold.image_pull_s > 0 and ms.preemption_delay_s < cold.node_s + cold.gpu_ready_s + cold.image_pull_s
        for role in model.serving.roles:
            w = wiring(prod_spec, model, role)
            value = f"{ms.preemption_delay_s}s"  # a Go duration (KAI ParsePreemptionDelay: time.ParseDuration)
            assert w.workload_annotations[labels.KAI_PREEMPTION_DELAY_ANNOTATION] == value
            assert w.pod_annotations[labels.KAI_PREEMPTION_DELAY_ANNOTATION] == value
            assert w.preemption_delay_s == ms.preemption_delay_s


def test_the_preemption_delay_follows_the_provisioning_latency(prod_spec: PlatformSpec) -> None:
    raw = read_stack_config(stack_path("prod"))
    raw["topology"]["provisioning"] = {"node_ready_s": [30.0, 300.0], "gpu_ready_s": 42.5}
    slow = validate_config(raw, "slow")
    model = slow.models[1]
    cold = sizing.size_platform(slow).model(model.name).cold_start
    assert (cold.node_s, cold.gpu_ready_s) == (300.0, 42.5)
    w = wiring(slow, model, model.serving.roles[0])
    assert w.workload_annotations[labels.KAI_PREEMPTION_DELAY_ANNOTATION] == "343s"  # ceil(300 + 42.5)
