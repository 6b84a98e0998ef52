"""Pure builders for the vLLM serving layer: container args, pod templates, workloads, Service, PDB, PodMonitor.

One role (``aggregated``, or ``prefill`` and ``decode``) is one workload: a ``Deployment`` when a replica is one pod,
a ``LeaderWorkerSet`` of ``size = pods`` (one pod per node, gang-scheduled by KAI's podgrouper) when it spans nodes.
Replicas are never set: the role's autoscaler owns them (the cdk8s ``IScalable`` rule, style C8).

Facts: ``research/serving-facts.md`` section 1 (vLLM v0.33 flags, Run:ai streamer, NixlConnector, ``--shutdown-timeout``,
``/health``), ``research/upstream-facts.md`` section 4 (LWS) and 5 (PodMonitor).
"""

from __future__ import annotations

import json
import math
from typing import Any, Literal

from pydantic import Field, model_validator

from gpuscale import labels, versions
from gpuscale.manifests import cold_start
from gpuscale.manifests.kai_wiring import KaiPodWiring, kai_pod_wiring
from gpuscale.manifests.karpenter import efa_devices_per_pod
from gpuscale.manifests.namespaces import WorkloadNamespace
from gpuscale.sizing import ModelSizing, PlatformSizing, ReplicaShape
from gpuscale.spec.base import Spec
from gpuscale.spec.catalogue import CATALOGUE, GpuInstanceType
from gpuscale.spec.model import ModelDeployment, Role, WeightsSpec
from gpuscale.spec.platform import PlatformSpec

HTTP_PORT = 8000
"""vLLM's OpenAI API, ``/health`` and ``/metrics`` all listen here."""
NIXL_SIDE_CHANNEL_PORT = 5600
"""NIXL handshake port (``VLLM_NIXL_SIDE_CHANNEL_PORT`` default); one engine per pod, so no clash."""
PRESTOP_SLEEP_S = 15
"""Time for EndpointSlices, kube-proxy and the P/D router's pod watch to drop a terminating pod before SIGTERM."""
ENGINE_EXIT_MARGIN_S = 15
"""Engine teardown after the drain (free GPU memory, close NCCL/NIXL) before the kubelet's SIGKILL."""
STARTUP_PROBE_PERIOD_S = 10
MIN_STARTUP_BUDGET_S = 600
"""Never give a replica less than 10 minutes to load weights and start the engine."""
MODELS_MOUNT = "/models"
HF_CACHE_MOUNT = "/root/.cache/huggingface"
"""``HF_HOME`` of the vllm/vllm-openai image (runs as root)."""
HOST_SHARE = 0.8
"""Fraction of a node's vCPU and memory (per GPU share) a replica requests; the rest is kubelet and DaemonSets."""
NIXL_EFA_BACKENDS = ["LIBFABRIC"]
"""NIXL backends on EFA pools: ``kv_connector_extra_config.backends`` (vLLM v0.33.0 ``nixl/base_worker.py`` reads it,
default ``["UCX"]``); NIXL's ``LIBFABRIC`` plugin (ai-dynamo/nixl ``src/plugins/libfabric``) picks libfabric's ``efa``
provider when present."""

WorkloadKind = Literal["Deployment", "LeaderWorkerSet"]


class WorkloadRef(Spec):
    """The ``scaleTargetRef`` of one role's workload."""

    api_version: str
    kind: WorkloadKind
    name: str


class DrainTiming(Spec):
    """Graceful-drain numbers of one model, seconds."""

    prestop_sleep_s: int
    """``preStop`` sleep: the pod leaves every load balancer before vLLM hears SIGTERM."""
    shutdown_timeout_s: int
    """vLLM ``--shutdown-timeout``: stop admission, wait this long for in-flight requests (= SLO request timeout)."""
    termination_grace_period_s: int
    """Pod ``terminationGracePeriodSeconds`` = preStop + shutdown timeout + engine exit margin."""


class ServingSettings(Spec):
    """Everything one model's serving layer needs, as plain values: the model, its sizing and its KAI wiring.

    ``namespace``, ``image`` and ``instance`` default to the model's ``serving.namespace``, ``serving.image`` and the
    sized instance type. ``gpuscale.components.VllmService`` builds one with its resolved Inputs (e.g. a namespace that
    is another resource's Output) and hands it to the builders below.
    """

    model: ModelDeployment
    """The served model (name, weights, serving mode, SLO, node pool)."""
    sizing: ModelSizing
    """Its derived numbers: replica shape, cold start, per-role autoscaler settings."""
    wiring: dict[Role, KaiPodWiring]
    """Layer 2 KAI wiring per role (scheduler, leaf queue, priority class, topology, affinity)."""
    namespace: WorkloadNamespace = Field(
        default_factory=lambda data: data["model"].serving.namespace, validate_default=True,
    )
    """Namespace of every object (default ``model.serving.namespace``)."""
    image: str = Field(default_factory=lambda data: data["model"].serving.image)
    """vLLM image (default ``model.serving.image``, the pinned release)."""
    instance: GpuInstanceType = Field(default_factory=lambda data: CATALOGUE[data["sizing"].shape.instance_type])
    """Instance type the replica is sized for; pod CPU/memory requests are a share of it (default the sized one)."""
    aws_region: str | None = None
    """Region for the S3 streamer's AWS SDK client (``AWS_REGION``); needed for ``s3://`` weights only."""
    scrape_interval_s: int = 15
    """PodMonitor scrape interval (``observability.scrape_interval_s``)."""
    tags: dict[str, str] = Field(default_factory=dict)
    """Tags for the AWS resources the service creates (weights-reader IAM role)."""
    efa_devices: int = Field(default=0, ge=0)
    """``vpc.amazonaws.com/efa`` devices per pod (its share of the node's EFA interfaces); 0 off EFA pools."""

    @model_validator(mode="after")
    def _consistent(self) -> ServingSettings:
        if self.sizing.model != self.model.name:
            raise ValueError(f"sizing is for model {self.sizing.model!r}, not {self.model.name!r}")
        missing = [r for r in self.model.serving.roles if r not in self.wiring]
        if missing:
            raise ValueError(f"wiring is missing role(s) {missing} of model {self.model.name}")
        if self.instance.name != self.sizing.shape.instance_type:
            raise ValueError(f"instance {self.instance.name} is not the sized one ({self.sizing.shape.instance_type})")
        return self

    @classmethod
    def from_platform(cls, spec: PlatformSpec, sizing: PlatformSizing, model_name: str) -> ServingSettings:
        model = next(m for m in spec.models if m.name == model_name)
        ms = sizing.model(model_name)
        return cls(
            model=model,
            sizing=ms,
            wiring=kai_role_wiring(spec, model, ms.shape),
            aws_region=spec.environment.aws_region,
            scrape_interval_s=spec.observability.scrape_interval_s,
            tags=spec.environment.tags,
            efa_devices=efa_devices_per_pod(spec.topology.pool(model.node_pool), ms.shape.instance_type, ms.shape.gpus_per_pod),
        )

    @property
    def shape(self) -> ReplicaShape:
        return self.sizing.shape


def kai_role_wiring(spec: PlatformSpec, model: ModelDeployment, shape: ReplicaShape) -> dict[Role, KaiPodWiring]:
    """The KAI wiring of each of the model's roles."""
    return {role: kai_pod_wiring(spec, model, role, shape) for role in model.serving.roles}


# ---------------------------------------------------------------- names and labels


def workload_name(model: str, role: Role) -> str:
    """Name of one role's workload, PDB, PodMonitor and autoscaler: ``<model>-<role>``."""
    return f"{model}-{role}"


def service_name(model: str, role: Role, *, behind_door: bool = False) -> str:
    """The aggregated role's Service is the model's entry point ``<model>``; P/D roles get ``<model>-<role>``
    and the router owns ``<model>``, so clients keep one URL when the serving mode changes. Behind a front door the
    door's Service is ``<model>`` and the aggregated role's becomes ``<model>-aggregated``."""
    return model if role == "aggregated" and not behind_door else workload_name(model, role)


def router_service_name(model: str, *, behind_door: bool = False) -> str:
    """The P/D router's Service: ``<model>``, the client entry point, unless a front door owns that name (then
    ``<model>-pd``)."""
    return f"{model}-pd" if behind_door else model


def service_account_name(model: str) -> str:
    return f"{model}-vllm"


def endpoint_url(service: str, namespace: str) -> str:
    """In-cluster URL of a model's entry-point Service (the aggregated Service or the P/D router's)."""
    return f"http://{service}.{namespace}.svc.cluster.local:{HTTP_PORT}"


def selector_labels(model: str, role: Role) -> dict[str, str]:
    """The immutable selector of one role: exactly this model's pods of exactly this role."""
    return {labels.MODEL_LABEL: model, labels.ROLE_LABEL: role}


def common_labels(model: str, component: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "vllm",
        "app.kubernetes.io/instance": model,
        "app.kubernetes.io/component": component,
        labels.MANAGED_BY_LABEL: labels.MANAGED_BY,
    }


def workload_ref(model: str, role: Role, shape: ReplicaShape) -> WorkloadRef:
    if shape.multi_node:
        return WorkloadRef(api_version="leaderworkerset.x-k8s.io/v1", kind="LeaderWorkerSet", name=workload_name(model, role))
    return WorkloadRef(api_version="apps/v1", kind="Deployment", name=workload_name(model, role))


def needs_lws(sizing: PlatformSizing) -> bool:
    """Whether any model spans nodes (install the LWS controller)."""
    return any(m.shape.multi_node for m in sizing.models)


def lws_chart_values() -> dict[str, Any]:
    """LWS chart: the image pinned to the chart's release (the in-repo default tag is ``main``, pull Always), no
    Volcano gang scheduling (KAI's podgrouper gangs LWS groups), no ServiceMonitor (it would need cert-manager)."""
    return {
        "image": {"manager": {"tag": f"v{versions.LWS.version}", "pullPolicy": "IfNotPresent"}},
        "gangSchedulingManagement": {},
        "enablePrometheus": False,
    }


def serving_namespaces(spec: PlatformSpec) -> list[str]:
    """Distinct model namespaces (created once by the composition root, not per model)."""
    return sorted({m.serving.namespace for m in spec.models})


# ---------------------------------------------------------------- timing


def drain_timing(model: ModelDeployment) -> DrainTiming:
    shutdown = math.ceil(model.slo.request_timeout_s)
    return DrainTiming(
        prestop_sleep_s=PRESTOP_SLEEP_S,
        shutdown_timeout_s=shutdown,
        termination_grace_period_s=PRESTOP_SLEEP_S + shutdown + ENGINE_EXIT_MARGIN_S,
    )


def startup_budget_s(sizing: ModelSizing) -> int:
    """How long the startup probe waits for ``/health``: 3x (weights + engine init), plus the image pull of the other
    nodes of a multi-node group, at least 10 minutes. The probe starts after this pod's image is pulled."""
    cold = sizing.cold_start
    budget = 3 * cold.warm_node_s + (cold.image_pull_s if sizing.shape.multi_node else 0.0)
    return max(MIN_STARTUP_BUDGET_S, math.ceil(budget))


# ---------------------------------------------------------------- container


def kv_cache_dtype(model: ModelDeployment) -> str:
    """``--kv-cache-dtype``: ``fp8`` for an FP8 cache, else ``auto`` (the model dtype)."""
    return "fp8" if model.architecture.kv_cache_precision == "fp8" else "auto"


def model_source(weights: WeightsSpec, gpus: int) -> tuple[str, list[str]]:
    """The positional model argument and the loader flags for the weights' scheme."""
    scheme, _, rest = weights.uri.partition("://")
    if scheme == "s3":
        extra = ["--load-format", "runai_streamer"]
        if gpus > 1:  # each rank streams its own shard instead of rank 0 reading everything
            extra += ["--model-loader-extra-config", json.dumps({"distributed": True}, separators=(",", ":"))]
        return weights.uri, extra
    if scheme == "hf":
        return rest.strip("/"), []
    _claim, _, path = rest.strip("/").partition("/")
    return f"{MODELS_MOUNT}/{path}".rstrip("/"), []


def pvc_claim(weights: WeightsSpec) -> str | None:
    if weights.scheme != "pvc":
        return None
    return weights.uri.partition("://")[2].strip("/").split("/", 1)[0]


def kv_transfer_config(role: Role, efa: bool = False) -> dict[str, Any] | None:
    """NixlConnector config for a P/D role (vLLM v0.33 ``KVTransferConfig``); ``None`` for aggregated serving.

    ``kv_role`` producer/consumer: the NIXL worker reads it (it refuses a ``kv_consumer`` with pipeline parallelism,
    which sizing therefore never emits). ``fail``: a lost KV transfer errors the request instead of silently recomputing
    the prefill on the decode pod (the docs warn against ``recompute`` in production). On EFA pools NIXL uses the
    ``LIBFABRIC`` backend; UCX (the default) would move the KV cache over TCP.
    """
    if role == "aggregated":
        return None
    config: dict[str, Any] = {
        "kv_connector": "NixlConnector",
        "kv_role": "kv_producer" if role == "prefill" else "kv_consumer",
        "kv_load_failure_policy": "fail",
    }
    if efa:
        config["kv_connector_extra_config"] = {"backends": list(NIXL_EFA_BACKENDS)}
    return config


def vllm_args(args: ServingSettings, role: Role, node_rank: int | str | None = None) -> list[str]:
    """``vllm serve`` arguments for one role, every number from sizing and the spec.

    ``node_rank`` is set for the pods of a multi-node replica: ``0`` for the LWS leader, ``$(LWS_WORKER_INDEX)``
    for workers (which then run ``--headless``: no API server, engine ranks only).
    """
    m, shape = args.model, args.shape
    model_arg, loader = model_source(m.weights, shape.gpus)
    out = [
        model_arg,
        "--served-model-name", m.name,
        "--port", str(HTTP_PORT),
        "--tensor-parallel-size", str(shape.tensor_parallel_size),
        "--pipeline-parallel-size", str(shape.pipeline_parallel_size),
        "--max-model-len", str(m.architecture.max_context_tokens),
        "--gpu-memory-utilization", f"{m.serving.gpu_memory_utilization:g}",
        "--kv-cache-dtype", kv_cache_dtype(m),
        "--shutdown-timeout", str(drain_timing(m).shutdown_timeout_s),
        *loader,
    ]
    if m.serving.max_num_seqs is not None:
        out += ["--max-num-seqs", str(m.serving.max_num_seqs)]
    kv = kv_transfer_config(role, efa=args.efa_devices > 0)
    if kv is not None:
        out += ["--kv-transfer-config", json.dumps(kv, sort_keys=True, separators=(",", ":"))]
    if shape.multi_node:
        if node_rank is None:
            raise ValueError(f"model {m.name}: a {shape.pods}-pod replica needs node_rank for each pod")
        out += [
            "--distributed-executor-backend", "mp",
            "--nnodes", str(shape.pods),
            "--node-rank", str(node_rank),
            "--master-addr", "$(LWS_LEADER_ADDRESS)",
        ]
        if str(node_rank) != "0":
            out.append("--headless")
    return out


def efa_image_warnings(args: ServingSettings) -> list[str]:
    """What EFA needs from the image that gpuscale cannot check: the libfabric EFA provider (NIXL's ``LIBFABRIC``
    backend moves P/D KV caches over it) and, for replicas spanning nodes, the aws-ofi-nccl plugin (without it NCCL
    uses TCP sockets and the EFA devices sit idle, with no error). Nothing read here shows the pinned
    ``vllm/vllm-openai`` image shipping either (``docs/upstream-readings.md``, items 12-13: vLLM issue #55635 asks for
    it), so a model on EFA with the pinned image gets a ``warning:`` at synth (``VllmService`` logs these)."""
    if args.efa_devices == 0 or args.image != versions.VLLM.ref:
        return []
    m = args.model
    uses = []
    if m.serving.mode == "disaggregated":
        uses.append("NIXL's LIBFABRIC backend for the P/D KV transfer needs libfabric with its EFA provider")
    if args.shape.multi_node:
        uses.append("NCCL between the nodes of a replica needs the aws-ofi-nccl plugin (else it falls back to TCP)")
    if not uses:
        return []
    return [
        f"{m.name}: runs on EFA with the stock image {args.image}, which is not known to ship the EFA userspace: "
        f"{'; '.join(uses)}. Set serving.image to a build with the AWS EFA userspace (libfabric, its EFA provider and "
        "aws-ofi-nccl) on the default library path: gpuscale runs `vllm serve` as the command, so an image ENTRYPOINT "
        "that sets LD_LIBRARY_PATH is skipped. Check a pod with `fi_info -p efa` and NCCL_DEBUG=INFO (\"NET/OFI\")."
    ]


EFA_HUGE_PAGE_ENV = "FI_EFA_USE_HUGE_PAGE"
"""Off on EFA pods, which request no ``hugepages-2Mi`` (issue 22, item 10; ``docs/upstream-readings.md``). Karpenter
cannot provision for a pod that requests huge pages: no instance type it models has a ``hugepages-2Mi`` capacity
(aws/karpenter-provider-aws#3315, kubernetes-sigs/karpenter#751), so AWS's EFA samples' ``hugepages-2Mi: 5120Mi``
would leave every EFA pod Pending. Without a request the pod's hugetlb cgroup limit is 0, so the EFA provider's
huge-page buffer pools (on by default) could only fail; with this off, libfabric allocates them from ordinary pages
(``prov/util/src/util_buf.c`` falls back the same way when ``MAP_HUGETLB`` fails), at a small cost on its internal
bounce buffers only: KV and NCCL payloads go GPU to GPU."""


def vllm_env(args: ServingSettings, role: Role) -> list[dict[str, Any]]:
    m = args.model
    env: list[dict[str, Any]] = []
    if m.weights.hf_token_secret is not None:
        ref = m.weights.hf_token_secret
        env.append({"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}}})
    if m.weights.scheme == "s3" and args.aws_region:
        env.append({"name": "AWS_REGION", "value": args.aws_region})
    if role != "aggregated":
        # the decode side dials the prefill pod's advertised host; localhost (the default) only works on one machine
        env.append({"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
        env.append({"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": str(NIXL_SIDE_CHANNEL_PORT)})
    if args.efa_devices > 0:
        # libfabric's provider filter: use EFA or fail loudly, never fall back to its tcp provider unnoticed
        env.append({"name": "FI_PROVIDER", "value": "efa"})
        env.append({"name": EFA_HUGE_PAGE_ENV, "value": "0"})
    return env + cold_start.compile_cache_env(m)


def gpu_quantity(shape: ReplicaShape) -> dict[str, str]:
    return {labels.GPU_RESOURCE: str(shape.gpus_per_pod)}


def resources(args: ServingSettings) -> dict[str, Any]:
    """GPU requests = limits = GPUs per pod; CPU and memory a share of the node, requested but not limited (a CPU
    limit throttles tokenisation; a memory limit would count /dev/shm and streamer buffers and OOM-kill a load)."""
    share = args.shape.gpus_per_pod / args.instance.gpus_per_node
    cpu = max(1, math.floor(args.instance.vcpus * share * HOST_SHARE))
    mem = max(4, math.floor(args.instance.memory_gib * share * HOST_SHARE))
    devices = gpu_quantity(args.shape)
    if args.efa_devices:
        devices[labels.EFA_RESOURCE] = str(args.efa_devices)  # extended resources: requests = limits
    return {"requests": {"cpu": str(cpu), "memory": f"{mem}Gi", **devices}, "limits": dict(devices)}


def shm_size_gib(shape: ReplicaShape) -> int:
    return max(4, 2 * shape.gpus_per_pod)


def http_probe(period: int, timeout: int, failures: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": "/health", "port": "http"},
        "periodSeconds": period,
        "timeoutSeconds": timeout,
        "failureThreshold": failures,
    }


def probes(sizing: ModelSizing) -> dict[str, dict[str, Any]]:
    """``/health`` answers only after weights load and the engine starts, so the startup probe carries the whole load
    time; readiness turns 503 while draining; liveness restarts a dead engine (the kubelet stops liveness on delete)."""
    return {
        "startupProbe": http_probe(STARTUP_PROBE_PERIOD_S, 5, math.ceil(startup_budget_s(sizing) / STARTUP_PROBE_PERIOD_S)),
        "readinessProbe": http_probe(10, 5, 3),
        "livenessProbe": http_probe(15, 10, 4),
    }


def container_security_context(efa: bool = False) -> dict[str, Any]:
    """No privilege escalation, every capability dropped; on EFA pools ``IPC_LOCK`` back, because RDMA pins (locks)
    the memory it registers with the EFA device."""
    caps: dict[str, list[str]] = {"drop": ["ALL"]}
    if efa:
        caps["add"] = ["IPC_LOCK"]
    return {"allowPrivilegeEscalation": False, "capabilities": caps}


def vllm_container(args: ServingSettings, role: Role, pod: Literal["single", "leader", "worker"]) -> dict[str, Any]:
    """The vLLM container of one pod. Workers of a multi-node group run engine ranks only: no HTTP port, no probes,
    and a longer preStop so they outlive the leader's drain (SIGTERM to a worker would kill in-flight requests)."""
    drain = drain_timing(args.model)
    rank: int | str | None = None if pod == "single" else (0 if pod == "leader" else "$(LWS_WORKER_INDEX)")
    container: dict[str, Any] = {
        "name": "vllm",
        "image": args.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["vllm", "serve"],
        "args": vllm_args(args, role, rank),
        "env": vllm_env(args, role),
        "resources": resources(args),
        "securityContext": container_security_context(efa=args.efa_devices > 0),
        "volumeMounts": volume_mounts(args),
    }
    if pod == "worker":
        sleep = drain.prestop_sleep_s + drain.shutdown_timeout_s
        container["lifecycle"] = {"preStop": {"exec": {"command": ["sleep", str(sleep)]}}}
        return container
    ports = [{"name": "http", "containerPort": HTTP_PORT, "protocol": "TCP"}]
    if role != "aggregated":
        ports.append({"name": "nixl", "containerPort": NIXL_SIDE_CHANNEL_PORT, "protocol": "TCP"})
    container["ports"] = ports
    container.update(probes(args.sizing))
    container["lifecycle"] = {"preStop": {"exec": {"command": ["sleep", str(drain.prestop_sleep_s)]}}}
    return container


def volumes(args: ServingSettings) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        # NCCL and vLLM's multiprocessing queues use /dev/shm; the runtime default (64 MiB) is far too small
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{shm_size_gib(args.shape)}Gi"}},
    ]
    claim = pvc_claim(args.model.weights)
    if claim is not None:
        out.append({"name": "models", "persistentVolumeClaim": {"claimName": claim, "readOnly": True}})
    if args.model.weights.scheme == "hf":
        out.append(cold_start.weights_cache_volume(args.model, f"{math.ceil(args.sizing.weights_gib * 1.2) + 5}Gi"))
    return out + cold_start.compile_cache_volumes(args.model)


def volume_mounts(args: ServingSettings) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    if args.model.weights.scheme == "pvc":
        out.append({"name": "models", "mountPath": MODELS_MOUNT, "readOnly": True})
    if args.model.weights.scheme == "hf":
        out.append({"name": "hf-cache", "mountPath": HF_CACHE_MOUNT})
    return out + cold_start.compile_cache_mounts(args.model)


# ---------------------------------------------------------------- pod template and workloads


def gpu_toleration() -> dict[str, str]:
    """Tolerates exactly the taint every GPU NodePool carries (``nvidia.com/gpu=true:NoSchedule``)."""
    return {
        "key": labels.GPU_TAINT_KEY,
        "operator": "Equal",
        "value": labels.GPU_TAINT_VALUE,
        "effect": labels.GPU_TAINT_EFFECT,
    }


def pod_labels(args: ServingSettings, role: Role) -> dict[str, str]:
    wiring = args.wiring[role]
    return {**common_labels(args.model.name, role), **wiring.pod_labels, **selector_labels(args.model.name, role)}


def pod_annotations(args: ServingSettings, role: Role) -> dict[str, str]:
    # no karpenter.sh/do-not-disrupt: it would block drift (AMI rollouts) on every node with a serving pod forever;
    # the role's PDB holds its ready floor instead, and GPU pools consolidate only empty nodes
    return dict(args.wiring[role].pod_annotations)


def pod_template(args: ServingSettings, role: Role, pod: Literal["single", "leader", "worker"] = "single") -> dict[str, Any]:
    wiring = args.wiring[role]
    drain = drain_timing(args.model)
    grace = drain.termination_grace_period_s + (drain.prestop_sleep_s if pod == "worker" else 0)
    spec: dict[str, Any] = {
        "schedulerName": wiring.scheduler_name,
        "priorityClassName": wiring.priority_class_name,
        "serviceAccountName": service_account_name(args.model.name),
        "automountServiceAccountToken": False,  # vLLM never calls the Kubernetes API (Pod Identity mounts its own token)
        "enableServiceLinks": False,  # a Service named e.g. "vllm" would inject VLLM_PORT=tcp://... and break vLLM
        "nodeSelector": {labels.NODE_POOL_LABEL: args.model.node_pool},
        "tolerations": [gpu_toleration()],
        "terminationGracePeriodSeconds": grace,
        "containers": [vllm_container(args, role, pod)],
        "volumes": volumes(args),
    }
    if wiring.affinity is not None:
        spec["affinity"] = wiring.affinity
    return {"metadata": {"labels": pod_labels(args, role), "annotations": pod_annotations(args, role)}, "spec": spec}


def object_meta(args: ServingSettings, name: str, role: Role, extra_labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": args.namespace,
        "labels": {**common_labels(args.model.name, role), **selector_labels(args.model.name, role), **(extra_labels or {})},
    }


def workload_meta(args: ServingSettings, role: Role) -> dict[str, Any]:
    """Deployment/LWS metadata: KAI's podgrouper reads queue, preemptibility and topology from this top owner."""
    wiring = args.wiring[role]
    meta = object_meta(args, workload_name(args.model.name, role), role, wiring.workload_labels)
    if wiring.workload_annotations:
        meta["annotations"] = dict(wiring.workload_annotations)
    return meta


def deployment_body(args: ServingSettings, role: Role) -> dict[str, Any]:
    """A single-pod-replica role. ``replicas`` is left unset: the role's autoscaler owns it."""
    if args.shape.multi_node:
        raise ValueError(f"model {args.model.name}: a {args.shape.pods}-pod replica needs a LeaderWorkerSet, not a Deployment")
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": workload_meta(args, role),
        "spec": {
            "selector": {"matchLabels": selector_labels(args.model.name, role)},
            # surge, never drop below the serving count: a new replica is up before an old one drains
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "progressDeadlineSeconds": args.sizing.rollout_deadline_s,
            "revisionHistoryLimit": 3,
            "template": pod_template(args, role),
        },
    }


def leader_worker_set_body(args: ServingSettings, role: Role) -> dict[str, Any]:
    """A multi-node role: one LWS group per replica, ``size`` = pods (one pod per node). KAI's podgrouper makes one
    PodGroup per group with ``minMember = size``, so a replica starts whole or not at all. ``replicas`` stays unset."""
    if not args.shape.multi_node:
        raise ValueError(f"model {args.model.name}: a one-pod replica is a Deployment, not a LeaderWorkerSet")
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": workload_meta(args, role),
        "spec": {
            # LeaderCreated: KAI gangs the whole group (LeaderReady would place the leader alone and hold its GPUs)
            "startupPolicy": args.wiring[role].lws_startup_policy or "LeaderCreated",
            "rolloutStrategy": {"type": "RollingUpdate", "rollingUpdateConfiguration": {"maxSurge": 1, "maxUnavailable": 0}},
            "leaderWorkerTemplate": {
                "size": args.shape.pods,
                # a lost rank breaks the whole tensor/pipeline group: restart it as one
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": pod_template(args, role, "leader"),
                "workerTemplate": pod_template(args, role, "worker"),
            },
        },
    }


def workload_body(args: ServingSettings, role: Role) -> dict[str, Any]:
    return leader_worker_set_body(args, role) if args.shape.multi_node else deployment_body(args, role)


def serving_selector(args: ServingSettings, role: Role) -> dict[str, str]:
    """Pods that answer HTTP for a role: all of them, or only LWS leaders (workers run engine ranks only)."""
    sel = selector_labels(args.model.name, role)
    if args.shape.multi_node:
        sel[labels.LWS_WORKER_INDEX_LABEL] = "0"
    return sel


def service_body(args: ServingSettings, role: Role) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_meta(args, service_name(args.model.name, role, behind_door=args.model.has_front_door), role),
        "spec": {
            "type": "ClusterIP",
            "selector": serving_selector(args, role),
            "ports": [{"name": "http", "port": HTTP_PORT, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def pdb_body(args: ServingSettings, role: Role) -> dict[str, Any]:
    """The role's ready floor (``RoleSizing.pdb_min_available``, in pods: replicas x pods per replica): a drain or a
    drift evicts a pod only while the other replicas keep the floor, so a role with a warm minimum is never evicted to
    zero (with one replica, its node waits until the autoscaler adds a second). A role that may scale to zero gets
    ``maxUnavailable: 1``. ``AlwaysAllow`` lets a drain evict a pod that is not Ready anyway (crash-looping, still
    loading) instead of blocking on it."""
    floor = args.sizing.role(role).pdb_min_available
    budget: dict[str, Any] = {"minAvailable": floor * args.shape.pods} if floor else {"maxUnavailable": 1}
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": object_meta(args, workload_name(args.model.name, role), role),
        "spec": {
            **budget,
            "selector": {"matchLabels": selector_labels(args.model.name, role)},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }


def pod_monitor_body(args: ServingSettings, role: Role) -> dict[str, Any]:
    """Scrapes ``/metrics`` of the role's serving pods. ``podTargetLabels`` copies the model and role pod labels onto
    every series (as ``gpuscale_io_model`` / ``gpuscale_io_role``), which is what autoscaler queries select on."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": object_meta(args, workload_name(args.model.name, role), role),
        "spec": {
            "selector": {"matchLabels": serving_selector(args, role)},
            "podTargetLabels": [labels.MODEL_LABEL, labels.ROLE_LABEL],
            "podMetricsEndpoints": [{"port": "http", "path": "/metrics", "interval": f"{args.scrape_interval_s}s"}],
        },
    }


def service_account_body(args: ServingSettings) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {
            "name": service_account_name(args.model.name),
            "namespace": args.namespace,
            "labels": common_labels(args.model.name, "vllm"),
        },
        "automountServiceAccountToken": False,
    }


def role_objects(args: ServingSettings, role: Role) -> list[dict[str, Any]]:
    """Every Kubernetes object of one role, in apply order."""
    return [workload_body(args, role), service_body(args, role), pdb_body(args, role), pod_monitor_body(args, role)]


# ---------------------------------------------------------------- weights access (IAM)


def aws_partition(region: str) -> str:
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    if region.startswith("cn-"):
        return "aws-cn"
    return "aws"


def weights_read_policy(uri: str, region: str) -> dict[str, Any]:
    """Least-privilege IAM policy for streaming one model from S3: read its prefix, list only under it."""
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    prefix = prefix.strip("/")
    part = aws_partition(region)
    objects = f"arn:{part}:s3:::{bucket}/{prefix}/*" if prefix else f"arn:{part}:s3:::{bucket}/*"
    list_stmt: dict[str, Any] = {"Sid": "ListModelPrefix", "Effect": "Allow", "Action": ["s3:ListBucket"],
                                 "Resource": f"arn:{part}:s3:::{bucket}"}
    if prefix:
        list_stmt["Condition"] = {"StringLike": {"s3:prefix": [prefix, f"{prefix}/*"]}}
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "ReadModelObjects", "Effect": "Allow", "Action": ["s3:GetObject"], "Resource": objects},
            list_stmt,
        ],
    }
