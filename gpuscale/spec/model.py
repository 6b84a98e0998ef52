"""A served model: architecture, weights, parallelism, serving mode, autoscaling, SLO and traffic."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from gpuscale import versions
from gpuscale.guardrails import autoscaler_backend, autoscaler_metrics, autoscaler_scope, warm_minimum
from gpuscale.problems import Problems, at
from gpuscale.spec.base import INT32_MAX, CronExpression, Name, Namespace, Spec, TimeZone
from gpuscale.spec.cold_start import ModelColdStartSpec
from gpuscale.spec.front_door import FrontDoorSpec
from gpuscale.spec.headroom import HeadroomSpec
from gpuscale.spec.slo import SloSpec
from gpuscale.spec.workload import WorkloadSpec
from gpuscale.upstream_bounds import HPA_STABILIZATION_WINDOW_S

Precision = Literal["bf16", "fp16", "fp8", "int8", "int4"]
KvPrecision = Literal["bf16", "fp16", "fp8"]
Role = Literal["aggregated", "prefill", "decode"]

IMAGE_REF = r"[a-z0-9][a-z0-9._/-]*(:[0-9]+/[a-z0-9._/-]+)?(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?"
"""A container image reference: ``[registry[:port]/]repository[:tag][@sha256:digest]``."""


def image_ref(image: str) -> str:
    """``image`` if it is a container image reference, else a ``ValueError`` that shows the valid forms."""
    if not re.fullmatch(IMAGE_REF, image):
        raise ValueError(
            f"{image!r} is not a container image reference: use [registry[:port]/]repository[:tag][@sha256:digest], "
            f"e.g. {versions.VLLM.ref}"
        )
    return image


PRECISION_BYTES: dict[str, float] = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}
"""Bytes per parameter (or per KV element) of each precision."""


class ModelArchitecture(Spec):
    """The numbers of a transformer that decide memory and speed (from the model's ``config.json``)."""

    params_b: float = Field(gt=0, le=100_000)
    """Total parameters, billions (Llama-3.3-70B: 70.55)."""
    weight_precision: Precision = "bf16"
    """Precision of the quantised weights; embeddings and LM head stay 16-bit."""
    kv_cache_precision: KvPrecision = "bf16"
    """KV-cache element precision (vLLM ``--kv-cache-dtype``; ``bf16`` means ``auto``)."""
    layers: int = Field(gt=0, le=10_000)
    """Transformer layers (``num_hidden_layers``)."""
    attention_heads: int = Field(gt=0, le=10_000)
    """Query heads (``num_attention_heads``); tensor parallelism must divide it."""
    kv_heads: int = Field(gt=0, le=10_000)
    """Key/value heads (``num_key_value_heads``; GQA)."""
    head_dim: int = Field(gt=0, le=100_000)
    """Per-head dimension."""
    hidden_size: int = Field(gt=0, le=1_000_000)
    """Model width; with ``vocab_size`` it gives the 16-bit embedding and LM-head parameters."""
    vocab_size: int = Field(gt=0, le=100_000_000)
    """Vocabulary size."""
    tie_word_embeddings: bool = False
    """Whether the LM head shares the embedding matrix."""
    max_context_tokens: int = Field(gt=0, le=INT32_MAX)
    """Longest sequence served (vLLM ``--max-model-len``)."""

    @model_validator(mode="after")
    def _heads(self) -> ModelArchitecture:
        if self.attention_heads % self.kv_heads:
            raise at("kv_heads", f"kv_heads ({self.kv_heads}) must divide attention_heads ({self.attention_heads})")
        if self.embedding_params_b >= self.params_b:
            raise at("vocab_size",
                f"vocab_size x hidden_size ({self.embedding_params_b:.2f} B params) exceeds params_b ({self.params_b})"
            )
        return self

    @property
    def embedding_params_b(self) -> float:
        return self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2) / 1e9


class SecretRef(Spec):
    """A key of a Kubernetes Secret; secrets are referenced, never written into config."""

    name: str = Field(pattern=r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
    """Secret name (in the model's namespace; a DNS subdomain)."""
    key: str = Field(pattern=r"^[-._a-zA-Z0-9]{1,253}$")
    """Key inside the Secret (letters, digits, ``-``, ``_``, ``.``)."""


WeightsScheme = Literal["s3", "hf", "pvc"]
_WEIGHTS_URI = re.compile(
    r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^\s]*)?"  # S3 bucket naming rules, then any key prefix
    r"|hf://[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*"  # Hugging Face org/name
    r"|pvc://[a-z0-9]([-a-z0-9.]*[a-z0-9])?(/[^\s]*)?"  # PersistentVolumeClaim name, then a path in it
)


class WeightsSpec(Spec):
    """Where weights come from: ``s3://bucket/prefix`` (Run:ai streamer), ``hf://org/name``, ``pvc://claim/path``."""

    uri: str
    """Weights location; the scheme decides the loader."""
    hf_token_secret: SecretRef | None = None
    """Hugging Face token, by Secret reference only (needed for gated ``hf://`` models)."""
    load_throughput_gib_s: float | None = Field(default=None, gt=0, le=1000)
    """Measured weight-load throughput; default by scheme (S3 streamer 3.5, PVC 1.0, HF 0.5 GiB/s)."""

    @model_validator(mode="before")
    @classmethod
    def _no_inline_secrets(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key in ("hf_token", "token", "HF_TOKEN", "password"):
                if key in data:
                    raise at(
                        key, f"'{key}' looks like an inline secret: secrets never go in config files. "
                        "Create a Kubernetes Secret and reference it with hf_token_secret: {name: ..., key: ...}"
                    )
        return data

    @field_validator("uri")
    @classmethod
    def _scheme(cls, uri: str) -> str:
        if not _WEIGHTS_URI.fullmatch(uri):
            raise ValueError(f"{uri!r}: use s3://bucket/prefix, hf://org/model or pvc://claim/path")
        return uri

    @property
    def scheme(self) -> WeightsScheme:
        scheme = self.uri.split("://", 1)[0]
        assert scheme in ("s3", "hf", "pvc")
        return scheme  # type: ignore[return-value]

    @property
    def throughput_gib_s(self) -> float:
        if self.load_throughput_gib_s is not None:
            return self.load_throughput_gib_s
        # perf-model.md 4.3: Run:ai streamer from S3 3.5 GiB/s; EBS gp3 ~1 GiB/s; hub downloads are slower.
        return {"s3": 3.5, "pvc": 1.0, "hf": 0.5}[self.scheme]


class ParallelismSpec(Spec):
    """Explicit parallel sizes; leave both unset to let sizing pick the smallest that fits."""

    tensor_parallel_size: int | None = Field(default=None, gt=0, le=1024)
    """GPUs in one tensor-parallel group (``--tensor-parallel-size``); must fit one NVLink domain."""
    pipeline_parallel_size: int | None = Field(default=None, gt=0, le=1024)
    """Pipeline stages (``--pipeline-parallel-size``); stages may span nodes."""
    allow_tensor_parallel_over_pcie: bool = False
    """Acknowledge running a tensor-parallel group across GPUs without NVLink (every layer all-reduces over PCIe)."""


class WakeSchedule(Spec):
    """Hours when a scale-to-zero role is held awake (a KEDA ``cron`` trigger).

    At zero replicas vLLM's gauges vanish with the last pod, so no Prometheus trigger can wake the role; a schedule is
    the wake-up signal that survives zero.
    """

    timezone: TimeZone = "UTC"
    """IANA time zone of ``start`` and ``end`` (e.g. ``Europe/London``)."""
    start: CronExpression
    """Cron expression (5 fields) when the role wakes, e.g. ``0 8 * * 1-5``."""
    end: CronExpression
    """Cron expression when it may go back to zero, e.g. ``0 19 * * 1-5``."""
    replicas: int = Field(default=1, gt=0, le=INT32_MAX)
    """Replicas held between ``start`` and ``end``."""

    @model_validator(mode="after")
    def _distinct(self) -> WakeSchedule:
        if self.start == self.end:
            raise Problems([("end", f"start and end are both {self.start!r}: the role would never be held awake")])
        return self


class RoleScalingSpec(Spec):
    """The autoscaler of one role. Unset numbers are derived by sizing and shown in the plan."""

    metric: str | None = None
    """Replaces the primary signal (a vLLM gauge, or a counter that is ``rate()``d); default ``vllm:prompt_tokens_total``
    (prefill, aggregated; queue depth stays as the burst signal) or ``vllm:kv_cache_usage_perc`` (decode)."""
    target: float | None = Field(default=None, gt=0, le=1e12)
    """Per-replica target of the primary signal; default derived by sizing (prompt tokens/s, or the KV use of the
    batch that meets the ITL target)."""
    min_replicas: int | None = Field(default=None, ge=0, le=INT32_MAX)
    """Warm minimum; default 2 (critical SLO: one keeps serving while another is replaced), 1 (standard) or 0 (best
    effort)."""
    max_replicas: int | None = Field(default=None, gt=0, le=INT32_MAX)
    """Ceiling; default what the queue limit and the NodePool GPU limit allow."""
    scale_down_stabilization_s: int | None = Field(default=None, ge=0, le=HPA_STABILIZATION_WINDOW_S.high)
    """HPA scale-down stabilisation window; default longer than the cold start. At most 3600 s (one hour), the HPA
    API's limit on ``stabilizationWindowSeconds``."""
    polling_interval_s: int = Field(default=15, gt=0, le=3600)
    """How often KEDA polls Prometheus (KEDA default 30 s; 15 s matches the HPA sync period)."""
    cooldown_s: int = Field(default=300, ge=0, le=INT32_MAX)
    """KEDA cooldown before scaling an idle workload to zero (only used when ``min_replicas`` is 0); behind a front door
    the model's ``front_door.idle_window_s`` applies to every role instead."""
    activation_threshold: float | None = Field(default=None, ge=0, le=1e12)
    """KEDA activation threshold for 0<->1; default 0 (any waiting request activates)."""
    wake_schedule: WakeSchedule | None = None
    """When the role is held awake (KEDA cron trigger); with ``min_replicas: 0`` and no front door it is the only wake-up
    signal, so it is required then."""
    target_utilisation: float | None = Field(default=None, ge=0.1, le=1.0)
    """Share of one replica's capacity at the SLO that the role's load signal targets: the autoscaler keeps
    ``1 / target_utilisation`` of the load's replicas. Default 0.7, lowered to 0.9 / burst multiplier when the
    workload's bursts are shorter than a cold start (warm headroom a burst meets with ready replicas)."""
    burst_mode: bool | None = None
    """Scale up on a short window, like Knative's panic mode: a backlog trigger (queued prefill seconds, an instant
    gauge) and a scale-up policy of +100% or +4 pods every 15 s; off: the load signal alone, +100% or +2 pods per
    minute. Default on."""
    slo_guard: bool | None = None
    """KEDA only: a trigger on vLLM's own latency histograms (mean queue time for prefill and aggregated roles, mean
    inter-token latency for decode and aggregated) with ``metricType: Value``, so the replica count grows with the
    ratio of measured to target latency whatever the traffic looks like. Default on with backend keda."""
    warm_schedule: list[WakeSchedule] = Field(default=[], max_length=24)
    """Predictive warm-up from a daily profile: hours when the role holds at least ``replicas`` (one KEDA ``cron``
    trigger each). ``gpuscale tune`` writes them when the trace shows a daily pattern."""

    @field_validator("metric")
    @classmethod
    def _metric_is_an_app_signal(cls, metric: str | None) -> str | None:
        if metric is None:
            return None
        for finding in autoscaler_metrics.banned_in(metric):
            raise ValueError(f"{metric}: {finding.message()}")
        if metric not in versions.VLLM_METRICS and metric not in versions.VLLM_RATE_METRICS:  # counters are rate()d
            known = sorted(versions.VLLM_METRICS | versions.VLLM_RATE_METRICS)
            raise ValueError(f"{metric}: not a known vLLM gauge or counter; use one of {', '.join(known)}")
        return metric

    @model_validator(mode="after")
    def _bounds(self) -> RoleScalingSpec:
        if self.min_replicas is not None and self.max_replicas is not None and self.min_replicas > self.max_replicas:
            raise at("min_replicas", f"min_replicas ({self.min_replicas}) must be <= max_replicas ({self.max_replicas})")
        for i, w in enumerate(self.warm_schedule):
            if self.max_replicas is not None and w.replicas > self.max_replicas:
                raise at(f"warm_schedule[{i}].replicas",
                    f"warm_schedule[{i}] holds {w.replicas} replicas, more than max_replicas ({self.max_replicas})"
                )
        return self


DEFAULT_BURST_MODE = True
"""``burst_mode`` when unset."""
DEFAULT_ACTIVATION_THRESHOLD = 0.0
"""``activation_threshold`` when unset."""


class AutoscalingSpec(Spec):
    """How replicas scale: one autoscaler per role, never one over prefill and decode together."""

    backend: Literal["keda", "hpa"] = "keda"
    """``keda``: KEDA ScaledObject with a Prometheus trigger. ``hpa``: autoscaling/v2 HPA on prometheus-adapter custom metrics."""
    scope: Literal["per_role", "whole_model"] = "per_role"
    """``whole_model`` puts one autoscaler over every role; refused for disaggregated serving."""
    paused: bool = False
    """Pause autoscaling (KEDA ``autoscaling.keda.sh/paused``); useful for dev stacks."""
    aggregated: RoleScalingSpec = RoleScalingSpec()
    """Autoscaler of the single role in aggregated mode."""
    prefill: RoleScalingSpec = RoleScalingSpec()
    """Autoscaler of the prefill role (disaggregated mode): queue depth."""
    decode: RoleScalingSpec = RoleScalingSpec()
    """Autoscaler of the decode role (disaggregated mode): KV-cache utilisation."""
    tuned_on: str | None = Field(default=None, max_length=500)
    """The ``gpuscale tune`` command line that chose the values above (written by ``gpuscale tune``; shown in the
    plan)."""

    def role(self, role: Role) -> RoleScalingSpec:
        return {"aggregated": self.aggregated, "prefill": self.prefill, "decode": self.decode}[role]

    # The defaults of a role's optional settings, resolved here once (as Ray Serve's schema does), for sizing, the
    # validators and the tuner alike. The warm minimum's default depends on the SLO: ``guardrails.warm_minimum``.

    def resolved_burst_mode(self, role: Role) -> bool:
        """``burst_mode`` as written, else on."""
        explicit = self.role(role).burst_mode
        return DEFAULT_BURST_MODE if explicit is None else explicit

    def resolved_slo_guard(self, role: Role) -> bool:
        """``slo_guard`` as written, else on with backend keda (an HPA cannot read the latency ratio)."""
        explicit = self.role(role).slo_guard
        return self.backend == "keda" if explicit is None else explicit

    def resolved_activation_threshold(self, role: Role) -> float:
        """``activation_threshold`` as written, else 0 (any waiting request activates a role at zero)."""
        explicit = self.role(role).activation_threshold
        return DEFAULT_ACTIVATION_THRESHOLD if explicit is None else explicit


class ServingSpec(Spec):
    """How vLLM serves the model."""

    mode: Literal["aggregated", "disaggregated"] = "aggregated"
    """``disaggregated`` runs separate prefill and decode workloads joined by a router and NIXL KV transfer."""
    gpu_memory_utilization: float = Field(default=0.9, gt=0.1, le=0.98)
    """Fraction of GPU memory vLLM may use (``--gpu-memory-utilization``); the rest of it is KV cache after weights."""
    max_num_seqs: int | None = Field(default=None, gt=0, le=1_000_000)
    """Cap on concurrent sequences (``--max-num-seqs``); default the vLLM one for the GPU."""
    namespace: Namespace = "inference"
    """Kubernetes namespace of the model's workloads (an RFC 1123 label, not one of gpuscale's controllers')."""
    image: str = versions.VLLM.ref
    """vLLM container image; default the pinned ``vllm/vllm-openai`` release. Flags and metric names are verified
    against that release, so an override should be the same vLLM version (a mirror or a patched build)."""

    @field_validator("image")
    @classmethod
    def _image(cls, image: str) -> str:
        return image_ref(image)

    @property
    def roles(self) -> tuple[Role, ...]:
        return ("prefill", "decode") if self.mode == "disaggregated" else ("aggregated",)


class ModelDeployment(Spec):
    """One model served on the platform, with everything that decides how it scales."""

    name: Name
    """Short name; prefixes every object of this model and is the ``--served-model-name``."""
    architecture: ModelArchitecture
    """Transformer shape and precisions."""
    weights: WeightsSpec
    """Where the weights come from."""
    parallelism: ParallelismSpec = ParallelismSpec()
    """Explicit TP/PP sizes (optional)."""
    serving: ServingSpec = ServingSpec()
    """Serving mode and vLLM settings."""
    slo: SloSpec
    """Latency and goodput targets."""
    workload: WorkloadSpec
    """Traffic pattern."""
    autoscaling: AutoscalingSpec = AutoscalingSpec()
    """Replica autoscaling."""
    queue: str
    """Leaf KAI queue (team) the model's pods are charged to."""
    node_pool: str
    """GPU node pool the model runs on."""
    front_door: FrontDoorSpec = FrontDoorSpec()
    """The holding front door before the model (present by default when a role may scale to zero)."""
    cold_start: ModelColdStartSpec = ModelColdStartSpec()
    """The model's cold-start choices: engine start (compile cache) and the node cache of downloaded weights."""
    headroom: HeadroomSpec = HeadroomSpec()
    """Spare GPU nodes for scale-ups (a CapacityBuffer or placeholder pods), sized from the workload's burst within the
    node provisioning time (``gpuscale.headroom``)."""

    def scales_to_zero(self, role: Role) -> bool:
        """Whether the role's warm minimum is 0: set so, or left unset on a best-effort SLO."""
        return warm_minimum.warm_minimum(self.slo.criticality, self.autoscaling.role(role).min_replicas) == 0

    @property
    def may_scale_to_zero(self) -> bool:
        return any(self.scales_to_zero(r) for r in self.serving.roles)

    @property
    def has_front_door(self) -> bool:
        """Whether the front door is in front of the model: as set, else when a role may scale to zero (KEDA only)."""
        if self.front_door.enabled is not None:
            return self.front_door.enabled
        return self.may_scale_to_zero and self.autoscaling.backend == "keda"

    @model_validator(mode="after")
    def _autoscaling_matches_mode(self) -> ModelDeployment:
        a = self.autoscaling
        if self.serving.mode == "disaggregated" and a.scope == "whole_model":
            raise at("autoscaling.scope", autoscaler_scope.whole_model_message("autoscaling.scope: whole_model")
                     + " (scope: per_role)")
        for role in self.serving.roles:
            breach = warm_minimum.critical_minimum_breach(role, self.slo.criticality, a.role(role).min_replicas)
            if breach:
                raise at(f"autoscaling.{role}.min_replicas", breach)
        return self

    @model_validator(mode="after")
    def _requests_fit_the_context(self) -> ModelDeployment:
        # vLLM refuses a prompt that leaves no room for one output token in --max-model-len and stops a sequence there
        ctx = self.architecture.max_context_tokens
        w = self.workload
        fix = "or raise architecture.max_context_tokens"
        problems: list[tuple[str, str]] = []
        for name, dist in (("prompt_tokens", w.prompt_tokens), ("output_tokens", w.output_tokens)):
            if dist.p99 >= ctx:
                problems.append((
                    f"workload.{name}.p99",
                    f"{dist.p99:,g} tokens is not below max_context_tokens ({ctx:,}): more than 1% of requests could "
                    f"never be served within the model's context; lower it, {fix}",
                ))
        if not problems and w.prompt_tokens.mean + w.output_tokens.mean > ctx:
            problems.append((
                "workload.prompt_tokens.mean",
                f"a mean request ({w.prompt_tokens.mean:,g} prompt + {w.output_tokens.mean:,g} output tokens) does not fit "
                f"max_context_tokens ({ctx:,}); lower the token counts, {fix}",
            ))
        if problems:
            raise Problems(problems)
        return self

    @model_validator(mode="after")
    def _zero_needs_a_wake_signal(self) -> ModelDeployment:
        if self.autoscaling.backend != "keda" or self.has_front_door:
            return self  # the front door's queue wakes every role
        for role in self.serving.roles:
            spec = self.autoscaling.role(role)
            implicit = spec.min_replicas is None and self.slo.criticality == "best_effort"
            if (spec.min_replicas == 0 or implicit) and spec.wake_schedule is None:
                source = "defaults to 0 for a best_effort SLO" if implicit else "is 0"
                raise at(f"autoscaling.{role}.min_replicas",
                    f"autoscaling.{role}.min_replicas {source}, but at zero replicas vLLM's gauges vanish with the "
                    "last pod and front_door.enabled is false, so nothing can ever wake the role again. Remove "
                    "front_door.enabled: false (the front door holds the first requests and wakes the model), add "
                    f"autoscaling.{role}.wake_schedule (e.g. start: '0 8 * * 1-5', end: '0 19 * * 1-5') or set "
                    "min_replicas: 1"
                )
        return self

    @model_validator(mode="after")
    def _front_door_fits(self) -> ModelDeployment:
        if not self.has_front_door:
            return self
        if self.autoscaling.backend != "keda":
            raise at("front_door.enabled",
                "front_door.enabled: true with autoscaling.backend: hpa: the front door wakes and scales the model "
                "through a KEDA trigger on its queue, which an HPA cannot read. Use backend: keda or set "
                "front_door.enabled: false"
            )
        problems: list[tuple[str, str]] = []
        for role in self.serving.roles:
            spec = self.autoscaling.role(role)
            if "cooldown_s" in spec.model_fields_set and spec.cooldown_s != self.front_door.idle_window_s:
                problems.append((
                    f"autoscaling.{role}.cooldown_s",
                    f"cooldown_s {spec.cooldown_s} behind a front door: the model wakes and sleeps as a whole, after "
                    f"front_door.idle_window_s ({self.front_door.idle_window_s} s) of idleness. Set "
                    "front_door.idle_window_s instead and drop cooldown_s",
                ))
        if problems:
            raise Problems(problems)
        return self

    @model_validator(mode="after")
    def _weights_cache_needs_a_download(self) -> ModelDeployment:
        if self.cold_start.weights_cache == "node-nvme" and self.weights.scheme != "hf":
            why = ("s3:// weights stream from S3 straight into GPU memory (Run:ai streamer): nothing lands on disk to "
                   "cache" if self.weights.scheme == "s3" else
                   "pvc:// weights already live on a shared file system every node reads")
            raise at("cold_start.weights_cache",
                f"weights_cache: node-nvme caches hf:// downloads, but {why}. Drop weights_cache or use an hf:// uri"
            )
        return self

    @model_validator(mode="after")
    def _hpa_backend_limits(self) -> ModelDeployment:
        # what only KEDA can do (gpuscale.guardrails.autoscaler_backend), refused here instead of at `pulumi up`
        a = self.autoscaling
        problems: list[tuple[str, str]] = []
        for i, role in enumerate(self.serving.roles):
            spec = a.role(role)
            found = autoscaler_backend.hpa_breaches(
                role, backend=a.backend, min_replicas=warm_minimum.warm_minimum(self.slo.criticality, spec.min_replicas),
                implicit_zero=spec.min_replicas is None, paused=a.paused and i == 0, slo_guard=a.resolved_slo_guard(role), warm_schedule=bool(spec.warm_schedule),
            )
            problems.extend((f"autoscaling.{field}", message) for field, message in found)
        if problems:
            raise Problems(problems)
        return self
