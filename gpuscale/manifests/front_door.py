"""Pure builders for the front door: llm-d's router, standalone (no Gateway, no InferencePool), with flow control.

One Helm release of ``llm-d-router-standalone`` per model (``versions.LLM_D_ROUTER``): the endpoint picker (EPP) with its
Envoy as a sidecar, picking among the model's serving pods by label (``--endpoint-selector``, rendered by the chart from
``router.modelServers.matchLabels``), plus a Service ``<model>`` on port 8000 in front of Envoy, so clients keep the URL
they had. Everything below was read in llm-d/llm-d-router at v0.10.0 (``research/upstream-facts-2.md`` A3):

* Flow control (``featureGates: [flowControl]``; ``pkg/epp/flowcontrol/config.go``) queues requests in the EPP. With
  no ready endpoint the queue is a scale-from-zero waiting room; a request waits at most ``defaultRequestTTL`` (here
  the hold limit sizing derives), then gets 503 with the pool still empty (``requestcontrol/admission.go``
  ``translateFlowControlOutcome``). A request arriving with ``maxRequests`` (the queue bound) already held gets 503 at
  once (``controller/internal/processor.go``: capacity reject on an empty pool is ``RejectedNoEndpoints``).
* The EPP only counts Ready pods (``controller/pod_reconciler.go``: ``podutil.IsPodReady``), so a loading replica is
  not an endpoint and a request is never sent to it.
* ``llm_d_epp_flow_control_queue_size`` (``pkg/epp/metrics/llm_d_router_metrics.go``) is the queue; the chart's
  ServiceMonitor scrapes it (with the EPP's metrics auth) and a KEDA trigger on it wakes the model
  (``gpuscale.manifests.autoscaling``).
* The EPP sets no ``Retry-After``. The Envoy here is the chart's preset (``llm-d-router-standalone/values.yaml``) with
  four changes: ``local_reply_config`` mappers that add ``Retry-After`` to the EPP's refusals, which go out as Envoy
  local replies (ext_proc ``sendImmediateResponse`` calls ``sendLocalReply``): the expected ready time on a 503 (the
  model at zero), the time a slot takes to free on a 429 (saturated), nothing on Envoy's own 503s (an upstream reset:
  they carry a response flag, the EPP's replies none); an ext_proc
  ``message_timeout`` just above the hold limit (the preset's 1000 s would cut longer holds); and fail-closed
  (``failure_mode_allow: false``: without the EPP no request has a destination); and a JSON request log on stdout
  with the status and the EPP's drop reason (the preset's log line is a placeholder).

Disaggregated models keep their P/D router (vLLM Router): the EPP picks among the router's pods and the router picks
prefill and decode. The router's ``/readiness`` answers 503 until it has discovered both roles, so the router is not an
endpoint while the model is at zero, and the EPP holds. The router serves no vLLM metrics, so the EPP gates P/D traffic
with the ``concurrency-detector`` instead of the metrics-based default.
"""

from __future__ import annotations

from typing import Any, Literal

import yaml

from gpuscale import labels, versions
from gpuscale.first_answer import EXT_PROC_MARGIN_S
from gpuscale.guardrails import warm_minimum
from gpuscale.manifests import entry_point
from gpuscale.manifests.namespaces import WorkloadNamespace
from gpuscale.manifests.router import router_selector
from gpuscale.manifests.vllm import HTTP_PORT, selector_labels
from gpuscale.signals.front_door_queue import FrontDoorQueue
from gpuscale.sizing import PlatformSizing
from gpuscale.spec.base import Spec
from gpuscale.spec.platform import PlatformSpec

PROXY_PORT = 8081
"""The Envoy listener of the chart's standalone preset (and the chart's default ``extraServicePorts`` ``http``)."""
EXT_PROC_PORT = 9002
"""EPP ext-proc gRPC port (chart ``router.epp.extProcPort``)."""
ENVOY_ADMIN_PORT = 19000
ENVOY_READY_PORT = 19001
QUEUE_METRIC = "llm_d_epp_flow_control_queue_size"
"""Requests held in the EPP's flow-control queues (llm-d-router v0.10.0 ``docs/metrics.md``, flow control)."""
FLOW_CONTROL_GATE = "flowControl"
"""``pkg/epp/flowcontrol/config.go`` ``FeatureGate``."""
STREAM_TIMEOUT = "86400s"
"""Route timeout and idle timeout of the preset: a streamed generation is never cut by the door."""
TRIGGER_NAME = "front-door-queue"
"""Name of the KEDA trigger on the door's queue in every role's ScaledObject."""
DROPPED_REASON_HEADER = "x-llm-d-request-dropped-reason"
"""Header the EPP sets on every request it drops (``pkg/common/error``): ``rejected-no-endpoints``, ``rejected-ttl-expired``,
``rejected-saturated``..."""


class FrontDoorSettings(Spec):
    """The front door of one model, every number from sizing."""

    model: str
    """Model name; the door's Service is ``<model>``, the client entry point."""
    namespace: WorkloadNamespace
    """Namespace of the model (the release, its RBAC and the pods it watches)."""
    mode: Literal["aggregated", "disaggregated"]
    """``aggregated``: the EPP picks a vLLM pod (prefix-, queue- and KV-aware); ``disaggregated``: it picks a P/D router pod."""
    endpoint_labels: dict[str, str]
    """Labels of the pods the EPP picks among (``router.modelServers.matchLabels``)."""
    hold_limit_s: int
    """EPP ``defaultRequestTTL``: the request timeout minus the TTFT target."""
    queue_bound: int
    """EPP ``maxRequests``: held requests beyond it get 503 at once."""
    per_replica: int
    """Held requests per replica the KEDA trigger targets."""
    retry_after_s: int
    """``Retry-After`` on the EPP's 503 (the model at zero): the expected ready time from zero."""
    retry_after_saturated_s: int
    """``Retry-After`` on the EPP's 429 (replicas up but saturated): the time a slot takes to free."""
    poll_s: int
    """ServiceMonitor scrape interval of the door's queue (and the roles' KEDA polling)."""
    max_concurrency: int
    """P/D only: in-flight requests per router pod before the EPP holds (the decode batch of every decode replica)."""
    replicas: int = 1
    """EPP pods; more than one elects a leader (the chart adds ``--ha-enable-leader-election``)."""

    @classmethod
    def from_platform(cls, spec: PlatformSpec, sizing: PlatformSizing, model_name: str) -> FrontDoorSettings:
        model = next(m for m in spec.models if m.name == model_name)
        ms = sizing.model(model_name)
        door = ms.front_door
        if door is None:
            raise ValueError(f"model {model_name} has no front door (front_door.enabled is false, or no role scales to zero)")
        if model.serving.mode == "disaggregated":
            endpoints = router_selector(model.name)
            decode = ms.role("decode")
            concurrency = decode.max_replicas * ms.max_num_seqs
        else:
            endpoints = selector_labels(model.name, "aggregated")
            if ms.shape.multi_node:  # only LWS leaders serve HTTP
                endpoints[labels.LWS_WORKER_INDEX_LABEL] = "0"
            concurrency = 0
        return cls(
            model=model.name, namespace=model.serving.namespace, mode=model.serving.mode, endpoint_labels=endpoints,
            hold_limit_s=door.hold_limit_s, queue_bound=door.queue_bound, per_replica=door.per_replica,
            retry_after_s=door.retry_after_s, retry_after_saturated_s=door.retry_after_saturated_s, poll_s=door.poll_s,
            max_concurrency=max(concurrency, 1),
            # a critical path keeps a second picker: a lost entry point is worse than lost prefix affinity
            replicas=warm_minimum.serving_replicas(model.slo.criticality),
        )


# ------------------------------------------------------------------------------------------ names


def release_name(model: str) -> str:
    return f"{model}-door"


def epp_name(model: str) -> str:
    """The chart's ``llm-d-router.name``: the release name cut to 40 characters, plus ``-epp`` (Deployment,
    ServiceAccount, Service and ServiceMonitor of the EPP)."""
    return f"{release_name(model)[:40]}-epp"


def epp_selector(model: str) -> dict[str, str]:
    """The chart's ``llm-d-router.selectorLabels`` in standalone mode (``inferencePool.create: false``)."""
    return {"llm-d-router-standalone": epp_name(model)}


def envoy_config_map_name(model: str) -> str:
    """One per release: the preset's fixed ``envoy`` would clash between two models in one namespace."""
    return f"{release_name(model)}-envoy"


def metrics_secret_name(model: str) -> str:
    """The ServiceAccount-token Secret the chart's ServiceMonitor authenticates with; per release for the same reason."""
    return f"{release_name(model)}-metrics-reader"


# ------------------------------------------------------------------------------------------ EPP


def epp_config(args: FrontDoorSettings) -> dict[str, Any]:
    """The ``EndpointPickerConfig`` (``apix/config/v1alpha1``) the EPP loads: flow control with the derived hold limit
    and queue bound; the chart's default scorers for vLLM pods, or a concurrency gate for P/D router pods."""
    flow: dict[str, Any] = {"maxRequests": str(args.queue_bound), "defaultRequestTTL": f"{args.hold_limit_s}s"}
    config: dict[str, Any] = {"apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig", "featureGates": [FLOW_CONTROL_GATE]}
    if args.mode == "aggregated":
        config["plugins"] = [{"type": "queue-scorer"}, {"type": "kv-cache-utilization-scorer"}, {"type": "prefix-cache-scorer"}]
        config["schedulingProfiles"] = [{"name": "default", "plugins": [
            {"pluginRef": "queue-scorer", "weight": 2}, {"pluginRef": "kv-cache-utilization-scorer", "weight": 2},
            {"pluginRef": "prefix-cache-scorer", "weight": 3},
        ]}]
    else:
        config["plugins"] = [
            {"type": "active-request-scorer"},
            {"name": "router-concurrency", "type": "concurrency-detector",
             "parameters": {"maxConcurrency": args.max_concurrency}},
        ]
        config["schedulingProfiles"] = [{"name": "default", "plugins": [{"pluginRef": "active-request-scorer"}]}]
        config["dataLayer"] = {"injectDefaults": False}  # the P/D router serves no vLLM metrics to scrape
        flow["saturationDetector"] = {"pluginRef": "router-concurrency"}
    config["flowControl"] = flow
    return config


CONFIG_FILE = "gpuscale.yaml"
"""Key of the EPP config in the chart's ConfigMap (``router.epp.pluginsCustomConfig``)."""


# ------------------------------------------------------------------------------------------ Envoy


SATURATED_STATUS = 429
"""What the EPP answers when replicas are up but saturated (``pkg/common/error`` ``BuildErrResponse``:
``rejected-saturated``, ``rejected-ttl-expired``): ``Retry-After`` is the time a slot takes to free."""
AT_ZERO_STATUS = 503
"""What the EPP answers with no ready endpoint (the model at zero: the queue bound reached, or the hold limit run out):
``Retry-After`` is the expected ready time from zero."""


def _retry_after_mapper(status: int, seconds: int) -> dict[str, Any]:
    return {
        "filter": {"status_code_filter": {"comparison": {
            "op": "EQ", "value": {"default_value": status, "runtime_key": f"gpuscale.front_door.retry_after_{status}"},
        }}},
        "headers_to_add": [{"header": {"key": "Retry-After", "value": str(seconds)},
                            "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"}],
    }


def _envoys_own_reply_mapper(status: int) -> dict[str, Any]:
    """Envoy's own local replies (an upstream reset, overflow or no healthy upstream) carry a response flag (``UC``,
    ``UF``, ``UO``, ``UH``...); the EPP's immediate responses carry none (ext_proc ``sendImmediateResponse`` calls
    ``sendLocalReply`` without setting one). The first matching mapper wins, so this one, which changes nothing, keeps
    the cold-start ``Retry-After`` off Envoy's own 503s. (A mapper's ``header_filter`` reads request headers, so it
    cannot match the EPP's ``x-llm-d-request-dropped-reason`` response header instead.)"""
    return {"filter": {"and_filter": {"filters": [
        {"status_code_filter": {"comparison": {
            "op": "EQ", "value": {"default_value": status, "runtime_key": f"gpuscale.front_door.envoy_own_{status}"}}}},
        {"response_flag_filter": {}},  # no flags listed: any response flag matches
    ]}}}


def local_reply_mappers(args: FrontDoorSettings) -> list[dict[str, Any]]:
    """``Retry-After`` on the EPP's refusals only, in the order Envoy tries them (the first match applies)."""
    return [
        _envoys_own_reply_mapper(AT_ZERO_STATUS),
        _retry_after_mapper(AT_ZERO_STATUS, args.retry_after_s),
        _retry_after_mapper(SATURATED_STATUS, args.retry_after_saturated_s),
    ]


def _http_connection_manager(args: FrontDoorSettings) -> dict[str, Any]:
    ext_proc = {
        "name": "envoy.filters.http.ext_proc",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor",
            "failure_mode_allow": False,
            "grpc_service": {"envoy_grpc": {"cluster_name": "ext_proc", "authority": f"localhost:{EXT_PROC_PORT}"},
                             "timeout": "10s"},
            "processing_mode": {
                "request_header_mode": "SEND", "response_header_mode": "SEND",
                "request_body_mode": "FULL_DUPLEX_STREAMED", "response_body_mode": "FULL_DUPLEX_STREAMED",
                "request_trailer_mode": "SEND", "response_trailer_mode": "SEND",
            },
            "message_timeout": f"{args.hold_limit_s + EXT_PROC_MARGIN_S}s",
        },
    }
    return {
        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
        "stat_prefix": f"http-{PROXY_PORT}",
        "route_config": {"name": "vllm", "virtual_hosts": [{"name": "vllm-default", "domains": ["*"], "routes": [{
            "match": {"prefix": "/"},
            "route": {"cluster": "original_destination_cluster", "timeout": STREAM_TIMEOUT,
                      "idle_timeout": STREAM_TIMEOUT, "upgrade_configs": [{"upgrade_type": "websocket"}]},
            "typed_per_filter_config": {"envoy.filters.http.ext_proc": {
                "@type": "type.googleapis.com/envoy.config.route.v3.FilterConfig", "config": {}}},
        }]}]},
        "http_filters": [ext_proc, {"name": "envoy.filters.http.router", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router", "suppress_envoy_headers": True}}],
        "local_reply_config": {"mappers": local_reply_mappers(args)},
        "http2_protocol_options": {"max_concurrent_streams": 100, "initial_stream_window_size": 65536,
                                   "initial_connection_window_size": 1048576},
        "use_remote_address": True,
        "normalize_path": True,
        "merge_slashes": True,
        "server_header_transformation": "PASS_THROUGH",
        "common_http_protocol_options": {"headers_with_underscores_action": "REJECT_REQUEST"},
        "path_with_escaped_slashes_action": "UNESCAPE_AND_REDIRECT",
        "access_log": [_access_log()],
    }


def _access_log() -> dict[str, Any]:
    """One JSON line per request on stdout, as the preset logs, with the status, Envoy's response flags and the EPP's
    drop reason: a 503 from the door shows why (``rejected-no-endpoints`` at the hold limit or the queue bound)."""
    fields = {"start_time": "%START_TIME%", "method": "%REQ(:METHOD)%", "path": "%REQ(:PATH)%",
              "status": "%RESPONSE_CODE%", "flags": "%RESPONSE_FLAGS%", "duration_ms": "%DURATION%",
              "dropped_reason": f"%RESP({DROPPED_REASON_HEADER})%"}
    return {"name": "envoy.access_loggers.file", "typed_config": {
        "@type": "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog",
        "path": "/dev/stdout", "log_format": {"json_format": fields}}}


def _listener(name: str, port: int, hcm: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "address": {"socket_address": {"address": "0.0.0.0", "port_value": port}},
        "additional_addresses": [{"address": {"socket_address": {"address": "::", "port_value": port}}}],
        **extra,
        "filter_chains": [{"name": name, "filters": [
            {"name": "envoy.filters.network.http_connection_manager", "typed_config": hcm}]}],
    }


def _ready_listener() -> dict[str, Any]:
    hcm = {
        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
        "stat_prefix": "envoy-ready-http",
        "route_config": {"name": "local_route", "virtual_hosts": [{"name": "prometheus_stats", "domains": ["*"], "routes": [
            {"match": {"prefix": "/stats/prometheus"}, "route": {"cluster": "prometheus_stats"}},
        ]}]},
        "http_filters": [
            {"name": "envoy.filters.http.health_check", "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.health_check.v3.HealthCheck",
                "pass_through_mode": False, "headers": [{"name": ":path", "string_match": {"exact": "/ready"}}]}},
            {"name": "envoy.filters.http.router", "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}},
        ],
    }
    return _listener(f"envoy-proxy-ready-0.0.0.0-{ENVOY_READY_PORT}", ENVOY_READY_PORT, hcm)


def _static_cluster(name: str, address: str, port: int) -> dict[str, Any]:
    return {"cluster_name": name, "endpoints": [{"lb_endpoints": [
        {"endpoint": {"address": {"socket_address": {"address": address, "port_value": port}}}},
    ]}]}


def envoy_bootstrap(args: FrontDoorSettings) -> dict[str, Any]:
    """The chart's standalone Envoy preset (sidecar, TLS to the EPP as ``secure-serving`` defaults to on), with the
    ``Retry-After`` mapper, the hold-limit ``message_timeout`` and fail-closed ext_proc (module docstring)."""
    limits = {"max_connections": 40000, "max_pending_requests": 40000, "max_requests": 40000}
    return {
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": ENVOY_ADMIN_PORT}}},
        "static_resources": {
            "listeners": [
                _ready_listener(),
                _listener("vllm", PROXY_PORT, _http_connection_manager(args), per_connection_buffer_limit_bytes=32768),
            ],
            "clusters": [
                {"name": "prometheus_stats", "type": "STATIC", "connect_timeout": "0.250s",
                 "load_assignment": _static_cluster("prometheus_stats", "127.0.0.1", ENVOY_ADMIN_PORT)},
                {"name": "original_destination_cluster", "type": "ORIGINAL_DST", "connect_timeout": "1000s",
                 "lb_policy": "CLUSTER_PROVIDED", "circuit_breakers": {"thresholds": [limits]},
                 "original_dst_lb_config": {"use_http_header": True, "http_header_name": "x-gateway-destination-endpoint"}},
                {"name": "ext_proc", "type": "STATIC", "connect_timeout": "86400s", "lb_policy": "LEAST_REQUEST",
                 "circuit_breakers": {"thresholds": [{**limits, "max_retries": 1024}]},
                 "health_checks": [{"timeout": "2s", "interval": "10s", "unhealthy_threshold": 3, "healthy_threshold": 2,
                                    "reuse_connection": True,
                                    "grpc_health_check": {"service_name": "envoy.service.ext_proc.v3.ExternalProcessor"},
                                    "tls_options": {"alpn_protocols": ["h2"]}}],
                 "transport_socket": {"name": "envoy.transport_sockets.tls", "typed_config": {
                     "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
                     "common_tls_context": {"validation_context": {}}}},
                 "typed_extension_protocol_options": {"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                     "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                     "explicit_http_config": {"http2_protocol_options": {
                         "initial_stream_window_size": 65536, "initial_connection_window_size": 1048576}}}},
                 "load_assignment": _static_cluster("ext_proc", "127.0.0.1", EXT_PROC_PORT)},
            ],
        },
    }


# ------------------------------------------------------------------------------------------ chart, Service, KEDA


def chart_values(args: FrontDoorSettings) -> dict[str, Any]:
    """``llm-d-router-standalone`` values: standalone EPP (no InferencePool) on the pinned image, flow control from
    ``epp_config``, the Envoy sidecar from ``envoy_bootstrap``, the chart's ServiceMonitor (metrics auth kept on) at
    the door's poll interval, and small CPU requests (the chart's 8-CPU EPP is sized for large pools)."""
    epp = versions.LLM_D_ROUTER_EPP
    registry, _, repository = epp.repository.partition("/")
    envoy = envoy_config_map_name(args.model)
    return {
        "router": {
            "inferencePool": {"create": False},
            "modelServers": {"matchLabels": dict(args.endpoint_labels), "targetPorts": [{"number": HTTP_PORT}]},
            "epp": {
                "replicas": args.replicas,
                "image": {"registry": registry, "repository": repository, "tag": epp.tag, "pullPolicy": "IfNotPresent"},
                "pluginsConfigFile": CONFIG_FILE,
                "pluginsCustomConfig": {CONFIG_FILE: yaml.safe_dump(epp_config(args), sort_keys=False)},
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "4Gi"}},
                # on-demand, one EPP per node (``gpuscale.manifests.entry_point``); the chart has no nodeSelector key
                "affinity": entry_point.affinity(epp_selector(args.model)),
            },
            "proxy": {
                "enabled": True,
                "proxyType": "envoy",
                "mode": "sidecar",
                "failOpen": False,
                "image": versions.LLM_D_ROUTER_ENVOY.ref,
                "configMap": {"name": envoy, "data": {"envoy.yaml": yaml.safe_dump(envoy_bootstrap(args), sort_keys=False)}},
                "volumes": [{"name": "config", "configMap": {"name": envoy, "items": [{"key": "envoy.yaml", "path": "envoy.yaml"}]}}],
                "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "2Gi"}},
            },
            "monitoring": {
                "interval": f"{args.poll_s}s",
                "prometheus": {"enabled": True, "auth": {"enabled": True, "secretName": metrics_secret_name(args.model)}},
            },
        },
    }


def service_body(args: FrontDoorSettings) -> dict[str, Any]:
    """``<model>:8000``, the URL clients already use, in front of the door's Envoy."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": args.model,
            "namespace": args.namespace,
            "labels": {labels.MANAGED_BY_LABEL: labels.MANAGED_BY, labels.MODEL_LABEL: args.model,
                       "app.kubernetes.io/component": "front-door"},
        },
        "spec": {
            "type": "ClusterIP",
            "selector": epp_selector(args.model),
            "ports": [{"name": "http", "port": HTTP_PORT, "targetPort": PROXY_PORT, "protocol": "TCP"}],
        },
    }


def queue_matchers(model: str, namespace: str) -> tuple[tuple[str, str, str], ...]:
    """The door's EPP series of ``model`` (the ServiceMonitor's series carry the Service name as ``service``)."""
    return (("namespace", "=", namespace), ("service", "=", epp_name(model)))


def queue_query(model: str, namespace: str) -> str:
    """Requests held at the door of ``model``, 0 when the EPP reports no queue (``gpuscale.signals.front_door_queue``)."""
    door = FrontDoorQueue(metric=QUEUE_METRIC, target=1.0, name=TRIGGER_NAME, why="")
    return door.expr(queue_matchers(model, namespace)).render()


def pdb_body(args: FrontDoorSettings) -> dict[str, Any]:
    """No voluntary eviction takes the last Ready EPP (the chart ships no PDB; ``entry_point.pdb_body``)."""
    return entry_point.pdb_body(epp_name(args.model), args.namespace, service_body(args)["metadata"]["labels"],
                                epp_selector(args.model))


def objects(args: FrontDoorSettings) -> list[dict[str, Any]]:
    """The objects gpuscale builds itself (the rest comes from the chart)."""
    return [service_body(args), pdb_body(args)]

