"""Replica performance model shared by sizing and the simulator: one roofline step for every engine step.

A vLLM step runs one forward pass over every scheduled token (one per decoding sequence plus the prefill chunks):

    t_step = overhead + per_seq x n_decode
             + max(weights streamed once, linear-layer FLOPs of all tokens at MFU_GEMM)    (roofline of the GEMMs)
             + KV read by decode attention                                                (memory-bound)
             + causal attention FLOPs of the prefill chunks at MFU_ATTENTION               (compute-bound)
             + tensor-/pipeline-parallel traffic of all tokens over its link              (not overlapped)

The parallel traffic is two all-reduces of every token's hidden state per layer (ring: 2 (tp - 1) / tp of the bytes
cross each GPU's link) plus its hand-over between pipeline stages, at the link's bandwidth (``GpuModel.tp_link_gb_s``:
NVLink of its generation, else PCIe; a boundary between nodes crosses the network, ``stage_link_gb_s``). Per token it
is counted as the prefill compute is, with the stages pipelining (each stage all-reduces its 1/pp of the layers, one
boundary's hand-over); each all-reduce's and boundary's fixed latency is paid per step, which crosses every stage. A
client of the API server also waits ``REQUEST_OVERHEAD_S`` per request outside the engine (``request_overhead_s``).

A mixed chunked-prefill step therefore costs close to the larger of its prefill and decode parts, not their sum: the
weights are read once for both. Under pipeline parallelism the engine issues one micro-batch per ``schedule()`` call
and each crosses the stages in turn (``cross_stages``), ``StepCost.stage_s`` on each: the formula above for a pipeline
full of copies of it, over ``pp``, so equal micro-batches cost what one step of all their tokens costs, and a lone
micro-batch pays its tokens' compute once per stage. ``docs/simulator.md`` (Calibration) tabulates the error against published
measurements; ``bench/calibration.py`` produces that table. Each constant below names where it comes from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpuscale.spec.catalogue import GpuModel
from gpuscale.spec.model import PRECISION_BYTES, ModelArchitecture

if TYPE_CHECKING:  # the array forms are the simulator's (numpy is its extra); sizing and the components never call them
    import numpy as np

GIB = 1024**3

MFU_GEMM = 0.48
"""Model FLOPs utilisation of the linear layers once a step is compute-bound (prefill chunks, large batches).
Anchor: NIM 1.8.0's single-request 5,000-token TTFT (407 ms, 70B FP8 on 2 x H100; perf-model.md 2.1) as vLLM would
serve it (NIM runs TensorRT-LLM there; ``bench/calibration.py`` divides its latencies by the engine factor 0.88: 462
ms), with the parallel traffic and the per-request overhead below included; the vLLM CI throughput test (200 ShareGPT
prompts, BF16, perf-model.md 2.1) then lands within +3 to +16 %. Splitwise's 2023 stack reached ~36 %."""
MFU_ATTENTION = 0.50
"""Utilisation of prefill (causal) attention FLOPs: FlashAttention-2 reports 50-73% of peak on A100, FlashAttention-3
up to 75% (BF16) on H100 for long sequences; serving mixes short variable-length prompts, so the low end."""
WEIGHT_BW_EFFICIENCY = 0.70
"""Fraction of HBM bandwidth achieved streaming weights in a decode step. Anchor: the vLLM CI latency test (bs 8,
32 in / 128 out; perf-model.md 2.1) is weight-bound: 8B BF16 on one H100 runs 7.8 ms per token against 4.8 ms of
weights at the datasheet bandwidth, with the per-step overhead below."""
KV_BW_EFFICIENCY = 0.80
"""Fraction of HBM bandwidth paged decode attention achieves reading KV. Current decode kernels (FlashAttention,
FlashInfer) stream long KV at most of the bandwidth; anchor: NIM 70B FP8 TP2 at saturation (perf-model.md 2.1: ITL
93 ms with ~80 sequences of ~5.3k tokens). The 0.35 used before was fitted to Splitwise's 2023 kernels."""
STEP_OVERHEAD_S = 1.5e-3
"""Scheduler, sampling set-up and kernel launches per step with CUDA graphs: the residual of the vLLM CI latency
test (8B TP1 on H100, H200 and A100) after the weights."""
ALLREDUCE_LATENCY_S = 15e-6
"""Fixed part of one tensor-parallel all-reduce (two per layer per step) with vLLM's custom all-reduce, beside its
bandwidth term: the 70B TP4 vs 8B TP1 gap of the vLLM CI latency test (bs 8, 32/128, H100/H200/A100 over NVLink;
perf-model.md 2.1)."""
NCCL_PCIE_ALLREDUCE_LATENCY_S = 40e-6
"""The same over PCIe with more than two GPUs, where vLLM falls back from its custom all-reduce to NCCL
(``vllm/distributed/device_communicators/custom_all_reduce.py``: "not supported on more than two PCIe-only GPUs"):
NCCL ``all_reduce_perf`` takes 37-42 us for its smallest messages on 8 PCIe GPUs (NVIDIA/nccl issue 1530, RTX 4090)
and 54 us (issue 1439, RTX 3090) [C]; no 4-GPU figure was found, so this may be high for TP4."""
CUSTOM_ALLREDUCE_MAX_PCIE_GPUS = 2
"""Most PCIe-only GPUs vLLM's custom all-reduce serves (the check quoted above)."""
LINK_EFFICIENCY = 0.7
"""Share of a link's per-direction bandwidth a ring all-reduce or a stage hand-over achieves (NCCL's bus bandwidth on
NVLink and PCIe typically reaches 70-85 % of the line rate; the low end: serving messages are small). An assumption,
not fitted: no fit point separates it from ``MFU_GEMM``."""
ACTIVATION_BYTES = 2
"""Bytes per element of the hidden state the all-reduces and stage hand-overs move: BF16, also with FP8 weights
(vLLM quantises weights and KV, not the residual stream)."""
REQUEST_OVERHEAD_S = 0.035
"""Per request, outside the engine's steps: HTTP, tokenisation, the API server handing the request to the engine core
and streaming the first token back. Anchor: the vLLM CI serving test (70B BF16 TP4 on H200, ShareGPT at 1 QPS, TTFT
mean 65.9 ms; perf-model.md 2.1) minus the simulated engine time (the wait for the step in flight and the prefill).
Refitted to 21 ms with ``SCHEDULER_LAG_STEPS`` at 1 (the lag then takes 14 ms of it); kept at 35 ms with the lag off,
the pair the held-out set prefers (see ``SCHEDULER_LAG_STEPS``)."""
SCHEDULER_LAG_STEPS = 0
"""Steps a request that arrives while a step runs waits beyond that step. vLLM v0.33.0 schedules with async scheduling
by default (``vllm/config/vllm.py`` L1685-1719), two batches in flight (``max_concurrent_batches``, L588-598), and
``EngineCore.step_with_batch_queue`` (``vllm/v1/engine/core.py`` L708-769) schedules the next step before the running
one returns, so the arrival joins the one after: 1 step, read from the source. **Off (0) by default**, because
calibrated both ways (1 with the overhead refitted to 21 ms, 0 with 35 ms) the fit set is the same (6.9 % and 6.8 %
median) and the held-out set is worse with the lag: 11.4 % against 10.9 % median, TTFT at light load 14.3 % against
7.9 %, TTFT under queueing 37 % against 27 %. Choosing between the two by the held-out result makes that one bit of
choice seen; the model's other terms (the per-step overhead fitted without the lag) likely absorb the lag already.
``ReplicaModel.scheduler_lag_steps`` turns it on per run."""
KV_TRANSFER_EFFICIENCY = 0.7
"""Share of the line rate a NIXL KV transfer achieves (an assumption; no published EFA/NIXL figure was found)."""
PER_SEQ_S = 0.005e-3
"""Per decoding sequence per step: sampling and block-table updates, batched on the GPU in vLLM v1. Anchor: NIM 70B
FP8 TP2 ITL growth from concurrency 1 to 25 beyond its KV reads (perf-model.md 2.1)."""


def weight_bytes(arch: ModelArchitecture) -> float:
    """Bytes of weights: quantised body plus 16-bit embeddings and LM head."""
    body = (arch.params_b - arch.embedding_params_b) * 1e9 * PRECISION_BYTES[arch.weight_precision]
    return body + arch.embedding_params_b * 1e9 * 2.0


def kv_bytes_per_token(arch: ModelArchitecture) -> int:
    """KV-cache bytes one token occupies across the whole model: 2 x layers x KV heads x head dim x bytes."""
    return int(2 * arch.layers * arch.kv_heads * arch.head_dim * PRECISION_BYTES[arch.kv_cache_precision])


def compute_tflops(arch: ModelArchitecture, gpu: GpuModel) -> float:
    """Dense tensor throughput the model's precision can use on this GPU."""
    if arch.weight_precision == "fp8" and gpu.supports_fp8:
        return gpu.fp8_dense_tflops
    return gpu.bf16_dense_tflops


def prefill_tokens_per_s(arch: ModelArchitecture, gpu: GpuModel, gpus: int) -> float:
    """Prompt tokens per second the linear layers of a ``gpus``-GPU replica compute (2 FLOPs per parameter per token)."""
    return gpus * compute_tflops(arch, gpu) * 1e12 * MFU_GEMM / (2 * arch.params_b * 1e9)


@dataclass(frozen=True)
class StepCost:
    """The coefficients of one replica's step time (``step_s``); the simulator's replica model carries them."""

    overhead_s: float
    """Per step: scheduler, launches (x pipeline stages), the all-reduces' and hand-overs' fixed latency."""
    weights_s: float
    """Streaming every weight once."""
    s_per_token: float
    """Linear-layer compute per scheduled token (decode or prefill)."""
    per_seq_s: float
    """Per decoding sequence."""
    per_context_token_s: float
    """KV read per token of context held by decoding sequences."""
    attention_s_per_pair: float
    """Prefill attention per (query token x earlier token) pair."""
    comm_s_per_token: float = 0.0
    """Tensor- and pipeline-parallel traffic per scheduled token (decode or prefill) at the link's bandwidth; 0 for one
    GPU. Not overlapped with the GEMMs (vLLM runs them in sequence), so outside the roofline."""
    batches_in_flight: int = 1
    """Micro-batches the pipeline works on at once: its stages under pipeline parallelism (``pipeline_batches``),
    else 1 (vLLM keeps one batch more in flight, ``concurrent_batches``). The engine issues one micro-batch per
    ``schedule()`` call, each with its own token budget, and a decoding sequence is due again ``pp`` calls after it was
    scheduled, so the sequences spread over the micro-batches and the memory-bound per-sequence parts (KV read,
    sampling) are paid per micro-batch of ``n / m`` sequences, ``m = min(batches, n)`` (``decode_share``; ``stage_s``
    is one micro-batch's time on one stage)."""

    def decode_share(self, n_decode: int) -> float:
        """Share of the decoding sequences one in-flight micro-batch holds: ``1 / min(batches_in_flight, n)``; 1 without
        pipeline parallelism or with at most one sequence (one sequence is never in two batches at once)."""
        m = self.batches_in_flight if n_decode >= self.batches_in_flight else n_decode
        return 1.0 / m if m > 1 else 1.0

    def context_token_s(self, n_decode: int) -> float:
        """Seconds per token of context held by ``n_decode`` decoding sequences in one step: the KV read, shared over
        the in-flight micro-batches (``decode_share``). The engine's decode runs read it per batch size."""
        return self.per_context_token_s * self.decode_share(n_decode)

    @property
    def token_s(self) -> float:
        """Seconds each scheduled token adds once a step is compute-bound: its linear layers plus its parallel
        traffic (the per-token slope of ``step_s`` past the roofline)."""
        return self.s_per_token + self.comm_s_per_token

    def step_s(self, n_decode: int, context_tokens: float, prefill_tokens: int = 0, prefill_pairs: float = 0.0) -> float:
        """One step of ``n_decode`` decoding sequences holding ``context_tokens`` of KV plus ``prefill_tokens`` prompt
        tokens whose attention spans ``prefill_pairs`` (query token x earlier token) pairs: the module's formula."""
        tokens = n_decode + prefill_tokens
        gemm = self.s_per_token * tokens
        if gemm < self.weights_s:  # the roofline: weights stream once however few tokens (max() costs a call)
            gemm = self.weights_s
        per_seq, per_ctx = self.per_seq_s, self.per_context_token_s
        if self.batches_in_flight > 1 and n_decode > 1:  # pipeline parallelism: the memory-bound parts per micro-batch
            share = self.decode_share(n_decode)
            per_seq, per_ctx = per_seq * share, per_ctx * share
        return (
            self.overhead_s + per_seq * n_decode + gemm + per_ctx * context_tokens
            + self.attention_s_per_pair * prefill_pairs + self.comm_s_per_token * tokens
        )

    def stage_s(self, n_decode: int, context_tokens: float, prefill_tokens: float, prefill_pairs: float) -> float:
        """One micro-batch's time on one pipeline stage: ``n_decode`` decoding sequences holding ``context_tokens`` of
        KV plus ``prefill_tokens`` prompt tokens spanning ``prefill_pairs`` attention pairs; without pipeline
        parallelism, ``step_s``.

        A stage holds 1/b of the layers on 1/b of the GPUs, so its per-token compute is the whole replica's
        (``s_per_token``), its share of the weights ``weights_s / b``, and its KV read and per-sequence work 1/b of the
        micro-batch's. That is ``step_s`` of a pipeline full of ``b`` copies of this micro-batch (its decodes spread
        one copy per micro-batch, ``decode_share``), divided by ``b``: a pipeline of equal micro-batches emits one
        every stage-time, so ``b`` of them cost what one step of all their tokens costs, and one micro-batch crosses
        the ``b`` stages in ``b`` stage-times (the pipeline does not speed up one micro-batch)."""
        b = self.batches_in_flight
        if b == 1:
            return self.step_s(n_decode, context_tokens, int(prefill_tokens), prefill_pairs)
        return self.step_s(b * n_decode, b * context_tokens, int(b * prefill_tokens), b * prefill_pairs) / b

    def step_s_array(
        self, n_decode: np.ndarray | float, context_tokens: np.ndarray | float, prefill_tokens: np.ndarray | float = 0.0,
        prefill_pairs: np.ndarray | float = 0.0,
    ) -> np.ndarray:
        """``step_s`` over arrays, term for term in the same order (``tests/test_perf.py`` holds them equal to the
        bit): the simulator's per-request bounds evaluate every request at once."""
        import numpy as np

        tokens = n_decode + prefill_tokens
        gemm = np.maximum(self.weights_s, self.s_per_token * tokens)
        share: np.ndarray | float = 1.0
        if self.batches_in_flight > 1:  # ``decode_share`` elementwise
            share = 1.0 / np.clip(n_decode, 1, self.batches_in_flight)
        out: np.ndarray = (
            self.overhead_s + self.per_seq_s * share * n_decode + gemm + self.per_context_token_s * share * context_tokens
            + self.attention_s_per_pair * prefill_pairs + self.comm_s_per_token * tokens
        )
        return out

    def prefill_alone_s(self, prompt_tokens: np.ndarray, chunk_tokens: int) -> np.ndarray:
        """Time to first token of each prompt alone on an idle replica, prefilled in ``chunk_tokens`` chunks
        (``--max-num-batched-tokens``): full chunks, the remainder, and the causal attention of the whole prompt (each
        chunk attends to itself and to the chunks before it, p^2 / 2 pairs in all). Under pipeline parallelism the chunks
        cross the stages one micro-batch each (``pipelined_prefill_s``)."""
        import numpy as np

        if self.batches_in_flight > 1:
            return self._pipelined_alone_s(np.asarray(prompt_tokens, dtype=float), float(chunk_tokens))
        p = np.asarray(prompt_tokens, dtype=float)
        chunk = float(chunk_tokens)
        full = np.floor(p / chunk)
        rest = p - full * chunk
        step_rest = np.where(rest > 0, self.step_s_array(0.0, 0.0, rest), 0.0)
        out: np.ndarray = full * self.step_s(0, 0.0, chunk_tokens) + step_rest + self.attention_s_per_pair * p * p / 2.0
        return out

    def _pipelined_alone_s(self, p: np.ndarray, chunk: float) -> np.ndarray:
        """``prefill_alone_s`` under pipeline parallelism, each distinct length once (``pipelined_prefill_s``)."""
        import numpy as np

        times = {length: self.pipelined_prefill_s(length, chunk) for length in set(p.tolist())}
        return np.array([times[length] for length in p.tolist()], dtype=float)

    def pipelined_prefill_s(self, prompt_tokens: float, chunk: float) -> float:
        """A prompt alone on an idle pipeline-parallel replica, as the engine steps it: vLLM schedules one chunk per
        ``schedule()`` call, a call whenever fewer than ``concurrent_batches`` (``pp + 1``) batches are in flight
        (``EngineCore.step_with_batch_queue``, ``vllm/v1/engine/core.py`` L708-769 at v0.33.0), and a prompt's next
        chunk may go in the very next call (``_update_after_schedule``, ``vllm/v1/core/sched/scheduler.py``
        L1845-1856): the first ``pp + 1`` chunks are issued at once, each later one as the batch ``pp + 1`` calls before
        it returns. Each chunk crosses the stages in turn (``cross_stages``); a chunk before the last samples nothing, so
        no call waits for a sampled token; the first token comes when the last chunk leaves the last stage."""
        b = self.batches_in_flight
        q = concurrent_batches(b)
        free = [0.0] * b
        returns: list[float] = []
        done = 0.0
        last = 0.0
        while done < prompt_tokens:
            call = returns[-q] if len(returns) >= q else 0.0
            take = min(prompt_tokens - done, chunk)
            last = cross_stages(free, call, self.stage_s(0, 0.0, take, take * (done + take / 2.0)))
            returns.append(last)
            done += take
        return last


def cross_stages(stage_free: list[float], t: float, stage_s: float) -> float:
    """A micro-batch issued at ``t`` crossing the pipeline's stages in turn, ``stage_s`` on each: each PP rank receives
    the previous rank's hidden states, runs its layers and sends them on (``vllm/v1/worker/gpu_worker.py`` L1334-1388
    at v0.33.0), and a stage works on one micro-batch at a time, in the order they were issued, so a micro-batch
    starts on a stage when it leaves the stage before and the stage is free (``stage_free[k]``, moved to its end
    there). The hand-over's fixed latency is in ``overhead_s``. Returns when it leaves the last stage."""
    for k in range(len(stage_free)):
        free = stage_free[k]
        t = (free if free > t else t) + stage_s
        stage_free[k] = t
    return t


def allreduce_bytes_per_token(arch: ModelArchitecture, tp: int) -> float:
    """Bytes one token's all-reduces put on each GPU's link in one step: two per layer of its hidden state, of which a
    ring all-reduce sends 2 (tp - 1) / tp across every GPU's link."""
    if tp <= 1:
        return 0.0
    return 2 * arch.layers * 2.0 * (tp - 1) / tp * arch.hidden_size * ACTIVATION_BYTES


def allreduce_latency_s(gpu: GpuModel, tp: int) -> float:
    """Fixed part of one all-reduce across ``tp`` GPUs of this part: none for one GPU, vLLM's custom all-reduce over
    NVLink or across two PCIe GPUs, NCCL across more PCIe GPUs."""
    if tp <= 1:
        return 0.0
    if gpu.nvlink_gb_s <= 0 and tp > CUSTOM_ALLREDUCE_MAX_PCIE_GPUS:
        return NCCL_PCIE_ALLREDUCE_LATENCY_S
    return ALLREDUCE_LATENCY_S


def step_cost(
    arch: ModelArchitecture, gpu: GpuModel, tp: int, pp: int, *, prefill_rate: float | None = None,
    stage_link_gb_s: float | None = None,
) -> StepCost:
    """Step coefficients of a TP x PP replica. With pipeline parallelism each stage holds 1/pp of the layers and one
    micro-batch crosses every stage, so the weights' stream does not shrink with ``pp``; compute does (the stages work
    on ``pp`` micro-batches at once), and so do the KV read and per-sequence work of a decode step, spread over those
    micro-batches (``pipeline_batches``, ``StepCost.decode_share``). ``prefill_rate`` overrides the linear-layer throughput (the sizing's figure).
    ``stage_link_gb_s``: the bandwidth a pipeline-stage boundary crosses (the function ``stage_link_gb_s`` gives it per
    instance), by default the GPU's own link within a node."""
    bw = gpu.memory_bandwidth_tb_s * 1e12
    gpus = tp * pp
    rate = prefill_rate if prefill_rate is not None else prefill_tokens_per_s(arch, gpu, gpus)
    tp_link = gpu.tp_link_gb_s * 1e9 * LINK_EFFICIENCY
    stage_link = (stage_link_gb_s if stage_link_gb_s is not None else gpu.tp_link_gb_s) * 1e9 * LINK_EFFICIENCY
    boundaries = pp - 1
    # the bandwidth terms are per token, so counted as the prefill compute is, with the stages pipelining (each stage
    # all-reduces its 1/pp of the layers, and a token's hand-overs overlap: one boundary's worth); the latencies are per
    # step, which crosses every stage in turn, so they add up
    handover = arch.hidden_size * ACTIVATION_BYTES / stage_link if boundaries else 0.0
    comm = allreduce_bytes_per_token(arch, tp) / pp / tp_link + handover
    latency = 2 * arch.layers * allreduce_latency_s(gpu, tp) + boundaries * ALLREDUCE_LATENCY_S
    return StepCost(
        overhead_s=STEP_OVERHEAD_S * pp + latency,
        weights_s=weight_bytes(arch) / tp / (bw * WEIGHT_BW_EFFICIENCY),
        s_per_token=1.0 / rate,
        per_seq_s=PER_SEQ_S,
        per_context_token_s=kv_bytes_per_token(arch) / tp / (bw * KV_BW_EFFICIENCY),
        attention_s_per_pair=4.0 * arch.layers * arch.attention_heads * arch.head_dim
        / (gpus * gpu.bf16_dense_tflops * 1e12 * MFU_ATTENTION),
        comm_s_per_token=comm,
        batches_in_flight=pipeline_batches(pp),
    )


def pipeline_batches(pp: int) -> int:
    """Micro-batches a pipeline-parallel replica works on at once: one per stage (``pp``; 1 without PP). The
    decodes spread over them (``StepCost.decode_share``): with vLLM v0.33.0's default V2 model runner and async
    scheduling (``concurrent_batches``), a decode scheduled in one ``schedule()`` call is eligible again exactly
    ``pp_size`` calls later (``vllm/v1/core/sched/async_scheduler.py`` L18-22 and L51-56, checked at
    ``vllm/v1/core/sched/scheduler.py`` L816-820), so each decoding sequence keeps to one of ``pp`` call residues."""
    return pp if pp > 1 else 1


def concurrent_batches(stages: int) -> int:
    """Batches vLLM v0.33.0 keeps in flight by default with ``stages`` pipeline stages (> 1):
    ``VllmConfig.max_concurrent_batches`` (``vllm/config/vllm.py`` L587-598) is ``pp_size + 1`` with async scheduling
    and the V2 model runner. Both are the default for ``vllm serve`` with pipeline parallelism: the V2 runner unless an
    environment variable, a missing Triton or an unsupported feature says otherwise (``use_v2_model_runner``,
    L730-767; the only PP entry in ``_get_v2_model_runner_unsupported_features``, L3053-3064, is the external launcher,
    not ``vllm serve``'s default ``mp`` executor, ``vllm/config/parallel.py`` L1054-1095), and async scheduling unless
    an option is incompatible (L1685-1719; PP is incompatible only with the V1 runner, L1651-1666), the ``mp``
    executor supporting it (``vllm/v1/executor/multiproc_executor.py`` L666-667). ``EngineCore.step_with_batch_queue``
    (``vllm/v1/engine/core.py`` L708-769) fills that many slots, an empty batch included while the scheduler has
    requests, before it waits for the oldest (``Engine._call``)."""
    return stages + 1


def stage_link_gb_s(gpu: GpuModel, gpus_per_node: int, network_gbps: float, tp: int, pp: int) -> float:
    """Bandwidth a pipeline-stage boundary of a TP x PP replica crosses, GB/s: the GPU's own link while the replica
    fits one node, else the network (EFA on p4d/p5), each TP rank sending its slice over its share of the node's NICs
    (``network_gbps / gpus_per_node``, as ``kv_link_bytes_per_s``) and the ranks in parallel."""
    if tp * pp <= gpus_per_node:
        return gpu.tp_link_gb_s
    return network_gbps / 8.0 * tp / gpus_per_node


def request_overhead_s() -> float:
    """Seconds each request spends outside the engine before its first token reaches the client (HTTP, tokenisation,
    hand-over to the engine core, streaming back): what a client adds to the engine's own time to first token."""
    return REQUEST_OVERHEAD_S


def kv_link_bytes_per_s(network_gbps: float, gpus_per_node: int, replica_gpus: int) -> float:
    """Line rate of the network a replica's KV leaves (prefill) or arrives (decode) by: its GPUs' share of their nodes'
    bandwidth, ``network_gbps x replica GPUs / GPUs per node``. Each tensor-parallel rank holds its own slice of the KV
    (the KV heads are split across ranks) and NIXL moves every slice from its own GPU over that GPU's NICs, so the
    slices travel in parallel: a pod's share counts once per pod of the replica, and a replica spanning two nodes uses
    both nodes' NICs (neither the one pod's share nor a cap at one node)."""
    return network_gbps * 1e9 / 8.0 * (replica_gpus / gpus_per_node)


def decode_step_s(arch: ModelArchitecture, gpu: GpuModel, tp: int, pp: int, batch: int, context_tokens: float) -> float:
    """Seconds for one decode step of ``batch`` sequences holding ``context_tokens`` tokens of KV in total."""
    return step_cost(arch, gpu, tp, pp).step_s(batch, context_tokens)
