"""Replica performance model shared by sizing and the simulator: one roofline step for every engine step.

A vLLM step runs one forward pass over every scheduled token (one per decoding sequence plus the prefill chunks):

    t_step = overhead + per_seq x n_decode
             + max(weights streamed once, linear-layer FLOPs of all tokens at MFU_GEMM)    (roofline of the GEMMs)
             + KV read by decode attention                                                (memory-bound)
             + causal attention FLOPs of the prefill chunks at MFU_ATTENTION               (compute-bound)

A mixed chunked-prefill step therefore costs close to the larger of its prefill and decode parts, not their sum: the
weights are read once for both. ``docs/simulator.md`` (Calibration) tabulates the error against published
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

MFU_GEMM = 0.50
"""Model FLOPs utilisation of the linear layers once a step is compute-bound (prefill chunks, large batches).
Anchors (perf-model.md 2.2): TensorRT-LLM 70B FP8 on 2 x H100 at 2048/128 reaches ~43% of FP8 peak with its decode
time included, and NIM's single-request 5,000-token TTFT (407 ms, 2 x H100 FP8) needs ~50%; Splitwise's 2023 vLLM
BF16 stack reached ~36% (10.2k tok/s, 70B TP4 H100), which current kernels exceed."""
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
ALLREDUCE_S_PER_LAYER = 30e-6
"""Two tensor-parallel all-reduces per layer over NVLink per step (~15 us each for decode-sized messages): the
70B TP4 vs 8B TP1 gap of the vLLM CI latency test."""
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
    """Per step: scheduler, launches, all-reduces (x pipeline stages)."""
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

    def step_s(self, n_decode: int, context_tokens: float, prefill_tokens: int = 0, prefill_pairs: float = 0.0) -> float:
        """One step of ``n_decode`` decoding sequences holding ``context_tokens`` of KV plus ``prefill_tokens`` prompt
        tokens whose attention spans ``prefill_pairs`` (query token x earlier token) pairs: the module's formula."""
        gemm = self.s_per_token * (n_decode + prefill_tokens)
        if gemm < self.weights_s:  # the roofline: weights stream once however few tokens (max() costs a call)
            gemm = self.weights_s
        return (
            self.overhead_s + self.per_seq_s * n_decode + gemm + self.per_context_token_s * context_tokens
            + self.attention_s_per_pair * prefill_pairs
        )

    def step_s_array(
        self, n_decode: np.ndarray | float, context_tokens: np.ndarray | float, prefill_tokens: np.ndarray | float = 0.0,
        prefill_pairs: np.ndarray | float = 0.0,
    ) -> np.ndarray:
        """``step_s`` over arrays, term for term in the same order (``tests/test_perf.py`` holds them equal to the
        bit): the simulator's per-request bounds evaluate every request at once."""
        import numpy as np

        gemm = np.maximum(self.weights_s, self.s_per_token * (n_decode + prefill_tokens))
        out: np.ndarray = (
            self.overhead_s + self.per_seq_s * n_decode + gemm + self.per_context_token_s * context_tokens
            + self.attention_s_per_pair * prefill_pairs
        )
        return out

    def prefill_alone_s(self, prompt_tokens: np.ndarray, chunk_tokens: int) -> np.ndarray:
        """Time to first token of each prompt alone on an idle replica, prefilled in ``chunk_tokens`` chunks
        (``--max-num-batched-tokens``): full chunks, the remainder, and the causal attention of the whole prompt (each
        chunk attends to itself and to the chunks before it, p^2 / 2 pairs in all)."""
        import numpy as np

        p = np.asarray(prompt_tokens, dtype=float)
        chunk = float(chunk_tokens)
        full = np.floor(p / chunk)
        rest = p - full * chunk
        step_rest = np.where(rest > 0, self.step_s_array(0.0, 0.0, rest), 0.0)
        out: np.ndarray = full * self.step_s(0, 0.0, chunk_tokens) + step_rest + self.attention_s_per_pair * p * p / 2.0
        return out


def step_cost(arch: ModelArchitecture, gpu: GpuModel, tp: int, pp: int, *, prefill_rate: float | None = None) -> StepCost:
    """Step coefficients of a TP x PP replica. With pipeline parallelism each stage holds 1/pp of the layers and one
    step crosses every stage, so the memory-bound parts do not shrink with ``pp``; prefill throughput does (stages
    pipeline micro-batches). ``prefill_rate`` overrides the linear-layer throughput (the sizing's figure)."""
    bw = gpu.memory_bandwidth_tb_s * 1e12
    gpus = tp * pp
    rate = prefill_rate if prefill_rate is not None else prefill_tokens_per_s(arch, gpu, gpus)
    return StepCost(
        overhead_s=STEP_OVERHEAD_S * pp + (ALLREDUCE_S_PER_LAYER * arch.layers if tp > 1 else 0.0),
        weights_s=weight_bytes(arch) / tp / (bw * WEIGHT_BW_EFFICIENCY),
        s_per_token=1.0 / rate,
        per_seq_s=PER_SEQ_S,
        per_context_token_s=kv_bytes_per_token(arch) / tp / (bw * KV_BW_EFFICIENCY),
        attention_s_per_pair=4.0 * arch.layers * arch.attention_heads * arch.head_dim
        / (gpus * gpu.bf16_dense_tflops * 1e12 * MFU_ATTENTION),
    )


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
