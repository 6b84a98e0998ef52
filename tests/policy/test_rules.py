"""Policy rules, called directly with recorded resource inputs (the synth test program) and hand-written props."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpuscale import labels
from gpuscale.policy import gpu_nodepool, rules
from gpuscale.synth.render import synthesize
from tests.synth.programs import Knobs, platform_program


def recorded(knobs: Knobs | None = None) -> dict[str, tuple[str, dict[str, Any]]]:
    """Resource key -> (type, inputs) as the mocks recorded them."""
    result = synthesize(platform_program(knobs or Knobs()), region="us-east-1", stack="test")
    return {r["key"]: (r["type"], r["inputs"]) for r in result.resources}


@pytest.fixture(scope="module")
def compliant() -> dict[str, tuple[str, dict[str, Any]]]:
    return recorded()


NODEPOOL_KEY = "kubernetes:karpenter.sh/v1:NodePool::test-h100-nodepool"
NODECLASS_KEY = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass::test-h100-nodeclass"
LWS_KEY = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet::test-llama-decode"
PREFILL_SO_KEY = "kubernetes:keda.sh/v1alpha1:ScaledObject::test-llama-prefill-scaler"


def test_the_test_program_is_compliant(compliant: dict[str, tuple[str, dict[str, Any]]]) -> None:
    assert rules.check_resources(list(compliant.values()), stage="prod") == []


# --- GPU NodePool consolidation ------------------------------------------------------------------------------


def test_recorded_unsafe_gpu_nodepool_is_refused_twice() -> None:
    rtype, props = recorded(Knobs(consolidation_policy="WhenEmptyOrUnderutilized", consolidate_after="5m"))[NODEPOOL_KEY]
    msgs = rules.gpu_nodepool_consolidation(rtype, props)
    assert len(msgs) == 2
    assert msgs[0].startswith("GPU pool h100: consolidationPolicy WhenEmptyOrUnderutilized lets Karpenter evict")
    assert "consolidateAfter 5m is shorter than 1h" in msgs[1]
    assert labels.ACK_UNSAFE_CONSOLIDATION_ANNOTATION in msgs[0]


def test_acknowledged_gpu_nodepool_is_accepted() -> None:
    rtype, props = recorded(Knobs(consolidation_policy="WhenEmptyOrUnderutilized"))[NODEPOOL_KEY]
    props = copy.deepcopy(props)
    props["metadata"]["annotations"] = {labels.ACK_UNSAFE_CONSOLIDATION_ANNOTATION: "true"}
    assert rules.gpu_nodepool_consolidation(rtype, props) == []


def gpu_pool(disruption: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {"name": "gpu"},
        "spec": {"template": {"spec": {"requirements": [
            {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Gt", "values": ["0"]}]}}, **spec},
    }
    if disruption is not None:
        body["spec"]["disruption"] = disruption
    return body


@pytest.mark.parametrize(
    ("disruption", "expected"),
    [
        (None, 2),  # CRD defaults: WhenEmptyOrUnderutilized after 0s
        ({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "1h"}, 0),
        ({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "90m"}, 0),
        ({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"}, 0),
        ({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "59m59s"}, 1),
        ({"consolidationPolicy": "Balanced", "consolidateAfter": "2h"}, 1),
        ({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "soon"}, 1),
    ],
)
def test_gpu_nodepool_disruption(disruption: dict[str, Any] | None, expected: int) -> None:
    assert len(rules.gpu_nodepool_consolidation(rules.NODEPOOL, gpu_pool(disruption))) == expected


def test_static_and_cpu_pools_are_out_of_scope() -> None:
    assert rules.gpu_nodepool_consolidation(rules.NODEPOOL, gpu_pool(None, replicas=2)) == []
    cpu = {"metadata": {"name": "cpu"}, "spec": {
        "template": {"spec": {"requirements": [
            {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m"]}]}},
        "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "5m"},
    }}
    assert rules.gpu_nodepool_consolidation(rules.NODEPOOL, cpu) == []
    assert rules.gpu_nodepool_consolidation(rules.EC2NODECLASS, gpu_pool(None)) == []


@pytest.mark.parametrize(
    ("template", "limits", "gpu"),
    [
        ({"requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["g6e.xlarge"]}]}, {}, True),
        ({"requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m7g.large"]}]}, {}, False),
        ({"requirements": [{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["p5", "p5e"]}]}, {}, True),
        ({"requirements": [{"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["g"]}]}, {}, True),
        ({"requirements": [{"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "In", "values": ["0"]}]}, {}, False),
        ({"requirements": [{"key": "karpenter.k8s.aws/instance-gpu-name", "operator": "DoesNotExist"}]}, {}, False),
        ({"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}, {}, True),
        ({}, {"nvidia.com/gpu": 16}, True),
        ({}, {"cpu": 100}, True),  # no requirement at all: Karpenter may launch any type, GPU types included
        ({"requirements": [{"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m"]}]},
         {"cpu": 100}, False),
        # each requirement alone admits GPU types, together they admit none (no c-category type has a GPU)
        ({"requirements": [{"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c"]},
                           {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Exists"}]}, {}, False),
        ({"requirements": [{"key": "karpenter.k8s.aws/instance-category", "operator": "NotIn", "values": ["t"]},
                           {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}, {}, True),
        # a GPU family the table does not list is still a GPU family when a requirement names it
        ({"requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["p7.48xlarge"]}]},
         {}, True),
    ],
)
def test_nodepool_selects_gpus(template: dict[str, Any], limits: dict[str, Any], gpu: bool) -> None:
    assert rules.nodepool_selects_gpus({"template": {"spec": template}, "limits": limits}) is gpu


@pytest.mark.parametrize(
    ("key", "operator", "values", "gpu"),
    [
        # the evasion: NotIn ["0"] admits every instance type with GPUs (and, like DoesNotExist, the ones without)
        ("karpenter.k8s.aws/instance-gpu-count", "NotIn", ["0"], True),
        ("karpenter.k8s.aws/instance-gpu-count", "Gt", ["0"], True),
        ("karpenter.k8s.aws/instance-gpu-count", "Gte", ["1"], True),
        ("karpenter.k8s.aws/instance-gpu-count", "Lt", ["2"], True),
        ("karpenter.k8s.aws/instance-gpu-count", "Lt", ["1"], False),
        ("karpenter.k8s.aws/instance-gpu-count", "Lte", ["0"], False),
        ("karpenter.k8s.aws/instance-gpu-count", "In", ["0", "8"], True),
        ("karpenter.k8s.aws/instance-gpu-count", "Exists", [], True),
        ("karpenter.k8s.aws/instance-gpu-count", "DoesNotExist", [], False),
        ("karpenter.k8s.aws/instance-gpu-memory", "Gt", ["40000"], True),
        ("karpenter.k8s.aws/instance-gpu-name", "Exists", [], True),
        ("karpenter.k8s.aws/instance-gpu-name", "NotIn", ["t4"], True),
        ("karpenter.k8s.aws/instance-gpu-manufacturer", "In", ["nvidia"], True),
        ("karpenter.k8s.aws/instance-family", "In", ["m7i", "g6e"], True),  # one GPU family is enough
        ("node.kubernetes.io/instance-type", "In", ["m7i.large", "p5.48xlarge"], True),
        # excluding one type leaves every other GPU type admissible
        ("node.kubernetes.io/instance-type", "NotIn", ["p5.48xlarge"], True),
        ("karpenter.k8s.aws/instance-family", "NotIn", ["p5", "g6e"], True),
        ("karpenter.k8s.aws/instance-category", "NotIn", ["t"], True),  # issue 23 item 14: names no GPU, admits g and p
        ("karpenter.k8s.aws/instance-category", "NotIn", ["g", "p", "gr"], False),
        ("karpenter.k8s.aws/instance-generation", "Gt", ["4"], True),
        ("kubernetes.io/arch", "In", ["arm64"], True),  # g5g, p6e-gb200
        ("karpenter.sh/capacity-type", "In", ["spot"], True),  # a key that restricts no GPU type away
        ("karpenter.k8s.aws/instance-category", "In", ["c", "gr"], True),
        ("karpenter.k8s.aws/instance-category", "In", ["c", "m", "r"], False),
        ("nvidia.com/gpu.present", "In", ["true"], True),
    ],
)
def test_every_operator_form_that_admits_gpus_is_a_gpu_pool(key: str, operator: str, values: list[str], gpu: bool) -> None:
    assert gpu_nodepool.requirement_admits_gpus(key, operator, values) is gpu
    body = gpu_pool({"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "30s"})
    body["spec"]["template"]["spec"]["requirements"] = [{"key": key, "operator": operator, "values": values}]
    assert bool(rules.gpu_nodepool_consolidation(rules.NODEPOOL, body)) is gpu


def test_the_gpu_present_node_label_makes_a_gpu_pool() -> None:
    spec = {"template": {"metadata": {"labels": {"nvidia.com/gpu.present": "true"}}, "spec": {}}}
    assert rules.nodepool_selects_gpus(spec) is True


# --- autoscaler metric and scope ------------------------------------------------------------------------------


def scaled_object_with(compliant: dict[str, tuple[str, dict[str, Any]]], query: str) -> tuple[str, dict[str, Any]]:
    rtype, props = compliant[PREFILL_SO_KEY]
    props = copy.deepcopy(props)
    props["spec"]["triggers"][0]["metadata"]["query"] = query
    return rtype, props


@pytest.mark.parametrize(
    ("query", "needle"),
    [
        ("avg(DCGM_FI_DEV_GPU_UTIL{pod=~'llama.*'})", "duty cycle"),
        ("avg(DCGM_FI_PROF_SM_ACTIVE)", "profiling counters"),
        ("max(DCGM_FI_DEV_FB_USED) / 1e3", "pre-allocates the KV cache"),
        ('avg(vllm:gpu_cache_usage_perc{gpuscale_io_role="decode"})', "use vllm:kv_cache_usage_perc"),
        ("sum(vllm:num_requests_swapped)", "no longer exposes"),
    ],
)
def test_banned_scaledobject_signals(compliant: dict[str, tuple[str, dict[str, Any]]], query: str, needle: str) -> None:
    [msg] = rules.autoscaler_metric(*scaled_object_with(compliant, query))
    assert msg.startswith("ScaledObject llama-prefill trigger 0 (prometheus) uses ")
    assert needle in msg


def test_recorded_scaledobjects_use_vllm_signals(compliant: dict[str, tuple[str, dict[str, Any]]]) -> None:
    scalers = [v for k, v in compliant.items() if v[0] == rules.SCALEDOBJECT]
    assert len(scalers) == 2
    assert all(rules.autoscaler_metric(t, p) == [] and rules.autoscaler_role_scope(t, p) == [] for t, p in scalers)


def hpa(metric_name: str, selector: dict[str, Any] | None = None, name: str = "x") -> dict[str, Any]:
    metric: dict[str, Any] = {"name": metric_name}
    if selector is not None:
        metric["selector"] = selector
    return {
        "metadata": {"name": name, "namespace": "inference"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llama-prefill"},
            "minReplicas": 1, "maxReplicas": 4,
            "metrics": [{"type": "Pods", "pods": {"metric": metric, "target": {"type": "AverageValue", "averageValue": "4"}}}],
        },
    }


def test_hpa_metrics() -> None:
    hpa_type = "kubernetes:autoscaling/v2:HorizontalPodAutoscaler"
    assert rules.autoscaler_metric(hpa_type, hpa("vllm_num_requests_waiting")) == []
    [duty] = rules.autoscaler_metric(hpa_type, hpa("DCGM_FI_DEV_GPU_UTIL"))
    assert duty.startswith("HorizontalPodAutoscaler x metric 0 (Pods) uses DCGM_FI_DEV_GPU_UTIL")
    [removed] = rules.autoscaler_metric(hpa_type, hpa("vllm_gpu_cache_usage_perc"))  # prometheus-adapter's renaming
    assert "vllm:gpu_cache_usage_perc" in removed


def _labelled(body: dict[str, Any], criticality: str | None, **spec: Any) -> dict[str, Any]:
    out = copy.deepcopy(body)
    out["metadata"]["labels"] = {} if criticality is None else {labels.CRITICALITY_LABEL: criticality}
    out["spec"] = {k: v for k, v in out["spec"].items() if k not in ("minReplicas", "minReplicaCount")} | spec
    return out


def test_a_critical_autoscaler_keeps_two_replicas_and_the_apis_defaults_count(
    compliant: dict[str, tuple[str, dict[str, Any]]],
) -> None:
    so_type, so = compliant[PREFILL_SO_KEY]
    hpa_type = "kubernetes:autoscaling/v2:HorizontalPodAutoscaler"
    [low] = rules.critical_warm_minimum(so_type, _labelled(so, "critical", minReplicaCount=1))
    assert low.startswith("ScaledObject ") and "1 minimum replicas on a critical SLO" in low
    assert rules.critical_warm_minimum(so_type, _labelled(so, "critical", minReplicaCount=2)) == []
    assert rules.critical_warm_minimum(so_type, _labelled(so, "critical", minReplicaCount=3)) == []
    # unset: KEDA holds 0, the HPA API 1; both are below a critical floor of 2
    assert len(rules.critical_warm_minimum(so_type, _labelled(so, "critical"))) == 1
    assert len(rules.critical_warm_minimum(hpa_type, _labelled(hpa("vllm_num_requests_waiting"), "critical"))) == 1
    # not critical, or no label (an object gpuscale did not emit): nothing to judge
    assert rules.critical_warm_minimum(so_type, _labelled(so, "standard", minReplicaCount=1)) == []
    assert rules.critical_warm_minimum(so_type, _labelled(so, None, minReplicaCount=0)) == []
    assert rules.critical_warm_minimum(NODEPOOL_KEY.split("::")[0], _labelled(so, "critical", minReplicaCount=0)) == []


def test_an_autoscaler_spanning_prefill_and_decode_is_refused(compliant: dict[str, tuple[str, dict[str, Any]]]) -> None:
    query = 'sum(vllm:num_requests_waiting{gpuscale_io_model="llama",gpuscale_io_role=~"prefill|decode"})'
    [msg] = rules.autoscaler_role_scope(*scaled_object_with(compliant, query))
    assert "selects both prefill and decode" in msg
    selector = {"matchExpressions": [{"key": "gpuscale.io/role", "operator": "In", "values": ["prefill", "decode"]}]}
    assert len(rules.autoscaler_role_scope("kubernetes:autoscaling/v2:HorizontalPodAutoscaler",
                                           hpa("vllm_kv_cache_usage_perc", selector))) == 1


def test_two_autoscalers_on_one_workload(compliant: dict[str, tuple[str, dict[str, Any]]]) -> None:
    resources = list(compliant.values())
    assert rules.one_autoscaler_per_workload(resources) == []
    resources.append(("kubernetes:autoscaling/v2:HorizontalPodAutoscaler", hpa("vllm_num_requests_waiting", name="extra")))
    [v] = rules.one_autoscaler_per_workload(resources)
    assert v.index == len(resources) - 1
    assert v.message.startswith("Deployment inference/llama-prefill is scaled by 2 autoscalers (")
    assert "ScaledObject inference/llama-prefill" in v.message and "HorizontalPodAutoscaler inference/extra" in v.message
    other_ns = hpa("vllm_num_requests_waiting", name="elsewhere")
    other_ns["metadata"]["namespace"] = "staging"
    assert len(rules.one_autoscaler_per_workload([*resources[:-1], ("kubernetes:autoscaling/v2:HorizontalPodAutoscaler", other_ns)])) == 0


def test_autoscaler_target_defaults_to_a_deployment() -> None:
    props = {"metadata": {"name": "s"}, "spec": {"scaleTargetRef": {"name": "w"}}}
    assert rules.autoscaler_target(rules.SCALEDOBJECT, props) == ("default", "apps", "Deployment", "w")
    assert rules.autoscaler_target(rules.NODEPOOL, props) is None


# --- gang scheduling -------------------------------------------------------------------------------------------


def test_recorded_multi_node_lws_without_kai_is_refused(compliant: dict[str, tuple[str, dict[str, Any]]]) -> None:
    assert rules.gang_scheduling(*compliant[LWS_KEY]) == []
    rtype, props = recorded(Knobs(decode_scheduler="default-scheduler"))[LWS_KEY]
    [msg] = rules.gang_scheduling(rtype, props)
    assert msg.startswith("LeaderWorkerSet llama-decode: workerTemplate uses schedulerName default-scheduler, "
                          "but one replica is 2 GPU pods")
    assert "schedulerName: kai-scheduler" in msg


def test_gang_rule_edges(compliant: dict[str, tuple[str, dict[str, Any]]]) -> None:
    rtype, props = compliant[LWS_KEY]
    single = copy.deepcopy(props)
    single["spec"]["leaderWorkerTemplate"]["size"] = 1
    assert rules.gang_scheduling(rtype, single) == []
    cpu = copy.deepcopy(props)
    del cpu["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["resources"]
    assert rules.gang_scheduling(rtype, cpu) == []
    leader = copy.deepcopy(props)
    leader["spec"]["leaderWorkerTemplate"]["leaderTemplate"] = {"spec": {"containers": []}}
    [msg] = rules.gang_scheduling(rtype, leader)
    assert "leaderTemplate uses schedulerName default-scheduler" in msg
    unqueued = copy.deepcopy(props)
    del unqueued["metadata"]["labels"]
    del unqueued["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"]["kai.scheduler/queue"]
    [msg] = rules.gang_scheduling(rtype, unqueued)
    assert "no kai.scheduler/queue label" in msg


# --- prod AMI --------------------------------------------------------------------------------------------------


def test_prod_ami_must_be_pinned(compliant: dict[str, tuple[str, dict[str, Any]]]) -> None:
    assert rules.ami_pinned(*compliant[NODECLASS_KEY], stage="prod") == []
    rtype, props = recorded(Knobs(ami_alias="al2023@latest"))[NODECLASS_KEY]
    [msg] = rules.ami_pinned(rtype, props, stage="prod")
    assert msg.startswith("EC2NodeClass h100: amiSelectorTerms[0].alias al2023@latest in production")
    assert rules.ami_pinned(rtype, props, stage="staging") == []
    assert rules.ami_pinned(rtype, props) == []  # no tag, no configured stage: not production
    ssm = copy.deepcopy(props)
    ssm["spec"]["amiSelectorTerms"] = [{"ssmParameter": "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/"
                                                        "x86_64/nvidia/recommended/image_id"}]
    assert len(rules.ami_pinned(rtype, ssm, stage="prod")) == 1


@pytest.mark.parametrize(("tag", "configured", "prod"), [
    ("prod", None, True), ("prod", "dev", True),  # the tag gpuscale wrote wins over the pack's config
    ("staging", "prod", False), (None, "prod", True), (None, None, False),
])
def test_production_is_the_stage_tag_else_the_configured_stage(tag: str | None, configured: str | None, prod: bool) -> None:
    rtype, props = recorded(Knobs(ami_alias="al2023@latest"))[NODECLASS_KEY]
    props = copy.deepcopy(props)
    if tag is not None:
        props["spec"].setdefault("tags", {})[labels.STAGE_TAG] = tag
    assert bool(rules.ami_pinned(rtype, props, stage=configured)) is prod


def test_check_resources_names_each_rule() -> None:
    bad = recorded(Knobs(consolidation_policy="Balanced", ami_alias="al2023@latest", decode_scheduler="default-scheduler"))
    found = {rule for _, rule, _ in rules.check_resources(list(bad.values()), stage="prod")}
    assert found == {"gpu-nodepool-consolidation", "prod-ami-pinned", "gang-scheduling-multi-pod-gpu"}
