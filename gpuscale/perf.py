"""Replica performance model shared by sizing and the simulator.

Roofline-style estimates fitted to the published figures in ``research/perf-model.md``:
prefill is compute-bound (MFU 0.35 reproduces Splitwise's ~10k tok/s for 70B BF16 TP4 on H100),
decode is bandwidth-bound (weights once per step plus the KV of every running sequence).
``docs/simulator.md`` tabulates the error against published measurements.
"""

from __future__ import annotations

from gpuscale.spec.catalogue import GpuModel
from gpuscale.spec.model import PRECISION_BYTES, ModelArchitecture

GIB = 1024**3

MFU_PREFILL = 0.35
"""Model FLOPs utilisation during prefill (perf-model.md 2.2: 35-50% for vLLM BF16)."""
WEIGHT_BW_EFFICIENCY = 0.75
"""Fraction of HBM bandwidth achieved streaming weights in a decode step."""
KV_BW_EFFICIENCY = 0.35
"""Fraction of bandwidth achieved reading KV in paged attention; fitted so bs 64 x 2k context is ~1.7x bs 1 (Splitwise)."""
STEP_OVERHEAD_S = 1.0e-3
"""Scheduler and kernel-launch overhead per engine step."""
ALLREDUCE_S_PER_LAYER = 30e-6
"""Two tensor-parallel all-reduces per layer over NVLink, per step."""
PER_SEQ_S = 0.05e-3
"""Sampling and bookkeeping per running sequence per step."""


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
    """Prompt tokens per second one replica of ``gpus`` GPUs prefills (2 FLOPs per parameter per token)."""
    return gpus * compute_tflops(arch, gpu) * 1e12 * MFU_PREFILL / (2 * arch.params_b * 1e9)


def decode_step_s(arch: ModelArchitecture, gpu: GpuModel, tp: int, pp: int, batch: int, context_tokens: float) -> float:
    """Seconds for one decode step of ``batch`` sequences holding ``context_tokens`` tokens of KV in total.

    With pipeline parallelism each stage holds 1/pp of the layers and the step crosses every stage.
    """
    bw = gpu.memory_bandwidth_tb_s * 1e12
    gpus = tp * pp
    weights = weight_bytes(arch) / gpus / (bw * WEIGHT_BW_EFFICIENCY) * pp
    kv = context_tokens * kv_bytes_per_token(arch) / gpus / (bw * KV_BW_EFFICIENCY) * pp
    allreduce = ALLREDUCE_S_PER_LAYER * arch.layers if tp > 1 else 0.0
    return STEP_OVERHEAD_S * pp + weights + kv + allreduce + PER_SEQ_S * batch
