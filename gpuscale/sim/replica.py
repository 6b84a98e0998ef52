"""The numbers of one vLLM replica the simulator steps with, built from ``gpuscale.perf`` and ``gpuscale.sizing``.

Nothing here is typed by hand: the step coefficients come from ``perf.step_cost`` (the roofline step every engine step
uses), the KV capacity and prefill rate from the sizing. ``gpuscale.sim.vllm_engine`` runs the scheduler on them.
"""

from __future__ import annotations

from pydantic import Field

from gpuscale import perf, sizing
from gpuscale.spec.base import Spec
from gpuscale.spec.catalogue import CATALOGUE, GpuInstanceType
from gpuscale.spec.model import ModelDeployment

KV_BLOCK_TOKENS = 16
"""vLLM's default ``--block-size``: KV is allocated, cached and freed in blocks of this many tokens."""


class ReplicaModel(Spec):
    """One replica's step coefficients and scheduler limits."""

    gpu: str
    """GPU part."""
    gpus: int = Field(gt=0)
    """GPUs per replica (TP x PP)."""
    tensor_parallel_size: int = Field(gt=0)
    pipeline_parallel_size: int = Field(gt=0)
    step_overhead_s: float = Field(ge=0)
    """Per step: scheduler, launches, all-reduces."""
    step_weights_s: float = Field(gt=0)
    """Streaming the weights once (the floor of every step)."""
    step_s_per_token: float = Field(gt=0)
    """Linear-layer compute per scheduled token; 1 / prefill rate."""
    step_per_seq_s: float = Field(ge=0)
    """Extra step time per decoding sequence."""
    step_per_context_token_s: float = Field(ge=0)
    """Extra step time per token of KV read by decode attention."""
    attention_s_per_token_pair: float = Field(ge=0)
    """Prefill attention: seconds per (query token x earlier token) pair."""
    kv_capacity_tokens: int = Field(gt=0)
    """KV-cache tokens (sizing's ``kv_capacity_tokens``)."""
    block_tokens: int = Field(default=KV_BLOCK_TOKENS, gt=0)
    """KV block size, tokens."""
    max_num_seqs: int = Field(gt=0)
    """vLLM ``--max-num-seqs``."""
    max_num_batched_tokens: int = Field(gt=0)
    """vLLM ``--max-num-batched-tokens`` (chunked-prefill budget per step)."""
    max_model_len: int = Field(gt=0)
    """Longest prompt + output accepted; longer requests are rejected (HTTP 400)."""
    kv_bytes_per_token: int = Field(gt=0)
    """KV bytes per token across the model (prefill -> decode transfer size)."""

    @property
    def prefill_tokens_per_s(self) -> float:
        return 1.0 / self.step_s_per_token

    @property
    def kv_capacity_blocks(self) -> int:
        return self.kv_capacity_tokens // self.block_tokens

    def step_s(self, n_decode: int, context_tokens: float, prefill_tokens: int = 0, prefill_pairs: float = 0.0) -> float:
        """``perf.StepCost.step_s`` on this replica's coefficients."""
        gemm = self.step_s_per_token * (n_decode + prefill_tokens)
        return (
            self.step_overhead_s + self.step_per_seq_s * n_decode + (gemm if gemm > self.step_weights_s else self.step_weights_s)
            + self.step_per_context_token_s * context_tokens + self.attention_s_per_token_pair * prefill_pairs
        )

    def decode_step_s(self, n_seqs: int, context_tokens: float) -> float:
        return self.step_s(n_seqs, context_tokens)

    def prefill_s(self, tokens: int, start: int = 0) -> float:
        """One step that only prefills ``tokens`` prompt tokens at positions ``start``.."""
        return self.step_s(0, 0.0, tokens, tokens * start + tokens * tokens / 2.0)

    def idle_prefill_s(self, prompt: int) -> float:
        """A prompt alone on an idle replica, in ``max_num_batched_tokens`` chunks: its TTFT there."""
        chunk = self.max_num_batched_tokens
        full, rest = divmod(prompt, chunk)
        t = full * self.prefill_s(chunk) + (self.prefill_s(rest) if rest else 0.0)
        # attention of each chunk against the chunks before it (prefill_s counts only the chunk's own triangle)
        return t + self.attention_s_per_token_pair * (prompt * prompt / 2.0 - (full * chunk * chunk + rest * rest) / 2.0)

    def blocks(self, tokens: int) -> int:
        return -(-tokens // self.block_tokens)

    def fits(self, prompt: int, output: int) -> bool:
        return prompt + output <= min(self.max_model_len, self.kv_capacity_tokens)


def build_replica_model(
    model: ModelDeployment, instance: GpuInstanceType, tp: int, pp: int, *, kv_capacity_tokens: int | None = None,
    prefill_tokens_per_s: float | None = None,
) -> ReplicaModel:
    """Replica numbers from ``gpuscale.perf`` and ``gpuscale.sizing`` for one TP x PP layout."""
    arch, gpu = model.architecture, instance.gpu
    cost = perf.step_cost(arch, gpu, tp, pp, prefill_rate=prefill_tokens_per_s)
    kv = kv_capacity_tokens if kv_capacity_tokens is not None else sizing.kv_capacity_tokens(model, instance, tp, pp)
    return ReplicaModel(
        gpu=gpu.name,
        gpus=tp * pp,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        step_overhead_s=cost.overhead_s,
        step_weights_s=cost.weights_s,
        step_s_per_token=cost.s_per_token,
        step_per_seq_s=cost.per_seq_s,
        step_per_context_token_s=cost.per_context_token_s,
        attention_s_per_token_pair=cost.attention_s_per_pair,
        kv_capacity_tokens=max(KV_BLOCK_TOKENS, kv),
        max_num_seqs=sizing.max_num_seqs(model, instance),
        max_num_batched_tokens=sizing.max_num_batched_tokens(instance),
        max_model_len=arch.max_context_tokens,
        kv_bytes_per_token=perf.kv_bytes_per_token(arch),
    )


def replica_model_from_sizing(model: ModelDeployment, ms: sizing.ModelSizing) -> ReplicaModel:
    """The replica the platform is sized with: same shape, KV capacity and prefill rate as ``ModelSizing``."""
    shape = ms.shape
    return build_replica_model(
        model, CATALOGUE[shape.instance_type], shape.tensor_parallel_size, shape.pipeline_parallel_size,
        kv_capacity_tokens=ms.kv_capacity_tokens, prefill_tokens_per_s=ms.prefill_tokens_per_s,
    )

