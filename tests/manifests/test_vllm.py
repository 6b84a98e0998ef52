"""vLLM serving builders: args from sizing, GPU placement, KAI wiring, drain, weights, P/D, multi-node LWS, schemas."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import pytest

from gpuscale import labels, versions
from gpuscale.manifests import iam, karpenter, vllm
from gpuscale.manifests.vllm import ServingSettings
from gpuscale.sizing import size_platform
from gpuscale.spec.platform import PlatformSpec
from gpuscale.stackfile import validate_config
from tests.conftest import STACKS, requires_shared
from tests.specs import multi_node_aggregated


def service_args(spec: PlatformSpec, model: str) -> ServingSettings:
    return ServingSettings.from_platform(spec, size_platform(spec), model)


def all_args(stack_specs: dict[str, PlatformSpec]) -> list[tuple[str, ServingSettings]]:
    out = []
    for name in STACKS:
        spec = stack_specs[name]
        sizing = size_platform(spec)
        out += [(name, ServingSettings.from_platform(spec, sizing, m.name)) for m in spec.models]
    return out


def multi_node_spec(raw_stack: Callable[[str], dict[str, Any]]) -> PlatformSpec:
    """Prod with the 70B model at TP8 x PP2 on p5.48xlarge: 16 GPUs, two 8-GPU pods on two nodes."""
    return validate_config(multi_node_aggregated(raw_stack("prod")), "multi-node test")


def flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def container(body: dict[str, Any], template: str = "template") -> dict[str, Any]:
    spec = body["spec"]
    tpl = spec[template] if template == "template" else spec["leaderWorkerTemplate"][template]
    (c,) = tpl["spec"]["containers"]
    return c  # type: ignore[no-any-return]


# ---------------------------------------------------------------- args from sizing


@pytest.mark.parametrize("role", ["prefill", "decode"])
def test_prod_args_match_sizing(prod_spec: PlatformSpec, role: str) -> None:
    a = service_args(prod_spec, "llama-70b-fp8")
    args = container(vllm.workload_body(a, role))["args"]  # type: ignore[arg-type]
    shape = a.sizing.shape
    assert args[0] == "s3://example-models-prod/meta-llama/Llama-3.3-70B-Instruct-FP8"
    assert flag(args, "--tensor-parallel-size") == str(shape.tensor_parallel_size) == "4"
    assert shape.gpus_per_pod == shape.tensor_parallel_size  # the TP group is this pod's GPU share of the node
    assert flag(args, "--pipeline-parallel-size") == "1"
    assert flag(args, "--max-model-len") == str(prod_spec.models[0].architecture.max_context_tokens) == "32768"
    assert flag(args, "--gpu-memory-utilization") == "0.9"
    assert flag(args, "--kv-cache-dtype") == "auto"  # bf16 KV cache
    assert flag(args, "--served-model-name") == "llama-70b-fp8"
    assert flag(args, "--port") == "8000"
    assert flag(args, "--load-format") == "runai_streamer"
    assert json.loads(flag(args, "--model-loader-extra-config")) == {"distributed": True}


def test_every_stack_args_match_sizing(stack_specs: dict[str, PlatformSpec]) -> None:
    for _stack, a in all_args(stack_specs):
        shape = a.sizing.shape
        for role in a.model.serving.roles:
            c = container(vllm.workload_body(a, role))
            assert c["image"] == versions.VLLM.ref == "vllm/vllm-openai:v0.33.0"
            assert c["command"] == ["vllm", "serve"]
            args = c["args"]
            assert int(flag(args, "--tensor-parallel-size")) * int(flag(args, "--pipeline-parallel-size")) == shape.gpus
            assert int(flag(args, "--max-model-len")) == a.model.architecture.max_context_tokens
            assert float(flag(args, "--gpu-memory-utilization")) == a.model.serving.gpu_memory_utilization
            devices = {labels.GPU_RESOURCE: str(shape.gpus_per_pod)}
            if a.efa_devices:  # EFA pools: the pod's share of the node's EFA interfaces
                devices[labels.EFA_RESOURCE] = str(a.efa_devices)
            # devices only: no CPU throttling, no memory OOM-kill on load
            assert c["resources"]["limits"] == devices
            assert {k: v for k, v in c["resources"]["requests"].items() if k in devices} == devices


def test_fp8_kv_cache_and_max_num_seqs(raw_stack: Callable[[str], dict[str, Any]]) -> None:
    raw = raw_stack("prod")
    raw["models"][0]["architecture"]["kv_cache_precision"] = "fp8"
    raw["models"][0]["serving"]["max_num_seqs"] = 128
    a = service_args(validate_config(raw, "t"), "llama-70b-fp8")
    args = container(vllm.workload_body(a, "decode"))["args"]
    assert flag(args, "--kv-cache-dtype") == "fp8"
    assert flag(args, "--max-num-seqs") == "128"


def test_cpu_and_memory_requests_fit_the_sized_node(stack_specs: dict[str, PlatformSpec]) -> None:
    for _stack, a in all_args(stack_specs):
        req = vllm.resources(a)["requests"]
        replicas_per_node = a.instance.gpus_per_node // a.shape.gpus_per_pod
        assert int(req["cpu"]) * replicas_per_node <= a.instance.vcpus * vllm.HOST_SHARE
        assert int(req["memory"].removesuffix("Gi")) * replicas_per_node <= a.instance.memory_gib * vllm.HOST_SHARE + 4


# ---------------------------------------------------------------- placement and KAI


def test_tolerations_match_the_nodepool_taint(stack_specs: dict[str, PlatformSpec]) -> None:
    for _stack, a in all_args(stack_specs):
        spec = next(s for s in stack_specs.values() if a.model in s.models)
        pool = spec.topology.pool(a.model.node_pool)
        nodepool = karpenter.nodepool_body(pool, zones=spec.topology.pool_zones(pool.name))
        taints = nodepool["spec"]["template"]["spec"]["taints"]
        node_labels = nodepool["spec"]["template"]["metadata"]["labels"]
        for role in a.model.serving.roles:
            pod = vllm.workload_body(a, role)["spec"]["template"]["spec"]
            for taint in taints:  # every taint of the NodePool is tolerated exactly
                assert any(
                    t["key"] == taint["key"] and t["effect"] == taint["effect"]
                    and t["operator"] == "Equal" and t["value"] == taint["value"]
                    for t in pod["tolerations"]
                ), (taint, pod["tolerations"])
            assert pod["nodeSelector"] == {labels.NODE_POOL_LABEL: pool.name}
            assert node_labels[labels.NODE_POOL_LABEL] == pool.name  # the NodePool's nodes carry that label
            # no node-level deadline cuts the pod's drain short: GPU NodePools carry no terminationGracePeriod
            assert "terminationGracePeriod" not in nodepool["spec"]["template"]["spec"]


def test_pod_carries_kai_scheduler_and_a_leaf_queue(stack_specs: dict[str, PlatformSpec]) -> None:
    for _stack, a in all_args(stack_specs):
        spec = next(s for s in stack_specs.values() if a.model in s.models)
        for role in a.model.serving.roles:
            body = vllm.workload_body(a, role)
            pod = body["spec"]["template"]
            assert pod["spec"]["schedulerName"] == "kai-scheduler"
            queue = pod["metadata"]["labels"][labels.KAI_QUEUE_LABEL]
            assert queue == a.model.queue and queue in spec.leaf_queue_names()
            assert body["metadata"]["labels"][labels.KAI_QUEUE_LABEL] == queue  # the podgrouper reads the owner
            assert pod["spec"]["priorityClassName"] == a.wiring[role].priority_class_name
            assert pod["metadata"]["labels"][labels.MODEL_LABEL] == a.model.name
            assert pod["metadata"]["labels"][labels.ROLE_LABEL] == role
            for key, value in a.wiring[role].pod_annotations.items():
                assert pod["metadata"]["annotations"][key] == value
            for key, value in a.wiring[role].workload_annotations.items():
                assert body["metadata"]["annotations"][key] == value


def test_prod_pd_roles_get_the_wiring_affinity(prod_spec: PlatformSpec) -> None:
    a = service_args(prod_spec, "llama-70b-fp8")
    for role in ("prefill", "decode"):
        pod = vllm.workload_body(a, role)["spec"]["template"]["spec"]
        assert pod["affinity"] == a.wiring[role].affinity  # type: ignore[index]
        assert pod["affinity"] is not None


# ---------------------------------------------------------------- drain, probes, replicas, security


def test_drain_settings(stack_specs: dict[str, PlatformSpec]) -> None:
    for _stack, a in all_args(stack_specs):
        timeout = a.model.slo.request_timeout_s
        for role in a.model.serving.roles:
            pod = vllm.workload_body(a, role)["spec"]["template"]
            c = pod["spec"]["containers"][0]
            sleep = int(c["lifecycle"]["preStop"]["exec"]["command"][1])
            assert c["lifecycle"]["preStop"]["exec"]["command"][0] == "sleep" and sleep > 0
            assert int(flag(c["args"], "--shutdown-timeout")) == math.ceil(timeout)
            assert pod["spec"]["terminationGracePeriodSeconds"] >= timeout + sleep
            # do-not-disrupt would block drift (AMI rollouts) forever on every node with a serving pod
            assert labels.DO_NOT_DISRUPT_ANNOTATION not in pod["metadata"]["annotations"]


def test_probes_are_sized_to_the_cold_start(stack_specs: dict[str, PlatformSpec]) -> None:
    for _stack, a in all_args(stack_specs):
        c = container(vllm.workload_body(a, a.model.serving.roles[0]))
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert c[probe]["httpGet"] == {"path": "/health", "port": "http"}
        startup = c["startupProbe"]
        window = startup["periodSeconds"] * startup["failureThreshold"]
        assert window >= 2 * a.sizing.cold_start.warm_node_s  # weights + engine init, generously
        assert window >= vllm.MIN_STARTUP_BUDGET_S
        live = c["livenessProbe"]
        assert live["periodSeconds"] * live["failureThreshold"] >= 60  # a busy engine is not restarted on a blip


def test_hf_weights_load_slower_so_the_probe_waits_longer(raw_stack: Callable[[str], dict[str, Any]]) -> None:
    raw = raw_stack("staging")
    raw["models"][0]["weights"] = {"uri": "hf://meta-llama/Llama-3.3-70B-Instruct"}
    slow = service_args(validate_config(raw, "t"), "llama-70b")
    fast = service_args(validate_config(raw_stack("staging"), "t"), "llama-70b")
    assert vllm.startup_budget_s(slow.sizing) > vllm.startup_budget_s(fast.sizing)


def test_autoscaler_owns_replicas(stack_specs: dict[str, PlatformSpec]) -> None:
    for _stack, a in all_args(stack_specs):
        for role in a.model.serving.roles:
            assert "replicas" not in vllm.workload_body(a, role)["spec"]


def test_container_is_unprivileged(stack_specs: dict[str, PlatformSpec]) -> None:
    for _stack, a in all_args(stack_specs):
        body = vllm.workload_body(a, a.model.serving.roles[0])
        c = container(body)
        caps = {"drop": ["ALL"], **({"add": ["IPC_LOCK"]} if a.efa_devices else {})}  # RDMA pins memory on EFA
        assert c["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": caps}
        pod = body["spec"]["template"]["spec"]
        assert pod["automountServiceAccountToken"] is False
        assert pod["enableServiceLinks"] is False
        shm = next(v for v in pod["volumes"] if v["name"] == "dshm")
        assert shm["emptyDir"]["medium"] == "Memory"
        assert {"name": "dshm", "mountPath": "/dev/shm"} in c["volumeMounts"]


# ---------------------------------------------------------------- weights


def test_hf_token_only_by_secret_reference(dev_spec: PlatformSpec) -> None:
    a = service_args(dev_spec, "llama-8b")
    c = container(vllm.workload_body(a, "aggregated"))
    (token,) = [e for e in c["env"] if e["name"] == "HF_TOKEN"]
    assert token == {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}}
    assert "value" not in token
    assert c["args"][0] == "meta-llama/Llama-3.1-8B-Instruct"
    assert "--load-format" not in c["args"]
    assert {"name": "hf-cache", "mountPath": vllm.HF_CACHE_MOUNT} in c["volumeMounts"]


def test_s3_weights_stream_with_the_runai_loader(prod_spec: PlatformSpec) -> None:
    a = service_args(prod_spec, "search-8b")
    c = container(vllm.workload_body(a, "aggregated"))
    assert c["args"][0] == "s3://example-models-prod/meta-llama/Llama-3.1-8B-Instruct"
    assert flag(c["args"], "--load-format") == "runai_streamer"
    assert "--model-loader-extra-config" not in c["args"]  # one GPU: nothing to distribute
    assert {"name": "AWS_REGION", "value": "us-east-1"} in c["env"]
    assert not any(e["name"] == "HF_TOKEN" for e in c["env"])


def test_pvc_weights_mount_read_only(raw_stack: Callable[[str], dict[str, Any]]) -> None:
    raw = raw_stack("staging")
    raw["models"][0]["weights"] = {"uri": "pvc://model-cache/meta-llama/Llama-3.3-70B"}
    a = service_args(validate_config(raw, "t"), "llama-70b")
    body = vllm.workload_body(a, "aggregated")
    c = container(body)
    assert c["args"][0] == "/models/meta-llama/Llama-3.3-70B"
    vol = next(v for v in body["spec"]["template"]["spec"]["volumes"] if v["name"] == "models")
    assert vol["persistentVolumeClaim"] == {"claimName": "model-cache", "readOnly": True}
    assert {"name": "models", "mountPath": "/models", "readOnly": True} in c["volumeMounts"]


def test_weights_read_policy_is_least_privilege() -> None:
    doc = vllm.weights_read_policy("s3://bucket/org/model/", "us-east-1")
    actions = sorted(a for s in doc["Statement"] for a in s["Action"])
    assert actions == ["s3:GetObject", "s3:ListBucket"]
    get, lst = doc["Statement"]
    assert get["Resource"] == "arn:aws:s3:::bucket/org/model/*"
    assert lst["Resource"] == "arn:aws:s3:::bucket"
    assert lst["Condition"] == {"StringLike": {"s3:prefix": ["org/model", "org/model/*"]}}
    assert all(s["Resource"] != "*" for s in doc["Statement"])
    gov = vllm.weights_read_policy("s3://b/p", "us-gov-west-1")
    assert gov["Statement"][0]["Resource"].startswith("arn:aws-us-gov:s3:::b/p/")
    trust = iam.pod_identity_trust_policy(partition="aws", region="us-east-1", account_id="123456789012",
                                          cluster_name="c", namespace="inference", service_account="m-vllm")["Statement"][0]
    assert trust["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert trust["Action"] == ["sts:AssumeRole", "sts:TagSession"]
    assert trust["Condition"]["StringEquals"]["aws:RequestTag/eks-cluster-arn"] == "arn:aws:eks:us-east-1:123456789012:cluster/c"
    assert trust["Condition"]["StringEquals"]["aws:RequestTag/kubernetes-service-account"] == "m-vllm"


# ---------------------------------------------------------------- P/D


def test_pd_roles_use_nixl_with_producer_and_consumer(prod_spec: PlatformSpec) -> None:
    a = service_args(prod_spec, "llama-70b-fp8")
    for role, kv_role in (("prefill", "kv_producer"), ("decode", "kv_consumer")):
        c = container(vllm.workload_body(a, role))
        kv = json.loads(flag(c["args"], "--kv-transfer-config"))
        # prod's h100 pool has EFA: NIXL moves the KV cache over libfabric (EFA), not UCX over TCP
        assert kv == {"kv_connector": "NixlConnector", "kv_role": kv_role, "kv_load_failure_policy": "fail",
                      "kv_connector_extra_config": {"backends": ["LIBFABRIC"]}}
        assert {"name": "FI_PROVIDER", "value": "efa"} in c["env"]
        # no huge pages: Karpenter cannot provision for a hugepages-2Mi request, and without one the EFA provider's
        # huge-page pools could only fail (vllm.EFA_HUGE_PAGE_ENV)
        assert {"name": "FI_EFA_USE_HUGE_PAGE", "value": "0"} in c["env"]
        assert not any(k.startswith("hugepages-") for part in ("requests", "limits") for k in c["resources"][part])
        (host,) = [e for e in c["env"] if e["name"] == "VLLM_NIXL_SIDE_CHANNEL_HOST"]
        assert host["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
        assert {"name": "nixl", "containerPort": vllm.NIXL_SIDE_CHANNEL_PORT, "protocol": "TCP"} in c["ports"]
    agg = container(vllm.workload_body(service_args(prod_spec, "search-8b"), "aggregated"))
    assert "--kv-transfer-config" not in agg["args"]
    assert not any(e["name"].startswith("VLLM_NIXL") for e in agg["env"])
    assert not any(e["name"].startswith("FI_") for e in agg["env"])  # l40s has no EFA


def test_services_pdbs_and_pod_monitors(prod_spec: PlatformSpec) -> None:
    a = service_args(prod_spec, "llama-70b-fp8")
    names = set()
    for role in ("prefill", "decode"):
        svc, pdb, pm = vllm.service_body(a, role), vllm.pdb_body(a, role), vllm.pod_monitor_body(a, role)
        own = {labels.MODEL_LABEL: "llama-70b-fp8", labels.ROLE_LABEL: role}
        assert svc["metadata"]["name"] == f"llama-70b-fp8-{role}"
        assert svc["spec"]["selector"] == own
        assert svc["spec"]["ports"] == [{"name": "http", "port": 8000, "targetPort": "http", "protocol": "TCP"}]
        # critical: two warm replicas, a ready floor of one; a drain never takes the role to zero
        assert pdb["spec"]["selector"]["matchLabels"] == own and pdb["spec"]["minAvailable"] == 1
        assert "maxUnavailable" not in pdb["spec"]
        assert pm["spec"]["selector"]["matchLabels"] == own
        assert pm["spec"]["podTargetLabels"] == [labels.MODEL_LABEL, labels.ROLE_LABEL]
        assert pm["spec"]["podMetricsEndpoints"] == [{"port": "http", "path": "/metrics", "interval": "15s"}]
        names.add(vllm.workload_body(a, role)["metadata"]["name"])
    assert names == {"llama-70b-fp8-prefill", "llama-70b-fp8-decode"}
    # the aggregated model's Service is its entry point under the model name
    assert vllm.service_body(service_args(prod_spec, "search-8b"), "aggregated")["metadata"]["name"] == "search-8b"
    assert vllm.endpoint_url("llama-70b-fp8", "inference") == "http://llama-70b-fp8.inference.svc.cluster.local:8000"


# ---------------------------------------------------------------- multi-node


def test_multi_node_replica_is_a_leader_worker_set_of_size_pods(raw_stack: Callable[[str], dict[str, Any]]) -> None:
    spec = multi_node_spec(raw_stack)
    a = service_args(spec, "llama-70b-fp8")
    assert a.shape.pods == 2 and a.shape.gpus_per_pod == 8 and a.shape.multi_node
    body = vllm.workload_body(a, "aggregated")
    assert body["apiVersion"] == "leaderworkerset.x-k8s.io/v1" and body["kind"] == "LeaderWorkerSet"
    lwt = body["spec"]["leaderWorkerTemplate"]
    assert lwt["size"] == a.shape.pods
    assert body["spec"]["startupPolicy"] == "LeaderCreated"  # KAI gangs the whole group
    assert "replicas" not in body["spec"]
    leader, worker = container(body, "leaderTemplate"), container(body, "workerTemplate")
    for c in (leader, worker):
        # one pod per 8-GPU node, with all 32 of its EFA devices
        assert c["resources"]["limits"] == {labels.GPU_RESOURCE: "8", labels.EFA_RESOURCE: "32"}
        assert flag(c["args"], "--nnodes") == "2" and flag(c["args"], "--master-addr") == "$(LWS_LEADER_ADDRESS)"
        assert flag(c["args"], "--tensor-parallel-size") == "8" and flag(c["args"], "--pipeline-parallel-size") == "2"
    assert flag(leader["args"], "--node-rank") == "0" and "--headless" not in leader["args"]
    assert flag(worker["args"], "--node-rank") == "$(LWS_WORKER_INDEX)" and "--headless" in worker["args"]
    assert "ports" not in worker and "readinessProbe" not in worker  # workers serve no HTTP
    # workers outlive the leader's drain, or SIGTERM to a rank would kill in-flight requests
    worker_sleep = int(worker["lifecycle"]["preStop"]["exec"]["command"][1])
    leader_sleep = int(leader["lifecycle"]["preStop"]["exec"]["command"][1])
    assert worker_sleep >= leader_sleep + int(flag(leader["args"], "--shutdown-timeout"))
    leader_only = {labels.LWS_WORKER_INDEX_LABEL: "0"}
    assert vllm.service_body(a, "decode")["spec"]["selector"].items() >= leader_only.items()
    assert vllm.pod_monitor_body(a, "decode")["spec"]["selector"]["matchLabels"].items() >= leader_only.items()
    with pytest.raises(ValueError, match="LeaderWorkerSet"):
        vllm.deployment_body(a, "decode")
    assert vllm.needs_lws(size_platform(spec)) and not vllm.needs_lws(size_platform(raw_spec_prod(raw_stack)))
    assert vllm.workload_ref("llama-70b-fp8", "decode", a.shape).kind == "LeaderWorkerSet"


def raw_spec_prod(raw_stack: Callable[[str], dict[str, Any]]) -> PlatformSpec:
    return validate_config(raw_stack("prod"), "t")


def test_single_node_replica_is_never_a_leader_worker_set(prod_spec: PlatformSpec) -> None:
    a = service_args(prod_spec, "llama-70b-fp8")
    with pytest.raises(ValueError, match="Deployment"):
        vllm.leader_worker_set_body(a, "prefill")


def test_args_refuse_inconsistent_pieces(prod_spec: PlatformSpec, dev_spec: PlatformSpec) -> None:
    a = service_args(prod_spec, "llama-70b-fp8")
    with pytest.raises(ValueError, match="missing role"):
        ServingSettings(**{**a.__dict__, "wiring": {"prefill": a.wiring["prefill"]}})
    with pytest.raises(ValueError, match="sizing is for model"):
        ServingSettings(**{**a.__dict__, "sizing": size_platform(dev_spec).models[0]})


def test_lws_chart_values_pin_the_image() -> None:
    values = vllm.lws_chart_values()
    assert values["image"]["manager"]["tag"] == f"v{versions.LWS.version}" == "v0.10.0"
    assert values["gangSchedulingManagement"] == {}  # KAI gangs LWS groups, not Volcano


# ---------------------------------------------------------------- schemas


def every_object(a: ServingSettings) -> list[dict[str, Any]]:
    objs = [vllm.service_account_body(a)]
    for role in a.model.serving.roles:
        objs += vllm.role_objects(a, role)
    return objs


@requires_shared
def test_every_object_of_every_stack_is_schema_valid(stack_specs: dict[str, PlatformSpec]) -> None:
    from tests.k8s_schema import assert_valid

    kinds = set()
    for _stack, a in all_args(stack_specs):
        objs = every_object(a)
        kinds |= {o["kind"] for o in objs}
        assert_valid(*objs)
    assert kinds == {"ServiceAccount", "Deployment", "Service", "PodDisruptionBudget", "PodMonitor"}


@requires_shared
def test_multi_node_objects_are_schema_valid(raw_stack: Callable[[str], dict[str, Any]]) -> None:
    from tests.k8s_schema import assert_valid

    a = service_args(multi_node_spec(raw_stack), "llama-70b-fp8")
    objs = every_object(a)
    assert {o["kind"] for o in objs} >= {"LeaderWorkerSet", "PodMonitor"}
    assert_valid(*objs)


@requires_shared
def test_schema_check_is_strict(prod_spec: PlatformSpec) -> None:
    """Guard the guard: a misspelt field in a pod template is caught (Kubernetes would drop it silently)."""
    from tests.k8s_schema import validate_object

    body = vllm.workload_body(service_args(prod_spec, "search-8b"), "aggregated")
    body["spec"]["template"]["spec"]["terminationGracePeriod"] = 30
    assert validate_object(body)


def test_efa_with_the_stock_image_is_warned_about(
    prod_spec: PlatformSpec, raw_stack: Callable[[str], dict[str, Any]],
) -> None:
    """Items 12-13: nothing read at the pinned tag shows vllm/vllm-openai shipping libfabric's EFA provider or
    aws-ofi-nccl, so a model that depends on them on EFA gets a warning that says what the image needs."""
    (pd,) = vllm.efa_image_warnings(service_args(prod_spec, "llama-70b-fp8"))
    assert "NIXL's LIBFABRIC backend" in pd and "serving.image" in pd and "fi_info -p efa" in pd
    (multi,) = vllm.efa_image_warnings(service_args(multi_node_spec(raw_stack), "llama-70b-fp8"))
    assert "aws-ofi-nccl" in multi and "TCP" in multi
    # an image of the user's choice, or a model off EFA, is not warned about
    custom = service_args(prod_spec, "llama-70b-fp8").model_copy(update={"image": "registry.example/vllm-efa:v0.33.0"})
    assert vllm.efa_image_warnings(custom) == []
    assert vllm.efa_image_warnings(service_args(prod_spec, "search-8b")) == []

