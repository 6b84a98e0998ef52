"""Derived numbers, computed once from the spec; components, simulator and plan all read these.

Pure functions, no I/O. Formulas and the figures they are checked against: ``research/perf-model.md``
section 3 (KV capacity) and section 4 (cold-start chain).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from gpuscale import perf
from gpuscale.first_answer import ColdStart, FrontDoorSizing, first_answer, front_door_sizing
from gpuscale.first_answer import cold_start as stage_cold_start
from gpuscale.guardrails import headroom as headroom_rule
from gpuscale.guardrails import warm_minimum
from gpuscale.headroom import HeadroomSizing, size_headroom
from gpuscale.problems import Refusal
from gpuscale.signals import selection
from gpuscale.signals.base import MEAN_PROMPT_WINDOW_S as MEAN_PROMPT_WINDOW_S  # re-exported: the simulator's windows
from gpuscale.signals.base import RATE_WINDOW_S as RATE_WINDOW_S
from gpuscale.signals.base import Signal, SignalCoefficients, SignalSizing
from gpuscale.signals.selection import AnySignal
from gpuscale.signals.slo_target import SteadySamples, burst_offset, expected_burst_headroom
from gpuscale.spec.base import Spec
from gpuscale.spec.catalogue import GpuInstanceType
from gpuscale.spec.model import ModelDeployment, Role, RoleScalingSpec, WakeSchedule
from gpuscale.spec.teams import UNLIMITED
from gpuscale.spec.topology import GpuNodePoolSpec
from gpuscale.upstream_bounds import HPA_STABILIZATION_WINDOW_S

if TYPE_CHECKING:
    from gpuscale.spec.platform import PlatformSpec

GIB = perf.GIB
ACTIVATION_OVERHEAD_GIB = 2.3
"""Per-GPU activation peak + CUDA graphs, fitted to the TP1 rows of perf-model.md section 3."""
NCCL_OVERHEAD_GIB = 1.05
"""Extra per-GPU NCCL buffers when TP/PP > 1 (the TP>1 rows of the same table)."""
PREFILL_TARGET_UTILISATION = 0.7
"""Prefill replicas are sized to run at 70% of their prompt throughput at peak (queueing headroom)."""
DECODE_TARGET_UTILISATION = 0.7
"""Decode replicas are sized to run at 70% of the output-token throughput of the batch that meets the ITL target.
Near that batch the step time rises hyperbolically with load: on prod's 70B the throughput at the ITL target itself is
only ~7% above the one at 80% of it, less than the HPA's 10% tolerance, so a replica sized at 100% misses ITL on any
ramp or burst that outruns a cold start."""
KV_TARGET_UTILISATION = 0.8
"""KV-cache ceiling (llm-d WVA ``kvCacheThreshold`` 0.80): decode batches never plan past it, and the derived decode
KV target never exceeds it."""
KV_TARGET_FLOOR = 0.1
"""Lowest derived KV target: below it the signal is mostly noise from one or two long sequences."""
BURST_HEADROOM_UTILISATION = 0.9
"""Utilisation a replica may reach at the top of a burst shorter than a cold start: the default target is this over
the burst multiplier (below 1, so a burst still queues less than a TTFT budget)."""
MIN_TARGET_UTILISATION = 0.2
"""Lowest default target utilisation: below it the warm headroom costs more than the bursts it absorbs."""
ITL_HEADROOM = 0.8
"""Decode batches are sized so the step time is 80% of the ITL p99 target."""
VLLM_IMAGE_GIB = 30
"""Uncompressed vllm/vllm-openai image plus layers being extracted (perf-model.md 4.2: 28.6 GB); the disk it needs."""
DEFAULT_MAX_NUM_SEQS = 256
"""vLLM's ``max_num_seqs`` default on A100-class parts; H100/H200 get 1024 (perf-model.md 2.3)."""
CRITICAL_MIN_REPLICAS = warm_minimum.CRITICAL_MIN_REPLICAS
"""Warm minimum of every role of a critical model (defined in ``gpuscale.guardrails.warm_minimum``)."""
KV_BATCH_FLOOR_SHARE = 0.5
"""A replica's KV cache must hold at least this share of the decode batch the ITL target needs. Below half, the replica
runs under half the batch its compute serves within the ITL target, so its decode GPUs cost more than twice what they
must; doubling TP doubles the GPUs but more than doubles the KV room (the weights' share per GPU halves), so the larger
TP is cheaper per output token."""
KV_TRANSFER_TTFT_SHARE = 0.25
"""Most of the TTFT p99 budget the prefill -> decode KV transfer of a p99 prompt may take in disaggregated serving;
above it the transfer, not the prefill, decides TTFT, and aggregated serving answers sooner."""


class SizingError(Refusal):
    """The model cannot be placed as asked; the message names the numbers and the fix.

    ``path`` is the model's field to change, relative to the model (e.g. ``parallelism.tensor_parallel_size``).
    """

    def __init__(self, message: str, path: str = "parallelism", model: str = "") -> None:
        self.path = path
        self.model = model
        """The model that cannot be placed (set by ``size_models``; the feasibility checks name it by index)."""
        super().__init__(message)


LARGE_SCHEDULER_GPUS = ("H100", "H200")
"""GPUs on which vLLM's default ``max_num_seqs`` is 1024 instead of 256 (perf-model.md 2.3)."""
LARGE_MAX_NUM_SEQS = 1024
LARGE_MAX_NUM_BATCHED_TOKENS = 8192
"""vLLM v1's default ``max_num_batched_tokens`` (chunked-prefill budget per step) on H100/H200; 2048 elsewhere."""
DEFAULT_MAX_NUM_BATCHED_TOKENS = 2048


RoleKey = tuple[str, Role]
"""``(model name, role)``: one autoscaled workload."""


class GpuBound(Spec):
    """One ceiling the GPUs of some roles count against together: a queue's quota or limit, or a node pool's limit.

    KAI keeps non-preemptible workloads inside the quota of their leaf queue *and of every ancestor*, and every workload
    inside each queue's ``gpu_limit`` on its path; Karpenter stops launching at a NodePool's ``nvidia.com/gpu`` limit.
    So a bound holds the sum over every role and every model below it, never one role alone.
    """

    kind: Literal["gpu_quota", "gpu_limit", "pool_gpu_limit"]
    name: str
    """Queue or node pool name."""
    gpus: float
    """The quota or limit, GPUs."""
    roles: list[RoleKey]
    """Every ``(model, role)`` whose GPUs count against it."""

    @property
    def label(self) -> str:
        if self.kind == "pool_gpu_limit":
            return f"node pool {self.name} gpu_limit {self.gpus:g}"
        if self.kind == "gpu_quota":
            return f"queue {self.name} gpu_quota {self.gpus:g} (non-preemptible workloads run in quota only)"
        return f"queue {self.name} gpu_limit {self.gpus:g}"


class ReplicaShape(Spec):
    """How one replica maps onto GPUs, pods and nodes."""

    instance_type: str
    """Instance type sized for (cheapest in the pool that holds the replica)."""
    tensor_parallel_size: int
    pipeline_parallel_size: int
    gpus: int
    """GPUs per replica (TP x PP)."""
    pods: int
    """Pods per replica; more than 1 means a LeaderWorkerSet group, gang-scheduled."""
    gpus_per_pod: int
    nodes: int
    """Nodes one replica spans."""
    fits_nvlink_domain: bool
    """Whether the tensor-parallel group sits inside one NVLink domain."""
    why: str = ""
    """How sizing chose TP x PP (given, or the smallest that holds one sequence and the ITL decode batch)."""

    @property
    def multi_node(self) -> bool:
        return self.pods > 1


class RoleSizing(Spec):
    """Replica counts and autoscaler settings of one role."""

    role: Role
    signals: list[AnySignal] = Field(min_length=1)
    """What the role scales on, primary (load) first (``gpuscale.signals.selection``)."""
    target_utilisation: float = 0.7
    """Share of a replica's capacity the load signal targets (when ``derived_target`` is false)."""
    derived_target: bool = False
    """The load signal answers the replicas the SLO needs for the traffic observed (``gpuscale.signals.slo_target``);
    its target is one replica and ``target_utilisation`` is unused."""
    burst_headroom_replicas: float = 0.0
    """Replicas the derived target's burst headroom holds on average at peak under the workload's ``burst`` section
    (``slo_target.expected_burst_headroom``; 0 without a derived target): what the plan prices."""
    burst_mode: bool = True
    """Backlog trigger and fast scale-up (``autoscaling.<role>.burst_mode``)."""
    warm_schedule: list[WakeSchedule] = []
    """Predictive warm-up windows (KEDA cron triggers)."""
    wake_schedule: WakeSchedule | None = None
    """Hours a scale-to-zero role is held awake (the stack's ``wake_schedule``; a KEDA cron trigger)."""
    replicas_per_rps: float = 0.0
    """Replicas the load signal holds per request per second of the workload's token mix (at the target
    utilisation)."""
    replicas_at_base: int
    replicas_at_peak: int
    min_replicas: int
    max_replicas: int
    max_replicas_why: str = ""
    """Where the ceiling comes from: the stack file, or the share of the tightest GPU bound (``replica_ceilings``)."""
    pdb_min_available: int = 0
    """The role's ready floor (its PDB ``minAvailable``): one below the warm minimum, never 0 when the minimum is >= 1,
    so no voluntary eviction (drift, drain) ever takes a role that keeps warm replicas to zero; 0 = the role may scale
    to zero and gets ``maxUnavailable: 1`` instead."""
    scale_down_stabilization_s: int
    polling_interval_s: int
    cooldown_s: int
    activation_threshold: float
    headroom: HeadroomSizing | None = None
    """Spare GPU nodes for the role's scale-ups (``gpuscale.headroom``), sized once the ceiling is known."""

    @property
    def metric(self) -> str:
        """The primary signal's metric."""
        return self.signals[0].metric

    @property
    def target(self) -> float:
        """The primary signal's per-replica target."""
        return self.signals[0].target

    @property
    def load_share(self) -> float:
        """The share of a replica the load signal holds each replica at: the derived target (one replica of need within
        the HPA's tolerance, ``slo_target.TARGET_REPLICAS``) or the stated utilisation. ``replicas_per_rps`` is
        measured against it, so the replicas at full use are ``replicas_per_rps x load_share``."""
        return self.target if self.derived_target else self.target_utilisation


class ModelSizing(Spec):
    """Every derived number of one model."""

    model: str
    weights_gib: float
    kv_bytes_per_token: int
    kv_gib_per_gpu: float
    kv_capacity_tokens: int
    """KV-cache tokens one replica holds at ``gpu_memory_utilization``."""
    shape: ReplicaShape
    prefill_tokens_per_s: float
    """Prompt tokens per second per replica."""
    itl_light_s: float
    """Decode step time with one short sequence."""
    decode_batch_at_slo: int
    """Concurrent sequences per replica that keep the step within the ITL target and KV capacity."""
    decode_tokens_per_s: float
    """Output tokens per second per replica at ``decode_batch_at_slo``."""
    cold_start: ColdStart
    max_num_seqs: int
    """vLLM ``--max-num-seqs``: the stack's, else vLLM's default for the GPU (1024 on H100/H200, else 256)."""
    max_num_batched_tokens: int
    """vLLM's chunked-prefill token budget per engine step (its default for the GPU)."""
    kv_transfer_p99_s: float = 0.0
    """Disaggregated serving: seconds to move the KV cache of a p99 prompt from a prefill to a decode pod at the pods'
    share of the instance's network bandwidth (a lower bound: line rate); 0 when aggregated."""
    preemption_delay_s: int
    """KAI ``kai.scheduler/preemption-delay`` on every workload of the model: how long a pending gang waits for
    Karpenter's new node before it may evict anyone's pods (``preemption_delay_s``)."""
    rollout_deadline_s: int
    """How long a rollout may take before it counts as failed (Deployment ``progressDeadlineSeconds``, Pulumi's
    create/update timeout): twice a full cold start, at least 10 minutes, since a new pod may need a new node."""
    roles: list[RoleSizing]
    usd_per_gpu_hour: float
    gpu_hours_per_day: float
    """GPU-hours per day following the daily pattern (peak hours at peak replicas)."""
    gpu_hours_per_day_base: float
    """GPU-hours per day if the base-load replica count ran all day."""
    gpu_hours_per_day_peak: float
    """GPU-hours per day if the peak replica count ran all day."""
    front_door: FrontDoorSizing | None = None
    """Hold limit, queue bound, ``Retry-After`` and the first answer from zero, when the model has a front door."""

    def role(self, role: Role) -> RoleSizing:
        for r in self.roles:
            if r.role == role:
                return r
        raise KeyError(role)

    @property
    def usd_per_day(self) -> float:
        return self.gpu_hours_per_day * self.usd_per_gpu_hour


class PlatformSizing(Spec):
    """Sizing of every model of a platform, plus pool-level derived values."""

    models: list[ModelSizing]
    root_volume_gib: dict[str, int]
    """Root EBS volume per GPU pool."""

    def model(self, name: str) -> ModelSizing:
        for m in self.models:
            if m.model == name:
                return m
        raise KeyError(name)


def weights_gib(model: ModelDeployment) -> float:
    return perf.weight_bytes(model.architecture) / GIB


def kv_gib_per_gpu(model: ModelDeployment, instance: GpuInstanceType, tp: int, pp: int) -> float:
    """GPU memory left for KV on each GPU: util x memory - weights share - overheads."""
    overhead = ACTIVATION_OVERHEAD_GIB + (NCCL_OVERHEAD_GIB if tp * pp > 1 else 0.0)
    usable = model.serving.gpu_memory_utilization * instance.gpu_memory_gib
    return usable - weights_gib(model) / (tp * pp) - overhead


def kv_capacity_tokens(model: ModelDeployment, instance: GpuInstanceType, tp: int, pp: int) -> int:
    per_gpu = kv_gib_per_gpu(model, instance, tp, pp)
    if per_gpu <= 0:
        return 0
    return int(tp * pp * per_gpu * GIB / perf.kv_bytes_per_token(model.architecture))


def _shape(model: ModelDeployment, pool: GpuNodePoolSpec, tp: int, pp: int) -> ReplicaShape:
    gpus = tp * pp
    candidates = sorted(pool.instances, key=lambda it: it.on_demand_usd_per_hour)
    for it in candidates:  # cheapest single node that holds the replica
        if it.gpus_per_node >= gpus:
            return ReplicaShape(
                instance_type=it.name, tensor_parallel_size=tp, pipeline_parallel_size=pp, gpus=gpus,
                pods=1, gpus_per_pod=gpus, nodes=1, fits_nvlink_domain=tp <= it.nvlink_domain_gpus,
            )
    big = max(pool.instances, key=lambda it: it.gpus_per_node)
    per_node = big.gpus_per_node
    if tp > per_node or gpus % per_node:
        raise SizingError(
            f"model {model.name}: TP {tp} x PP {pp} = {gpus} GPUs cannot be split into whole {big.name} nodes "
            f"of {per_node} GPUs with each tensor-parallel group inside one node; choose TP <= {per_node} and "
            f"TP x PP a multiple of {per_node}"
        )
    nodes = gpus // per_node
    return ReplicaShape(
        instance_type=big.name, tensor_parallel_size=tp, pipeline_parallel_size=pp, gpus=gpus,
        pods=nodes, gpus_per_pod=per_node, nodes=nodes, fits_nvlink_domain=tp <= big.nvlink_domain_gpus,
    )


PD_PIPELINE_REASON = (
    "vLLM's NIXL connector refuses a decode (kv_consumer) engine with pipeline_parallel_size > 1 (v0.33.0 "
    "nixl/base_worker.py: 'NixlPushConnector consumer (decode) does not support pipeline_parallel_size > 1'), so the "
    "decode pods would crash-loop"
)


def itl_decode_batch(model: ModelDeployment, instance: GpuInstanceType, tp: int, pp: int) -> int:
    """The decode batch the ITL target needs: the most sequences whose step stays within ``ITL_HEADROOM`` x the ITL
    target (``max_num_seqs`` at most), but no more than the whole model's concurrent decodes at peak load (one replica
    never needs a larger batch than all the traffic there is)."""
    arch, w = model.architecture, model.workload
    ctx = mean_decode_context(model)
    limit = model.slo.itl_p99_s * ITL_HEADROOM
    peak_concurrency = max(1, math.ceil(w.peak_rps * w.output_tokens.mean * limit))
    cap = min(max_num_seqs(model, instance), peak_concurrency)
    best = 0
    for b in range(1, cap + 1):
        if perf.decode_step_s(arch, instance.gpu, tp, pp, b, b * ctx) > limit:
            break
        best = b
    return best


def kv_decode_batch(model: ModelDeployment, kv_tokens: int) -> int:
    """Sequences of mean decode context the KV cache holds below ``KV_TARGET_UTILISATION``."""
    return int(kv_tokens * KV_TARGET_UTILISATION // mean_decode_context(model))


def _kv_shortfall(model: ModelDeployment, pool: GpuNodePoolSpec, shape: ReplicaShape) -> str | None:
    """Why ``shape`` cannot serve ``model``: KV room for less than one max-context sequence, or for fewer sequences than
    ``KV_BATCH_FLOOR_SHARE`` of the decode batch the ITL target needs; None when it can."""
    inst = _instance(pool, shape)
    tp, pp = shape.tensor_parallel_size, shape.pipeline_parallel_size
    cap = kv_capacity_tokens(model, inst, tp, pp)
    if cap < model.architecture.max_context_tokens:
        return f"leaves KV room for {cap:,} tokens, less than one max_context_tokens ({model.architecture.max_context_tokens:,}) sequence"
    need, held = itl_decode_batch(model, inst, tp, pp), kv_decode_batch(model, cap)
    if held < need * KV_BATCH_FLOOR_SHARE:
        return (
            f"leaves KV room for {cap:,} tokens, {held} sequences of {mean_decode_context(model):,.0f} tokens, less than "
            f"half the {need}-sequence decode batch the ITL target ({model.slo.itl_p99_s:g} s) needs"
        )
    return None


def replica_shape(model: ModelDeployment, pool: GpuNodePoolSpec) -> ReplicaShape:
    """TP/PP as given, or the smallest TP (then PP) whose KV cache holds one max-context sequence and the decode batch
    the ITL target needs (``itl_decode_batch``). Disaggregated serving keeps PP at 1 (``PD_PIPELINE_REASON``)."""
    arch = model.architecture
    ref = min(pool.instances, key=lambda it: it.on_demand_usd_per_hour)
    max_node = max(it.gpus_per_node for it in pool.instances)
    par = model.parallelism
    disaggregated = model.serving.mode == "disaggregated"
    if disaggregated and (par.pipeline_parallel_size or 1) > 1:
        raise SizingError(
            f"model {model.name}: serving.mode disaggregated with pipeline_parallel_size {par.pipeline_parallel_size}: "
            f"{PD_PIPELINE_REASON}. Use pipeline_parallel_size 1 (a larger TP or GPU), or serve the model aggregated "
            "(serving.mode: aggregated)",
            "parallelism.pipeline_parallel_size",
        )
    if par.tensor_parallel_size or par.pipeline_parallel_size:
        tp, pp = par.tensor_parallel_size or 1, par.pipeline_parallel_size or 1
        if arch.attention_heads % tp:
            raise SizingError(
                f"model {model.name}: tensor_parallel_size {tp} must divide attention_heads {arch.attention_heads}",
                "parallelism.tensor_parallel_size",
            )
        shape = _shape(model, pool, tp, pp)
        short = _kv_shortfall(model, pool, shape)
        if short is not None:
            better = _auto_shape(model, pool, disaggregated)
            hint = (
                f"TP {better.tensor_parallel_size} x PP {better.pipeline_parallel_size} would fit"
                if better is not None else "use a larger GPU or FP8 weights"
            )
            cap = kv_capacity_tokens(model, _instance(pool, shape), tp, pp)
            raise SizingError(
                f"model {model.name}: TP {tp} x PP {pp} on {shape.instance_type} {short}; raise TP/PP ({hint}), or "
                "lower max_context_tokens",
                # no KV room at all: the weights alone overflow the GPUs, so the number to check is the model's size
                "architecture.params_b" if cap == 0 else "parallelism",
            )
        return shape.model_copy(update={"why": f"TP {tp} x PP {pp} set in the stack file"})
    auto = _auto_shape(model, pool, disaggregated)
    if auto is not None:
        return auto
    domain = max(it.nvlink_domain_gpus for it in pool.instances)
    tps = [t for t in (1, 2, 4, 8, 16) if t <= max(domain, 1) and t <= max_node and arch.attention_heads % t == 0]
    pps = "PP 1 (disaggregated)" if disaggregated else "PP <= 8"
    largest = max(tps) * (1 if disaggregated else 8)
    raise SizingError(
        f"model {model.name}: {weights_gib(model):.1f} GiB of weights plus one {arch.max_context_tokens}-token "
        f"sequence and the decode batch the ITL target needs do not fit {ref.name} ({ref.gpu_memory_gib:g} GiB GPUs) "
        f"at TP <= {max(tps)} and {pps}; use a larger GPU, FP8 weights, or a shorter max_context_tokens",
        # the weights alone overflow the largest replica sizing may form: the model's size is what to check
        "architecture.params_b" if kv_capacity_tokens(model, ref, largest, 1) == 0 else "parallelism",
    )


def _auto_shape(model: ModelDeployment, pool: GpuNodePoolSpec, disaggregated: bool) -> ReplicaShape | None:
    """The smallest TP (then PP) without a KV shortfall, with the reason the smaller ones were passed over."""
    arch = model.architecture
    max_node = max(it.gpus_per_node for it in pool.instances)
    domain = max(it.nvlink_domain_gpus for it in pool.instances)
    tps = [t for t in (1, 2, 4, 8, 16) if t <= max(domain, 1) and t <= max_node and arch.attention_heads % t == 0]
    passed: list[str] = []
    for pp in (1,) if disaggregated else (1, 2, 4, 8):
        for tp in tps:
            if tp * pp > max_node and (tp * pp) % max_node:
                continue
            shape = _shape(model, pool, tp, pp)
            short = _kv_shortfall(model, pool, shape)
            if short is None:
                why = f"smallest TP x PP whose KV holds one {arch.max_context_tokens:,}-token sequence and the ITL decode batch"
                if passed:
                    why += f" ({'; '.join(passed)})"
                return shape.model_copy(update={"why": why})
            passed.append(f"TP {tp} x PP {pp} {short}")
    return None


def _instance(pool: GpuNodePoolSpec, shape: ReplicaShape) -> GpuInstanceType:
    for it in pool.instances:
        if it.name == shape.instance_type:
            return it
    raise KeyError(shape.instance_type)


def slowest_cold_start(spec: PlatformSpec, sized: PlatformSizing, pool_name: str) -> tuple[str, float] | None:
    """The model on the pool whose cold start (``ModelSizing.cold_start``, computed once in sizing) is slowest, and its
    seconds; None when no model runs there."""
    on_pool = {m.name for m in spec.models if m.node_pool == pool_name}
    starts = [(ms.cold_start.total_s, ms.model) for ms in sized.models if ms.model in on_pool]
    if not starts:
        return None
    seconds, name = max(starts)
    return name, seconds


def mean_decode_context(model: ModelDeployment) -> float:
    """Average tokens a decoding sequence holds in KV: its prompt plus half its output."""
    w = model.workload
    return w.prompt_tokens.mean + w.output_tokens.mean / 2


def decode_batch_at_slo(model: ModelDeployment, instance: GpuInstanceType, shape: ReplicaShape, kv_tokens: int) -> int:
    """Largest batch whose step time stays within ITL_HEADROOM x ITL target and whose KV fits."""
    arch = model.architecture
    ctx = mean_decode_context(model)
    cap = max_num_seqs(model, instance)
    limit = model.slo.itl_p99_s * ITL_HEADROOM
    best = 0
    b = 1
    while b <= cap:
        step = perf.decode_step_s(arch, instance.gpu, shape.tensor_parallel_size, shape.pipeline_parallel_size, b, b * ctx)
        if step > limit or b * ctx > kv_tokens * KV_TARGET_UTILISATION:
            break
        best = b
        b += 1
    return best


def max_num_seqs(model: ModelDeployment, instance: GpuInstanceType) -> int:
    if model.serving.max_num_seqs is not None:
        return model.serving.max_num_seqs
    return LARGE_MAX_NUM_SEQS if instance.gpu.name in LARGE_SCHEDULER_GPUS else DEFAULT_MAX_NUM_SEQS


def max_num_batched_tokens(instance: GpuInstanceType) -> int:
    return LARGE_MAX_NUM_BATCHED_TOKENS if instance.gpu.name in LARGE_SCHEDULER_GPUS else DEFAULT_MAX_NUM_BATCHED_TOKENS


def replica_cold_start(spec: PlatformSpec, model: ModelDeployment, shape: ReplicaShape) -> ColdStart:
    """Each stage of the cold start of one replica of ``model`` in ``shape`` on a fresh node of its pool: the one
    definition ``ModelSizing.cold_start`` holds and builders that have only the shape read."""
    pool = spec.topology.pool(model.node_pool)
    return stage_cold_start(model, pool, spec.topology.provisioning, _instance(pool, shape), weights_gib(model))


def preemption_delay_s(cold: ColdStart) -> int:
    """KAI's preemption delay for a workload whose pending pod needs a new node: the provisioner's slowest node launch
    plus the device plugin's GPU registration, rounded up to a whole second.

    KAI v0.17.0 counts the window while the PodGroup is pending (``pkg/apis/scheduling/v2alpha2/podgroup_types.go``
    ``PreemptionDelay``: "the minimal time the PodGroup must be pending ... before it may trigger eviction"); a pod stops
    pending when KAI binds it, which needs the node Ready and ``nvidia.com/gpu`` allocatable. Image pull, weights and
    engine start happen after the bind, so they are not part of the wait: adding them would only delay the eviction a
    gang that really has no node coming needs."""
    return math.ceil(cold.node_s + cold.gpu_ready_s)


def rollout_deadline_s(cold: ColdStart) -> int:
    return max(600, math.ceil(2 * cold.total_s))


def default_min_replicas(model: ModelDeployment, role: Role) -> int:
    """The role's warm minimum: the stack's (an explicit 0 stays 0), else ``CRITICAL_MIN_REPLICAS`` for a critical SLO,
    1 for a standard one, 0 for best effort."""
    return warm_minimum.warm_minimum(model.slo.criticality, model.autoscaling.role(role).min_replicas)


def pdb_min_available(min_replicas: int) -> int:
    """The ready floor of a role (PDB ``minAvailable``): one replica below the warm minimum may be evicted at a time, but
    a role that keeps a warm replica is never evicted to zero; 0 for a role that may scale to zero."""
    return 0 if min_replicas == 0 else max(1, min_replicas - 1)


def gpu_bounds(spec: PlatformSpec, models: Sequence[ModelDeployment] | None = None) -> list[GpuBound]:
    """Every GPU ceiling, with every ``(model, role)`` counted against it. The ONE function behind both the derived
    ``max_replicas`` (``replica_ceilings``) and the cross-layer check (``cross_layer``): for each queue (leaves first),
    its ``gpu_quota`` over the non-preemptible roles below it and its ``gpu_limit`` (when set and a preemptible role is
    below) over all roles below it; for each GPU pool, its ``gpu_limit`` over the roles it runs. Bounds no role counts
    against are left out."""
    models = list(spec.models if models is None else models)
    chains = {m.name: [q.name for q in spec.queue_chain(m.queue)] for m in models}
    leaf = {q.name: q for q, _ in spec.queues()}
    bounds: list[GpuBound] = []
    depth = {q.name: len(spec.queue_chain(q.name)) for q, _ in spec.queues()}
    for q, _parent in sorted(spec.queues(), key=lambda pair: -depth[pair[0].name]):  # leaves first
        below = [m for m in models if q.name in chains[m.name]]
        in_quota = [(m.name, r) for m in below if not leaf[m.queue].preemptible for r in m.serving.roles]
        if in_quota:
            bounds.append(GpuBound(kind="gpu_quota", name=q.name, gpus=q.gpu_quota, roles=in_quota))
        # with only non-preemptible roles below, the quota (never above the limit) already binds
        if q.gpu_limit != UNLIMITED and any(leaf[m.queue].preemptible for m in below):
            bounds.append(GpuBound(kind="gpu_limit", name=q.name, gpus=q.gpu_limit,
                                   roles=[(m.name, r) for m in below for r in m.serving.roles]))
    for pool in spec.topology.gpu_pools:
        on = [(m.name, r) for m in models if m.node_pool == pool.name for r in m.serving.roles]
        if on:
            bounds.append(GpuBound(kind="pool_gpu_limit", name=pool.name, gpus=float(pool.gpu_limit), roles=on))
    return bounds


def bound_usage(bound: GpuBound, gpus_of: dict[RoleKey, int]) -> int:
    """GPUs the roles of ``bound`` hold together, given each role's GPUs (e.g. max replicas x GPUs per replica)."""
    return sum(gpus_of[key] for key in bound.roles)


class _Demand(Spec):
    """What one role asks of the bounds when ceilings are shared out."""

    gpus_per_replica: int
    min_replicas: int
    peak_replicas: int
    explicit_max: int | None


def replica_ceilings(bounds: list[GpuBound], demands: dict[RoleKey, _Demand]) -> dict[RoleKey, tuple[int, str]]:
    """Derived ``max_replicas`` per role and the bound that sets it. In every bound, the GPUs left after the roles with an
    explicit ``max_replicas`` are shared among the others in proportion to their peak demand (peak replicas, at least
    the warm minimum, x GPUs); a role's ceiling is its smallest share over its bounds, in whole replicas, at least its
    warm minimum and 1. Whole-replica rounding leaves GPUs over: one more replica goes to each role (largest remainder
    first) whose bounds all still have room. Shares never add up past a bound unless warm minimums already do, which
    the feasibility check refuses; so derived ceilings pass the cross-check."""
    shares: dict[RoleKey, list[tuple[float, GpuBound]]] = {k: [] for k in demands}
    for b in bounds:
        fixed = sum((demands[k].explicit_max or 0) * demands[k].gpus_per_replica for k in b.roles)
        flex = [k for k in b.roles if demands[k].explicit_max is None]
        weight = {k: max(demands[k].peak_replicas, demands[k].min_replicas, 1) * demands[k].gpus_per_replica for k in flex}
        total = sum(weight.values())
        for k in flex:
            shares[k].append((max(b.gpus - fixed, 0.0) * weight[k] / total, b))
    out: dict[RoleKey, tuple[int, str]] = {}
    remainder: dict[RoleKey, float] = {}
    for k, d in demands.items():
        if d.explicit_max is not None:
            out[k] = (d.explicit_max, "max_replicas set in the stack file")
            continue
        if not shares[k]:
            out[k] = (max(d.min_replicas, 1), "no queue limit or pool bounds it")
            continue
        gpus, bound = min(shares[k], key=lambda x: x[0])
        n = max(int(gpus // d.gpus_per_replica), d.min_replicas, 1)
        remainder[k] = gpus / d.gpus_per_replica - n
        sharing = f", shared with {len(bound.roles) - 1} other role(s) by peak demand" if len(bound.roles) > 1 else ""
        out[k] = (n, f"{gpus:.1f} GPUs of {bound.label}{sharing}")
    used = {id(b): sum(out[k][0] * demands[k].gpus_per_replica for k in b.roles) for b in bounds}
    for k in sorted(remainder, key=lambda key: -remainder[key]):
        mine = [b for b in bounds if k in b.roles]
        extra = demands[k].gpus_per_replica
        if all(used[id(b)] + extra <= b.gpus for b in mine):
            out[k] = (out[k][0] + 1, out[k][1] + ", plus one replica of the GPUs rounding left over")
            for b in mine:
                used[id(b)] += extra
    return out


def decode_kv_target(model: ModelDeployment, decode_batch: int, kv_tokens: int) -> float:
    """KV use of the batch that meets the ITL target: ``decode_batch_at_slo x mean context / KV capacity``.

    A fixed 0.8 lets the batch grow to ~2x that on chat-sized contexts, so ITL is missed long before the autoscaler
    reacts. Capped at ``KV_TARGET_UTILISATION`` (preemption headroom), floored at ``KV_TARGET_FLOOR``, 2 decimals.
    """
    used = decode_batch * mean_decode_context(model) / kv_tokens if kv_tokens > 0 else KV_TARGET_UTILISATION
    return round(max(KV_TARGET_FLOOR, min(KV_TARGET_UTILISATION, used)), 2)


def default_utilisation(model: ModelDeployment, cold: ColdStart) -> float:
    """The load signal's target utilisation when the stack sets none: ``PREFILL_TARGET_UTILISATION`` (0.7), lowered to
    ``BURST_HEADROOM_UTILISATION / multiplier`` when the workload's bursts end before a cold start could answer them
    (only replicas already warm can), at least ``MIN_TARGET_UTILISATION``."""
    b = model.workload.burst
    if b.per_hour > 0 and b.multiplier > 1 and b.duration_s < cold.total_s:
        headroom = BURST_HEADROOM_UTILISATION / b.multiplier
        return round(max(MIN_TARGET_UTILISATION, min(PREFILL_TARGET_UTILISATION, headroom)), 2)
    return PREFILL_TARGET_UTILISATION


def derived_target(model: ModelDeployment, role: Role) -> bool:
    """The load signal's target comes from the SLO and the observed traffic (``gpuscale.signals.slo_target``): with
    backend keda (the terms are PromQL over several metrics) when the stack sets no ``target_utilisation``, ``metric``
    or ``target`` for the role."""
    s = model.autoscaling.role(role)
    return model.autoscaling.backend == "keda" and s.target_utilisation is None and s.metric is None and s.target is None


def target_utilisation(model: ModelDeployment, role: Role, cold: ColdStart) -> float:
    explicit = model.autoscaling.role(role).target_utilisation
    return explicit if explicit is not None else default_utilisation(model, cold)


def itl_capacity_lines(cost: perf.StepCost, budget_s: float, max_seqs: int, kv_tokens: int) -> tuple[tuple[float, float], ...]:
    """Replica-seconds per output token a replica spends at the ITL target, as the upper envelope of lines in the KV
    share per running sequence (``share x kv_tokens`` = its context ``c``): ``step(m, m c) / m`` at the batch ``m``
    the target allows, read off the step model (``perf.StepCost.step_s``: ``overhead + n a(c) + max(weights, s n)``,
    ``a(c) = per_seq + comm + per_context x c``). The largest ``n`` with a step within ``budget_s`` needs both
    ``overhead + weights + n a <= budget`` and ``overhead + n (a + s) <= budget``, so ``budget / n`` is the larger of
    ``budget a / (budget - overhead - weights)`` and ``budget (a + s) / (budget - overhead)``; vLLM runs at most
    ``max_seqs``, and ``step(n) / n`` falls with ``n``, so ``step(max_seqs) / max_seqs`` (two lines more) is a floor.
    Dominated lines are dropped; empty when not even one sequence meets the budget."""
    o, w, s = cost.overhead_s, cost.weights_s, cost.s_per_token
    # under pipeline parallelism a step's per-sequence work and KV read are paid per in-flight micro-batch, as the
    # engine's step does (``perf.StepCost.step_s``); the batch at the ITL target holds at least ``pp`` sequences
    share = cost.decode_share(max(max_seqs, 1))
    a0, b = cost.per_seq_s * share + cost.comm_s_per_token, cost.per_context_token_s * share * kv_tokens
    if budget_s <= o + w:
        return ()
    n = float(max(max_seqs, 1))
    lines = [
        (a0 * budget_s / (budget_s - o - w), b * budget_s / (budget_s - o - w)),
        ((a0 + s) * budget_s / (budget_s - o), b * budget_s / (budget_s - o)),
        (o / n + a0 + w / n, b), (o / n + a0 + s, b),
    ]
    # a share is within [0, 1]: keep the lines that are above every other somewhere on it
    kept = [ln for ln in lines if not any(
        other != ln and other[0] >= ln[0] and other[0] + other[1] >= ln[0] + ln[1] for other in lines
    )]
    return tuple(sorted(set(kept)))


def signal_coefficients(
    model: ModelDeployment, cost: perf.StepCost, decode_batch: int, kv_tokens: int, max_seqs: int = DEFAULT_MAX_NUM_SEQS,
    chunk_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS,
) -> SignalCoefficients:
    """Per-token costs in replica-seconds: prefill from the step model; decode divided by the share of each step a
    replica at its ITL batch spends on per-token work (the rest is the step's fixed part), so one replica at that
    batch reads 1.0 whatever the context; and the decode capacity at the ITL target by KV share
    (``itl_capacity_lines``), which the SLO-derived decode target reads."""
    ctx = mean_decode_context(model)
    n = max(decode_batch, 1)
    share = cost.decode_share(n)  # the step's per-sequence work and KV read per micro-batch under PP, as step_s
    per_token = cost.token_s + cost.per_seq_s * share
    per_context = cost.per_context_token_s * share
    step = cost.step_s(n, n * ctx)
    usable = n * (per_token + per_context * ctx) / step
    return SignalCoefficients(
        prefill_s_per_token=cost.token_s,
        prefill_s_per_pair=cost.attention_s_per_pair,
        decode_s_per_token=per_token / usable,
        decode_s_per_kv_share=per_context * kv_tokens / usable,
        prompt_tokens_fallback=model.workload.prompt_tokens.mean,
        decode_itl_lines=itl_capacity_lines(cost, model.slo.itl_p99_s * ITL_HEADROOM, max_seqs, kv_tokens),
        prefill_stall=prefill_stall(cost, model.slo.itl_p99_s * ITL_HEADROOM) if model.serving.mode == "aggregated" else 1.0,
        # a lone prompt's pipeline fill, as the engine steps it (``perf.StepCost.pipelined_prefill_s``)
        prefill_fill_s_per_token=(cost.batches_in_flight - 1) * cost.token_s,
        prefill_chunk_tokens=chunk_tokens if cost.batches_in_flight > 1 else 0,
    )


def prefill_stall(cost: perf.StepCost, budget_s: float) -> float:
    """How many times a replica's share of prefill work counts where the same replica decodes (aggregated serving):
    ``budget / (budget - overhead - weights)``, 1 when not even the step's fixed part fits the budget (no batch meets the
    ITL target; sizing's decode work says so elsewhere).

    With chunked prefill (vLLM v1 schedules decodes first and fills the rest of ``max_num_batched_tokens`` with prompt
    chunks: ``vllm/v1/core/sched/scheduler.py`` ``schedule()``, "First, schedule the RUNNING requests", then the
    waiting ones, as the simulator's engine does, ``gpuscale.sim.vllm_engine``), a step that carries a chunk lasts the chunk's
    prefill, and every decoding sequence waits for it. If prefill takes a share ``p`` of the replica's time, a
    sequence's TPOT is the decode step over the rest, ``step(n) / (1 - p)``, which the ITL budget bounds:
    ``p + step(n) / budget <= 1``. The decode step is the fixed part ``overhead + weights`` (a memory-bound step reads
    every weight once) plus ``n`` times a per-sequence cost, and ``n`` is about the output-token rate times the budget, so
    the replicas needed are ``(P + rate x per-sequence cost) / (1 - (overhead + weights) / budget)``: the prefill work
    ``P`` scaled by this factor plus the decode work (its cost per token at the ITL batch, ``decode_s_per_token``, is
    at least the per-sequence cost at any lighter batch). Adding the two shares unscaled treats a prefill second as if decoding went on beside it: on
    staging's 70B on A100 (a 28.6 ms fixed step in a 64 ms budget) that overstated a replica's requests per second 1.8
    times."""
    fixed = cost.overhead_s + cost.weights_s
    return round(budget_s / (budget_s - fixed), 4) if budget_s > fixed else 1.0


def _role_sizing(
    model: ModelDeployment, role: Role, coef: SignalCoefficients,
    decode_batch: int, kv_tokens: int, decode_tps: float, cold: ColdStart,
) -> RoleSizing:
    """Every number of one role but its ceiling, which depends on the other roles sharing its bounds (``size_models``
    sets it)."""
    w, s = model.workload, model.autoscaling.role(role)
    util = target_utilisation(model, role, cold)
    prompt, output = w.prompt_tokens.mean, w.output_tokens.mean
    ctx_share = mean_decode_context(model) / kv_tokens if kv_tokens > 0 else 1.0

    def prefill_work(rps: float) -> float:
        return rps * prompt * coef.prefill_s(prompt)

    def decode_replicas(rps: float) -> float:
        if decode_tps <= 0:  # not even one sequence meets the ITL target: one sequence per replica
            return rps * output * model.slo.itl_p99_s
        return rps * output * (coef.decode_s_per_token + coef.decode_s_per_kv_share * ctx_share) / util

    def utilised(rps: float) -> float:
        if role == "prefill":
            return prefill_work(rps) / util
        if role == "decode":
            return decode_replicas(rps)
        return prefill_work(rps) * coef.prefill_stall / util + decode_replicas(rps)

    burst = model.autoscaling.resolved_burst_mode(role)
    derived = derived_target(model, role)
    signals = _signals(
        model, role, s, coef, util, burst, decode_batch, kv_tokens, decode_tps, utilised(1.0), derived, cold.total_s,
    )
    load = signals[0]

    def fractional(rps: float) -> float:
        return steady_replicas(model, load, kv_tokens, rps) if derived else utilised(rps)

    def needed(rps: float) -> int:
        return max(1, math.ceil(fractional(rps) - 1e-9)) if rps > 0 else 0

    # replicas per request/s: the mean slope up to the peak (the derived target's queueing term is not linear in load)
    slope_rps = w.peak_rps if w.peak_rps > 0 else 1.0
    per_rps = (fractional(slope_rps) - fractional(0.0)) / slope_rps
    min_r = default_min_replicas(model, role)
    stabilization = s.scale_down_stabilization_s
    if stabilization is None:
        # longer than a cold start, within the HPA's own bound (a longer cold start cannot be waited out by it)
        stabilization = min(HPA_STABILIZATION_WINDOW_S.high, max(300, int(math.ceil(cold.total_s / 60.0) * 60 + 60)))
    return RoleSizing(
        role=role, signals=signals, target_utilisation=util, derived_target=derived, burst_mode=burst,
        warm_schedule=list(s.warm_schedule), wake_schedule=s.wake_schedule,
        replicas_per_rps=round(per_rps, 6),
        burst_headroom_replicas=round(expected_burst_headroom(
            per_rps * w.peak_rps, w.burst.multiplier, w.burst.duration_s, w.burst.per_hour, burst_offset(cold.total_s),
        ), 2) if derived else 0.0,
        replicas_at_base=needed(w.base_rps), replicas_at_peak=needed(w.peak_rps),
        min_replicas=min_r, max_replicas=s.max_replicas if s.max_replicas is not None else max(min_r, 1),
        pdb_min_available=pdb_min_available(min_r), scale_down_stabilization_s=stabilization,
        # behind a front door the door's queue is polled faster (it starts the cold start) and the model sleeps as a whole
        polling_interval_s=min(s.polling_interval_s, model.front_door.poll_s) if model.has_front_door else s.polling_interval_s,
        cooldown_s=model.front_door.idle_window_s if model.has_front_door else s.cooldown_s,
        activation_threshold=model.autoscaling.resolved_activation_threshold(role),
    )


def steady_replicas(model: ModelDeployment, load: Signal, kv_tokens: int, rps: float) -> float:
    """Replicas (fractional) a derived load signal asks for under steady traffic of ``rps`` requests per second of the
    workload's mix: the signal itself, read on the series such traffic would produce (one formula: ``slo_target``)."""
    w = model.workload
    ctx_share = mean_decode_context(model) / kv_tokens if kv_tokens > 0 else 1.0
    return load.observe(SteadySamples(rps, w.prompt_tokens.mean, w.output_tokens.mean, ctx_share)) / load.target


def role_replicas(model: ModelDeployment, ms: ModelSizing, r: RoleSizing, rps: float) -> float:
    """Replicas (fractional) the role's load signal holds at ``rps``: the derived signal read on steady traffic, or
    ``replicas_per_rps x rps`` for a stated utilisation (linear in load)."""
    if r.derived_target:
        return steady_replicas(model, r.signals[0], ms.kv_capacity_tokens, rps)
    return r.replicas_per_rps * rps


def carried_rps(model: ModelDeployment, ms: ModelSizing, r: RoleSizing, replicas: int, *, iterations: int = 60) -> float:
    """The highest rate (up to the workload's peak) at which the role's load signal asks for at most ``replicas``: a
    bisection on ``role_replicas``, which grows with load but not in proportion (the queueing headroom of a derived
    target), so ``peak x replicas / needed`` is not it."""
    def fits(rps: float) -> bool:
        return math.ceil(role_replicas(model, ms, r, rps) - 1e-9) <= replicas

    lo, hi = 0.0, model.workload.peak_rps
    if fits(hi):
        return hi
    for _ in range(iterations):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def _signals(
    model: ModelDeployment, role: Role, s: RoleScalingSpec, coef: SignalCoefficients, util: float, burst: bool,
    decode_batch: int, kv_tokens: int, decode_tps: float, replicas_per_rps: float, derived: bool, cold_start_s: float,
) -> list[Signal]:
    """The role's signals (``gpuscale.signals.selection``) from the numbers sizing derives."""
    w, slo = model.workload, model.slo
    keda = model.autoscaling.backend == "keda"
    numbers = SignalSizing(
        role=role, utilisation=util, coefficients=coef, prompt_tokens_mean=w.prompt_tokens.mean,
        prompt_tokens_p99=w.prompt_tokens.p99, derived=derived, output_tokens_mean=w.output_tokens.mean,
        output_tokens_p99=w.output_tokens.p99, mean_decode_context=mean_decode_context(model),
        ttft_p99_s=slo.ttft_p99_s, itl_p99_s=slo.itl_p99_s, itl_headroom=ITL_HEADROOM, decode_batch=decode_batch,
        kv_capacity_tokens=kv_tokens, decode_tokens_per_s=decode_tps, replicas_per_rps=replicas_per_rps,
        kv_target=decode_kv_target(model, decode_batch, kv_tokens), kv_ceiling=KV_TARGET_UTILISATION,
        cold_start_s=cold_start_s,
    )
    return selection.role_signals(
        numbers, keda=keda, burst=burst, guard=model.autoscaling.resolved_slo_guard(role),
        metric=s.metric, target=s.target,
    )


def _size_alone(spec: PlatformSpec, model: ModelDeployment) -> ModelSizing:
    """Every number of one model that does not depend on the others (role ceilings are provisional)."""
    pool = spec.topology.pool(model.node_pool)
    shape = replica_shape(model, pool)
    inst = _instance(pool, shape)
    tp, pp = shape.tensor_parallel_size, shape.pipeline_parallel_size
    kv_tokens = kv_capacity_tokens(model, inst, tp, pp)
    prefill_tps = perf.prefill_tokens_per_s(model.architecture, inst.gpu, shape.gpus)
    batch = decode_batch_at_slo(model, inst, shape, kv_tokens)
    ctx = mean_decode_context(model)
    step = perf.decode_step_s(model.architecture, inst.gpu, tp, pp, max(batch, 1), max(batch, 1) * ctx)
    decode_tps = round(batch / step, 1) if batch else 0.0
    cold = replica_cold_start(spec, model, shape)
    coef = signal_coefficients(
        model, perf.step_cost(model.architecture, inst.gpu, tp, pp, prefill_rate=prefill_tps), batch, kv_tokens,
        max_num_seqs(model, inst), max_num_batched_tokens(inst),
    )
    roles: list[RoleSizing] = []
    role_names = model.serving.roles
    for role in role_names:
        roles.append(_role_sizing(model, role, coef, batch, kv_tokens, decode_tps, cold))
    peak_h = model.workload.peak_hours_per_day
    base_gpus = sum(r.replicas_at_base for r in roles) * shape.gpus
    peak_gpus = sum(r.replicas_at_peak for r in roles) * shape.gpus
    # the warm minimum runs even when traffic needs fewer replicas
    base_gpus = max(base_gpus, sum(r.min_replicas for r in roles) * shape.gpus)
    door: FrontDoorSizing | None = None
    if model.has_front_door:
        answer = first_answer(model, pool, spec.topology.provisioning, cold)
        # the slowest role sets the requests per second one set of replicas serves
        per_set = 1.0 / max(r.replicas_per_rps for r in roles)
        door = front_door_sizing(model, answer, per_set)
    return ModelSizing(
        model=model.name,
        weights_gib=round(weights_gib(model), 2),
        kv_bytes_per_token=perf.kv_bytes_per_token(model.architecture),
        kv_gib_per_gpu=round(kv_gib_per_gpu(model, inst, tp, pp), 2),
        kv_capacity_tokens=kv_tokens,
        shape=shape,
        prefill_tokens_per_s=round(prefill_tps, 1),
        itl_light_s=round(perf.decode_step_s(model.architecture, inst.gpu, tp, pp, 1, ctx), 5),
        decode_batch_at_slo=batch,
        decode_tokens_per_s=decode_tps,
        cold_start=cold,
        max_num_seqs=max_num_seqs(model, inst),
        max_num_batched_tokens=max_num_batched_tokens(inst),
        kv_transfer_p99_s=kv_transfer_s(model, pool, shape) if model.serving.mode == "disaggregated" else 0.0,
        preemption_delay_s=preemption_delay_s(cold),
        rollout_deadline_s=rollout_deadline_s(cold),
        roles=roles,
        usd_per_gpu_hour=round(inst.usd_per_gpu_hour, 4),
        gpu_hours_per_day=round(base_gpus * (24 - peak_h) + peak_gpus * peak_h, 2),
        gpu_hours_per_day_base=float(base_gpus * 24),
        gpu_hours_per_day_peak=float(peak_gpus * 24),
        front_door=door,
    )


def size_models(spec: PlatformSpec, models: Sequence[ModelDeployment]) -> list[ModelSizing]:
    """Sizing of ``models`` run together on ``spec``'s queues and pools: each alone, then every role's ``max_replicas``
    from the bounds they share (``gpu_bounds`` + ``replica_ceilings``)."""
    alone = [_size_one(spec, m) for m in models]
    demands = {
        (ms.model, r.role): _Demand(
            gpus_per_replica=ms.shape.gpus, min_replicas=r.min_replicas, peak_replicas=r.replicas_at_peak,
            explicit_max=m.autoscaling.role(r.role).max_replicas,
        )
        for m, ms in zip(models, alone, strict=True) for r in ms.roles
    }
    ceilings = replica_ceilings(gpu_bounds(spec, models), demands)
    out: list[ModelSizing] = []
    for m, ms in zip(models, alone, strict=True):
        roles = [r.model_copy(update={"max_replicas": ceilings[(ms.model, r.role)][0],
                                      "max_replicas_why": ceilings[(ms.model, r.role)][1]}) for r in ms.roles]
        roles = [r.model_copy(update={"headroom": role_headroom(spec, m, ms, r)}) for r in roles]
        out.append(ms.model_copy(update={"roles": roles}))
    return out


def role_headroom(
    spec: PlatformSpec, model: ModelDeployment, ms: ModelSizing, r: RoleSizing, *, utilisation: float | None = None,
) -> HeadroomSizing:
    """The role's spare nodes (``gpuscale.headroom.size_headroom``) at its load signal's own target (``RoleSizing.load_share``),
    or at ``utilisation`` (the simulator's warm-node variant sizes them for the undiscounted target); refused above the
    stack's cost cap."""
    own = r.load_share
    util = own if utilisation is None else utilisation
    per_rps = r.replicas_per_rps * own / util
    peak = max(1, math.ceil(per_rps * model.workload.peak_rps - 1e-9)) if model.workload.peak_rps > 0 else 0
    inst = _instance(spec.topology.pool(model.node_pool), ms.shape)
    label = (f"the SLO-derived target ({own:g} of a replica)" if r.derived_target and utilisation is None
             else f"target {util:g}")
    sized = size_headroom(
        mode=model.headroom.mode, role=r.role, workload=model.workload, cold=ms.cold_start, replicas_per_rps=per_rps,
        target_utilisation=util, replicas_at_peak=peak if utilisation is not None else r.replicas_at_peak,
        max_replicas=r.max_replicas, gpus_per_replica=ms.shape.gpus, pods_per_replica=ms.shape.pods,
        gpus_per_node=inst.gpus_per_node, usd_per_gpu_hour=inst.usd_per_gpu_hour, target_label=label,
    )
    if sized.emitted:
        breach = headroom_rule.cost_breach(sized.usd_per_day, model.headroom.max_usd_per_day, sized.replicas, r.role)
        if breach:
            raise SizingError(breach, "headroom.max_usd_per_day", model.name)
    return sized


def _size_one(spec: PlatformSpec, model: ModelDeployment) -> ModelSizing:
    try:
        return _size_alone(spec, model)
    except SizingError as exc:
        raise SizingError(str(exc), exc.path, model.name) from None


def size_model(spec: PlatformSpec, model: ModelDeployment) -> ModelSizing:
    """All derived numbers of one model on ``spec`` (it replaces the spec's model of the same name, so a variant is sized
    against the same neighbours); raises ``SizingError`` with the numbers when it cannot be placed."""
    models = [model if m.name == model.name else m for m in spec.models]
    if model.name not in {m.name for m in spec.models}:
        models.append(model)
    return next(ms for ms in size_models(spec, models) if ms.model == model.name)


def kv_link_bytes_per_s(pool: GpuNodePoolSpec, shape: ReplicaShape) -> float:
    """Line rate of the sized replica's KV link on its instance type (``perf.kv_link_bytes_per_s``)."""
    inst = _instance(pool, shape)
    return perf.kv_link_bytes_per_s(inst.network_gbps, inst.gpus_per_node, shape.gpus)


def kv_transfer_s(model: ModelDeployment, pool: GpuNodePoolSpec, shape: ReplicaShape) -> float:
    """Seconds to move the KV cache of a p99 prompt between a prefill and a decode replica: its bytes over the replica's
    share of the network (``perf.kv_link_bytes_per_s``, which the simulator's transfers use too). Line rate, so a lower
    bound."""
    kv_bytes = model.workload.prompt_tokens.p99 * perf.kv_bytes_per_token(model.architecture)
    bytes_per_s = kv_link_bytes_per_s(pool, shape)
    return round(kv_bytes / bytes_per_s, 4) if bytes_per_s > 0 else math.inf


def root_volume_gib(spec: PlatformSpec, pool: GpuNodePoolSpec) -> int:
    """Image plus the largest model cache that lands on local disk (S3-streamed weights do not), rounded up to 50 GiB."""
    if pool.root_volume_gib is not None:
        return pool.root_volume_gib
    cached = [weights_gib(m) for m in spec.models if m.node_pool == pool.name and m.weights.scheme != "s3"]
    need = VLLM_IMAGE_GIB + 20 + (max(cached) * 1.1 if cached else 0)
    return max(100, int(math.ceil(need / 50.0) * 50))


def size_platform(spec: PlatformSpec) -> PlatformSizing:
    return PlatformSizing(
        models=size_models(spec, spec.models),
        root_volume_gib={p.name: root_volume_gib(spec, p) for p in spec.topology.gpu_pools},
    )
