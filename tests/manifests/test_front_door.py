"""The front door's builders: chart values, the EPP config, the Envoy, the Service and the KEDA trigger; what each
cold-start choice emits; every object schema-valid. Streaming: what can be checked offline is that nothing in the
emitted path buffers a response or cuts a long stream."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from gpuscale import labels, versions
from gpuscale.manifests import autoscaling as au
from gpuscale.manifests import cold_start, karpenter, vllm
from gpuscale.manifests import front_door as fd
from gpuscale.manifests.autoscaling import AutoscalerSettings
from gpuscale.manifests.front_door import FrontDoorSettings
from gpuscale.manifests.router import RouterSettings, router_service_body
from gpuscale.sizing import size_platform
from gpuscale.spec.platform import PlatformSpec
from tests.conftest import requires_shared
from tests.specs import model, pd_raw, small_raw, small_spec


def zero_raw(**extra: Any) -> dict[str, Any]:
    slo = {"ttft_p99_s": 2.0, "itl_p99_s": 0.05, "request_timeout_s": 600, "criticality": "best_effort"}
    return small_raw(models=[model(criticality="best_effort", slo=slo, **extra)])


def door_of(spec: PlatformSpec, name: str = "m8b") -> FrontDoorSettings:
    return FrontDoorSettings.from_platform(spec, size_platform(spec), name)


@pytest.fixture(scope="module")
def door_spec() -> PlatformSpec:
    return PlatformSpec.model_validate(zero_raw())


@pytest.fixture(scope="module")
def pd_door_spec() -> PlatformSpec:
    raw = pd_raw()
    raw["models"][0]["slo"] = {"ttft_p99_s": 2.0, "itl_p99_s": 0.05, "request_timeout_s": 900}  # standard, not critical
    raw["models"][0]["autoscaling"] = {"prefill": {"min_replicas": 0, "max_replicas": 4},
                                       "decode": {"min_replicas": 0, "max_replicas": 4}}
    return PlatformSpec.model_validate(raw)


def test_settings_carry_sizings_numbers(door_spec: PlatformSpec) -> None:
    s = door_of(door_spec)
    door = size_platform(door_spec).model("m8b").front_door
    assert door is not None
    assert (s.hold_limit_s, s.queue_bound, s.per_replica, s.retry_after_s, s.poll_s) == (
        door.hold_limit_s, door.queue_bound, door.per_replica, door.retry_after_s, door.poll_s)
    assert s.endpoint_labels == vllm.selector_labels("m8b", "aggregated") and s.mode == "aggregated"
    with pytest.raises(ValueError, match="has no front door"):
        door_of(small_spec())


def test_epp_config_holds_for_the_hold_limit_and_bounds_the_queue(door_spec: PlatformSpec) -> None:
    s = door_of(door_spec)
    config = fd.epp_config(s)
    assert config["apiVersion"] == "llm-d.ai/v1alpha1" and config["kind"] == "EndpointPickerConfig"
    assert config["featureGates"] == ["flowControl"]
    assert config["flowControl"] == {"maxRequests": str(s.queue_bound), "defaultRequestTTL": f"{s.hold_limit_s}s"}
    refs = {p["pluginRef"] for prof in config["schedulingProfiles"] for p in prof["plugins"]}
    assert refs == {p["type"] for p in config["plugins"]} == {"queue-scorer", "kv-cache-utilization-scorer", "prefix-cache-scorer"}


def test_a_pd_model_keeps_its_router_behind_the_door(pd_door_spec: PlatformSpec) -> None:
    s = door_of(pd_door_spec, "m70b")
    assert s.mode == "disaggregated" and s.endpoint_labels == {"app.kubernetes.io/name": "vllm-router", "app.kubernetes.io/instance": "m70b"}
    config = fd.epp_config(s)
    detector = next(p for p in config["plugins"] if p["type"] == "concurrency-detector")
    assert config["flowControl"]["saturationDetector"] == {"pluginRef": detector["name"]}
    assert detector["parameters"]["maxConcurrency"] == s.max_concurrency > 1
    assert config["dataLayer"] == {"injectDefaults": False}  # the router has no vLLM metrics to scrape
    ms = size_platform(pd_door_spec).model("m70b")
    assert s.max_concurrency == ms.role("decode").max_replicas * ms.max_num_seqs
    # the door owns <model>; the router's Service moves aside
    router = RouterSettings.from_service(vllm.ServingSettings.from_platform(pd_door_spec, size_platform(pd_door_spec), "m70b"))
    assert router.behind_door and router_service_body(router)["metadata"]["name"] == "m70b-pd"


def test_chart_values_pin_the_release_and_keep_names_apart(door_spec: PlatformSpec) -> None:
    s = door_of(door_spec)
    router = fd.chart_values(s)["router"]
    assert router["inferencePool"] == {"create": False}  # standalone: --endpoint-selector, no InferencePool CRD
    assert router["modelServers"] == {"matchLabels": s.endpoint_labels, "targetPorts": [{"number": vllm.HTTP_PORT}]}
    epp = router["epp"]
    assert f"{epp['image']['registry']}/{epp['image']['repository']}:{epp['image']['tag']}" == versions.LLM_D_ROUTER_EPP.ref
    assert yaml.safe_load(epp["pluginsCustomConfig"][epp["pluginsConfigFile"]]) == fd.epp_config(s)
    assert epp["resources"]["requests"]["cpu"] and epp["resources"]["requests"]["memory"]  # the chart requires both
    proxy = router["proxy"]
    assert proxy["image"] == versions.LLM_D_ROUTER_ENVOY.ref and proxy["mode"] == "sidecar" and proxy["failOpen"] is False
    assert yaml.safe_load(proxy["configMap"]["data"]["envoy.yaml"]) == fd.envoy_bootstrap(s)
    # the preset's ConfigMap is called "envoy" and its Secret is global: per-release names for two models per namespace
    assert proxy["configMap"]["name"] == "m8b-door-envoy"
    assert proxy["volumes"][0]["configMap"]["name"] == proxy["configMap"]["name"]
    monitoring = router["monitoring"]
    assert monitoring["interval"] == f"{s.poll_s}s"
    assert monitoring["prometheus"] == {"enabled": True, "auth": {"enabled": True, "secretName": "m8b-door-metrics-reader"}}


def _filter_matches(f: dict[str, Any], status: int, flags: tuple[str, ...]) -> bool:
    """Envoy's AccessLogFilter as local reply mappers evaluate it (source/common/access_log/access_log_impl.cc):
    status_code_filter EQ, and_filter, and response_flag_filter (no flags listed: any flag set matches)."""
    if "status_code_filter" in f:
        cmp = f["status_code_filter"]["comparison"]
        assert cmp["op"] == "EQ"
        return bool(status == cmp["value"]["default_value"])
    if "and_filter" in f:
        return all(_filter_matches(g, status, flags) for g in f["and_filter"]["filters"])
    if "response_flag_filter" in f:
        wanted = f["response_flag_filter"].get("flags", [])
        return bool(flags) and (not wanted or any(x in wanted for x in flags))
    raise AssertionError(f"filter not modelled: {f}")


def retry_after(mappers: list[dict[str, Any]], status: int, flags: tuple[str, ...] = ()) -> str | None:
    """The Retry-After a local reply gets: the first mapper whose filter matches applies (LocalReplyImpl::rewrite)."""
    for mapper in mappers:
        if _filter_matches(mapper["filter"], status, flags):
            added = {h["header"]["key"]: h["header"]["value"] for h in mapper.get("headers_to_add", [])}
            return added.get("Retry-After")
    return None


def test_envoy_answers_503_with_retry_after_and_never_cuts_a_hold_short(door_spec: PlatformSpec) -> None:
    s = door_of(door_spec)
    boot = fd.envoy_bootstrap(s)
    (vllm_listener,) = [x for x in boot["static_resources"]["listeners"] if x["name"] == "vllm"]
    assert vllm_listener["address"]["socket_address"]["port_value"] == fd.PROXY_PORT
    hcm = vllm_listener["filter_chains"][0]["filters"][0]["typed_config"]
    mappers = hcm["local_reply_config"]["mappers"]
    # the EPP's 503 (nothing ready, at zero): come back when the model is up
    assert retry_after(mappers, 503) == str(s.retry_after_s)
    # its 429 (replicas up but saturated): come back when a slot frees, seconds, not a cold start
    assert retry_after(mappers, 429) == str(s.retry_after_saturated_s)
    assert s.retry_after_saturated_s == 12 < s.retry_after_s  # 2 s TTFT + 200 tokens x 0.05 s
    # Envoy's own 503s (upstream reset, overflow, no healthy upstream) carry a response flag: left alone
    for flag in ("UC", "UO", "UH", "URX"):
        assert retry_after(mappers, 503, flags=(flag,)) is None
    ext_proc = hcm["http_filters"][0]["typed_config"]
    assert ext_proc["failure_mode_allow"] is False
    assert int(ext_proc["message_timeout"].rstrip("s")) > s.hold_limit_s  # the EPP, not Envoy, ends a hold
    # every refusal is logged with the EPP's reason, so an operator sees why a client got 503
    (log,) = hcm["access_log"]
    assert log["typed_config"]["path"] == "/dev/stdout"
    fields = log["typed_config"]["log_format"]["json_format"]
    assert fields["status"] == "%RESPONSE_CODE%" and fields["dropped_reason"] == f"%RESP({fd.DROPPED_REASON_HEADER})%"


def test_nothing_on_the_path_buffers_or_cuts_a_stream(door_spec: PlatformSpec) -> None:
    # vLLM streams chat completions as server-sent events; Envoy forwards each chunk unless a filter buffers the body
    hcm = next(x for x in fd.envoy_bootstrap(door_of(door_spec))["static_resources"]["listeners"] if x["name"] == "vllm")
    typed = hcm["filter_chains"][0]["filters"][0]["typed_config"]
    filters = [f["name"] for f in typed["http_filters"]]
    assert filters == ["envoy.filters.http.ext_proc", "envoy.filters.http.router"]  # no buffer or compressor filter
    mode = typed["http_filters"][0]["typed_config"]["processing_mode"]
    assert mode["response_body_mode"] == "FULL_DUPLEX_STREAMED"  # chunks pass the EPP one by one, never BUFFERED
    route = typed["route_config"]["virtual_hosts"][0]["routes"][0]["route"]
    assert route["timeout"] == route["idle_timeout"] == "86400s"  # a long generation is not cut by the door


def test_the_door_takes_the_model_url_and_the_model_service_moves_aside(door_spec: PlatformSpec) -> None:
    s = door_of(door_spec)
    svc = fd.service_body(s)
    assert svc["metadata"]["name"] == "m8b" and svc["metadata"]["namespace"] == "inference"
    assert svc["spec"]["selector"] == {"llm-d-router-standalone": "m8b-door-epp"}
    assert svc["spec"]["ports"] == [{"name": "http", "port": 8000, "targetPort": fd.PROXY_PORT, "protocol": "TCP"}]
    serving = vllm.ServingSettings.from_platform(door_spec, size_platform(door_spec), "m8b")
    assert vllm.service_body(serving, "aggregated")["metadata"]["name"] == "m8b-aggregated"
    warm = small_spec()
    plain = vllm.ServingSettings.from_platform(warm, size_platform(warm), "m8b")
    assert vllm.service_body(plain, "aggregated")["metadata"]["name"] == "m8b"


def test_names_follow_the_charts_truncation() -> None:
    long = "a" * 40
    assert fd.epp_name(long) == f"{(long + '-door')[:40]}-epp" and len(fd.epp_name(long)) <= 63
    assert fd.epp_name("m8b") == "m8b-door-epp"


def test_every_role_wakes_on_the_door_queue(door_spec: PlatformSpec, pd_door_spec: PlatformSpec) -> None:
    for spec, name in ((door_spec, "m8b"), (pd_door_spec, "m70b")):
        sized = size_platform(spec)
        door = sized.model(name).front_door
        assert door is not None
        for role in spec.models[0].serving.roles:
            body = au.scaled_object_body(AutoscalerSettings.from_platform(spec, sized, name, role))
            trigger = next(t for t in body["spec"]["triggers"] if t["name"] == fd.TRIGGER_NAME)
            assert trigger["metadata"]["query"] == fd.queue_query(name, spec.models[0].serving.namespace)
            assert trigger["metadata"]["threshold"] == str(door.per_replica)
            assert trigger["metadata"]["activationThreshold"] == "0"
            assert body["spec"]["minReplicaCount"] == 0 and body["spec"]["pollingInterval"] == door.poll_s
            assert body["spec"]["cooldownPeriod"] == door.idle_window_s
    assert fd.queue_query("m8b", "inference") == (
        'sum(llm_d_epp_flow_control_queue_size{namespace="inference",service="m8b-door-epp"}) or on() vector(0)'
    )


# ------------------------------------------------------------------------------------------ cold-start choices


def nodeclass(spec: PlatformSpec) -> dict[str, Any]:
    pool = spec.topology.gpu_pools[0]
    return karpenter.ec2nodeclass_body(pool, cluster_name="c", node_role_name="r", root_volume_gib=200, tags={})


def with_pool(**pool: Any) -> PlatformSpec:
    raw = small_raw()
    raw["topology"]["gpu_pools"][0].update(pool)
    return PlatformSpec.model_validate(raw)


def test_soci_parallel_pull_is_nodeadms_fast_image_pull_gate() -> None:
    body = nodeclass(with_pool(image_pull="soci-parallel"))
    assert yaml.safe_load(body["spec"]["userData"]) == {
        "apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": {"featureGates": {"FastImagePull": True}},
    }
    assert "userData" not in nodeclass(with_pool())["spec"]


def test_a_snapshot_seeds_bottlerockets_data_volume() -> None:
    spec = with_pool(ami_alias="bottlerocket@v1.44.0", image_pull="snapshot", image_snapshot_id="snap-0123456789abcdef0")
    devices = {m["deviceName"]: m for m in nodeclass(spec)["spec"]["blockDeviceMappings"]}
    data = devices[cold_start.BOTTLEROCKET_DATA_DEVICE]["ebs"]
    assert data["snapshotID"] == "snap-0123456789abcdef0" and data["volumeInitializationRate"] == 300
    assert "snapshotID" not in devices["/dev/xvda"]["ebs"]  # the OS volume stays the AMI's


def test_compile_cache_and_node_cache_reach_the_pod() -> None:
    hub = {"uri": "hf://meta-llama/Llama-3.1-8B-Instruct"}
    spec = small_spec(models=[model(weights=hub, cold_start={
        "engine_start": "compile-cache", "compile_cache_claim": "vllm-cache", "weights_cache": "node-nvme"})])
    serving = vllm.ServingSettings.from_platform(spec, size_platform(spec), "m8b")
    pod = vllm.workload_body(serving, "aggregated")["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["compile-cache"] == {"name": "compile-cache", "persistentVolumeClaim": {"claimName": "vllm-cache"}}
    assert volumes["hf-cache"]["hostPath"] == {"path": "/mnt/k8s-disks/0/gpuscale/inference/m8b", "type": "DirectoryOrCreate"}
    (container,) = pod["containers"]
    assert {"name": "VLLM_CACHE_ROOT", "value": cold_start.COMPILE_CACHE_MOUNT} in container["env"]
    assert {"name": "compile-cache", "mountPath": cold_start.COMPILE_CACHE_MOUNT} in container["volumeMounts"]
    plain = small_spec(models=[model(weights=hub)])
    plain_pod = vllm.workload_body(vllm.ServingSettings.from_platform(plain, size_platform(plain), "m8b"), "aggregated")
    plain_volumes = {v["name"]: v for v in plain_pod["spec"]["template"]["spec"]["volumes"]}
    assert "emptyDir" in plain_volumes["hf-cache"] and "compile-cache" not in plain_volumes


# ------------------------------------------------------------------------------------------ schemas


@requires_shared
def test_every_object_the_door_and_the_choices_emit_is_schema_valid(door_spec: PlatformSpec, pd_door_spec: PlatformSpec) -> None:
    from tests.k8s_schema import assert_valid

    bodies: list[dict[str, Any]] = []
    for spec, name in ((door_spec, "m8b"), (pd_door_spec, "m70b")):
        sized = size_platform(spec)
        bodies += fd.objects(door_of(spec, name))
        bodies += [au.scaled_object_body(AutoscalerSettings.from_platform(spec, sized, name, r))
                   for r in spec.models[0].serving.roles]
    bodies += [nodeclass(with_pool(image_pull="soci-parallel")),
               nodeclass(with_pool(ami_alias="bottlerocket@v1.44.0", image_pull="snapshot",
                                   image_snapshot_id="snap-0123456789abcdef0"))]
    assert_valid(*bodies)
    assert labels.MODEL_LABEL in bodies[0]["metadata"]["labels"]
