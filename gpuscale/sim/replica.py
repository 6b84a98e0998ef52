"""The numbers of one vLLM replica the simulator steps with, built from ``gpuscale.perf`` and ``gpuscale.sizing``.

Nothing here is typed by hand: the step cost is ``perf.StepCost`` (the roofline step every engine step uses), the KV
capacity and prefill rate come from the sizing. ``gpuscale.sim.vllm_engine`` runs the scheduler on them.
"""

from __future__ import annotations

from functools import cached_property
from typing import overload

import numpy as np
from pydantic import Field

from gpuscale import perf, sizing
from gpuscale.spec.base import Spec
from gpuscale.spec.catalogue import CATALOGUE, GpuInstanceType
from gpuscale.spec.model import ModelDeployment

KV_BLOCK_TOKENS = 16
"""vLLM's default ``--block-size``: KV is allocated, cached and freed in blocks of this many tokens."""


class ReplicaModel(Spec):
    """One replica's step cost and scheduler limits."""

    gpu: str
    """GPU part."""
    gpus: int = Field(gt=0)
    """GPUs per replica (TP x PP)."""
    tensor_parallel_size: int = Field(gt=0)
    pipeline_parallel_size: int = Field(gt=0)
    cost: perf.StepCost
    """The step time's coefficients (``perf.step_cost``): every step the engine takes costs ``cost.step_s``."""
    kv_capacity_tokens: int = Field(gt=0)
    """KV-cache tokens (sizing's ``kv_capacity_tokens``)."""
    block_tokens: int = Field(default=KV_BLOCK_TOKENS, gt=0)
    """KV block size, tokens."""
    max_num_seqs: int = Field(gt=0)
    """vLLM ``--max-num-seqs``."""
    max_num_batched_tokens: int = Field(gt=0)
    """vLLM ``--max-num-batched-tokens``: the token budget of one ``schedule()`` call, one step's without pipeline
    parallelism (``step_token_budget``)."""
    max_model_len: int = Field(gt=0)
    """Longest prompt + output accepted; longer requests are rejected (HTTP 400)."""
    kv_bytes_per_token: int = Field(gt=0)
    """KV bytes per token across the model (prefill -> decode transfer size)."""
    scheduler_lag_steps: int = Field(default=perf.SCHEDULER_LAG_STEPS, ge=0)
    """Steps a request arriving while the engine is busy waits beyond the next boundary (``perf.SCHEDULER_LAG_STEPS``:
    vLLM's async scheduling)."""

    @property
    def prefill_tokens_per_s(self) -> float:
        return 1.0 / self.cost.s_per_token

    @property
    def step_token_budget(self) -> int:
        """Tokens the engine schedules at most per step without pipeline parallelism, and per pipeline's worth of calls
        with it: ``max_num_batched_tokens`` per in-flight micro-batch, since vLLM calls ``schedule()`` once per batch it
        puts in flight and each call has the whole budget (``perf.StepCost.batches_in_flight``)."""
        return self.cost.batches_in_flight * self.max_num_batched_tokens

    @property
    def kv_capacity_blocks(self) -> int:
        return self.kv_capacity_tokens // self.block_tokens

    @cached_property
    def max_request_tokens(self) -> int:
        """Prompt plus output a replica accepts: the model's context and the replica's KV, whichever is smaller."""
        return min(self.max_model_len, self.kv_capacity_tokens)

    @cached_property
    def decode_fixed_s(self) -> tuple[float, ...]:
        """``cost.step_s(n, 0)`` for n = 0 .. ``max_num_seqs``: a decode step's part that does not grow with context,
        looked up by the engine once per decode run."""
        return tuple(self.cost.step_s(n, 0.0) for n in range(self.max_num_seqs + 1))

    @cached_property
    def decode_context_s(self) -> tuple[float, ...]:
        """``cost.context_token_s(n)`` for n = 0 .. ``max_num_seqs``: a decode step's seconds per token of context at
        batch ``n`` (the KV read, shared over the in-flight micro-batches under pipeline parallelism)."""
        return tuple(self.cost.context_token_s(n) for n in range(self.max_num_seqs + 1))

    @overload
    def fits(self, prompt: int, output: int) -> bool: ...
    @overload
    def fits(self, prompt: np.ndarray, output: np.ndarray) -> np.ndarray: ...

    def fits(self, prompt: int | np.ndarray, output: int | np.ndarray) -> bool | np.ndarray:
        """Whether a request is accepted at all (else HTTP 400: longer than the context or the KV); elementwise over
        arrays of requests. The router, the servable mask and the lower bound all ask this."""
        return prompt + output <= self.max_request_tokens

    def idle_prefill_s(self, prompt: int) -> float:
        """A prompt alone on an idle replica, in ``max_num_batched_tokens`` chunks: its TTFT there."""
        return float(self.cost.prefill_alone_s(np.array([prompt]), self.max_num_batched_tokens)[0])


def build_replica_model(
    model: ModelDeployment, instance: GpuInstanceType, tp: int, pp: int, *, kv_capacity_tokens: int | None = None,
    prefill_tokens_per_s: float | None = None,
) -> ReplicaModel:
    """Replica numbers from ``gpuscale.perf`` and ``gpuscale.sizing`` for one TP x PP layout."""
    arch, gpu = model.architecture, instance.gpu
    stage_link = perf.stage_link_gb_s(gpu, instance.gpus_per_node, instance.network_gbps, tp, pp)
    cost = perf.step_cost(arch, gpu, tp, pp, prefill_rate=prefill_tokens_per_s, stage_link_gb_s=stage_link)
    kv = kv_capacity_tokens if kv_capacity_tokens is not None else sizing.kv_capacity_tokens(model, instance, tp, pp)
    return ReplicaModel(
        gpu=gpu.name,
        gpus=tp * pp,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        cost=cost,
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



def servable_mask(
    replica: ReplicaModel, prompt: np.ndarray, output: np.ndarray, ttft_slo_s: float, itl_slo_s: float, *,
    disaggregated: bool, transfer_bytes_per_s: float,
) -> np.ndarray:
    """Requests that fit and meet both SLO targets alone on an idle replica: the API server's per-request overhead and
    the prompt's chunked prefill (plus, for
    P/D, its KV transfer and the decode side's first step), then one step per token at the mean context."""
    c = replica.cost
    p = prompt.astype(float)
    ttft = c.prefill_alone_s(p, replica.max_num_batched_tokens) + perf.request_overhead_s()  # the router's _admit
    if disaggregated:
        ttft = ttft + p * replica.kv_bytes_per_token / transfer_bytes_per_s + c.step_s_array(1, p)
    tpot = c.step_s_array(1, p + output.astype(float) / 2.0)
    ok: np.ndarray = replica.fits(prompt, output) & (ttft <= ttft_slo_s) & ((output <= 1) | (tpot <= itl_slo_s))
    return ok
