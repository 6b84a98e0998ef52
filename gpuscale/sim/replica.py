"""One vLLM replica: iteration-level continuous batching with chunked prefill, on the sizing's numbers.

The step time is the one ``gpuscale.perf`` sizes the platform with (perf-model.md 2.3):

    t_step = base + per_seq * n_decode + per_ctx * sum(context of decoding sequences)
             + prefill_tokens / prefill_tokens_per_s + attention(prefill chunks)

``base`` (weights streamed once per step, all-reduces, overhead), ``per_seq`` and ``per_ctx`` are read off
``perf.decode_step_s``, which is linear; ``prefill_tokens_per_s`` and the KV capacity are the sizing's. The one
addition is the quadratic attention term of prefill (4 x layers x heads x head_dim FLOPs per query/context token
pair at the same MFU): below ~10k tokens it adds a few percent, for a 1M-token prompt it dominates.

Scheduling follows vLLM v1: every running sequence decodes one token per step; the rest of the
``max_num_batched_tokens`` budget goes to prefill chunks, continuing prompts first, then new requests in arrival
order while their KV fits and ``max_num_seqs`` allows. KV is reserved for prompt + output at admission (vLLM
allocates blocks as it goes and preempts on overflow; reserving up front is the same capacity without
recomputation), and a request that does not fit waits at the head of the queue.

Speed: a run of pure decode steps is one event, from the current step to the next completion (the step time is
linear in context, so the run's length has a closed form). A new request interrupts a run at the next step
boundary, exactly where vLLM would admit it.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import deque
from typing import TYPE_CHECKING, Protocol

from pydantic import Field

from gpuscale import perf, sizing
from gpuscale.spec.base import Spec
from gpuscale.spec.catalogue import CATALOGUE, GpuInstanceType
from gpuscale.spec.model import ModelDeployment

if TYPE_CHECKING:
    from gpuscale.sim.engine import Environment

"""Parts vLLM gives the large scheduler defaults (``EngineArgs.get_batch_defaults``)."""
KV_TRANSFER_GB_S = 25.0
"""Effective prefill -> decode KV transfer rate per request (NIXL over EFA/NVLink), GB/s; an assumption."""


class ReplicaModel(Spec):
    """The numbers of one replica the simulator steps with; built from sizing, never typed by hand."""

    gpu: str
    """GPU part."""
    gpus: int = Field(gt=0)
    """GPUs per replica (TP x PP)."""
    tensor_parallel_size: int = Field(gt=0)
    pipeline_parallel_size: int = Field(gt=0)
    step_base_s: float = Field(gt=0)
    """Step time with nothing in the batch: weights streamed once, all-reduces, scheduler overhead."""
    step_per_seq_s: float = Field(ge=0)
    """Extra step time per decoding sequence (sampling, bookkeeping)."""
    step_per_context_token_s: float = Field(ge=0)
    """Extra step time per token of KV read by decode attention."""
    prefill_tokens_per_s: float = Field(gt=0)
    """Prompt tokens per second (sizing's ``prefill_tokens_per_s``)."""
    attention_s_per_token_pair: float = Field(ge=0)
    """Prefill attention: seconds per (query token x earlier token) pair."""
    kv_capacity_tokens: int = Field(gt=0)
    """KV-cache tokens (sizing's ``kv_capacity_tokens``)."""
    max_num_seqs: int = Field(gt=0)
    """vLLM ``--max-num-seqs``."""
    max_num_batched_tokens: int = Field(gt=0)
    """vLLM ``--max-num-batched-tokens`` (chunked-prefill budget per step)."""
    max_model_len: int = Field(gt=0)
    """Longest prompt + output accepted; longer requests are rejected (HTTP 400)."""
    kv_bytes_per_token: int = Field(gt=0)
    """KV bytes per token across the model (prefill -> decode transfer size)."""
    kv_transfer_gb_s: float = Field(default=KV_TRANSFER_GB_S, gt=0)
    """Prefill -> decode KV transfer rate, GB/s (disaggregated serving)."""

    def decode_step_s(self, n_seqs: int, context_tokens: float) -> float:
        return self.step_base_s + self.step_per_seq_s * n_seqs + self.step_per_context_token_s * context_tokens

    def prefill_s(self, tokens: int, start: int = 0) -> float:
        """Compute time of ``tokens`` prompt tokens at positions ``start``.. (linear plus causal attention)."""
        return tokens / self.prefill_tokens_per_s + self.attention_s_per_token_pair * (tokens * start + tokens * tokens / 2.0)

    def kv_transfer_s(self, tokens: int) -> float:
        return tokens * self.kv_bytes_per_token / (self.kv_transfer_gb_s * 1e9)

    def fits(self, prompt: int, output: int) -> bool:
        return prompt + output <= min(self.max_model_len, self.kv_capacity_tokens)


def build_replica_model(
    model: ModelDeployment, instance: GpuInstanceType, tp: int, pp: int, *, kv_capacity_tokens: int | None = None,
    prefill_tokens_per_s: float | None = None,
) -> ReplicaModel:
    """Replica numbers from ``gpuscale.perf`` and ``gpuscale.sizing`` for one TP x PP layout."""
    arch, gpu = model.architecture, instance.gpu

    def step(n: int, ctx: float) -> float:
        return perf.decode_step_s(arch, gpu, tp, pp, n, ctx)

    base = step(0, 0.0)
    per_ctx = (step(0, 1e6) - base) / 1e6
    flops = tp * pp * gpu.bf16_dense_tflops * 1e12 * perf.MFU_PREFILL
    return ReplicaModel(
        gpu=gpu.name,
        gpus=tp * pp,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        step_base_s=base,
        step_per_seq_s=step(1, 0.0) - base,
        step_per_context_token_s=per_ctx,
        prefill_tokens_per_s=prefill_tokens_per_s or perf.prefill_tokens_per_s(arch, gpu, tp * pp),
        attention_s_per_token_pair=4.0 * arch.layers * arch.attention_heads * arch.head_dim / flops,
        kv_capacity_tokens=max(1, kv_capacity_tokens if kv_capacity_tokens is not None else sizing.kv_capacity_tokens(model, instance, tp, pp)),
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


# Request states
WAITING, PREFILL, TRANSFER, DECODING, DONE, DROPPED, LOST = range(7)


class Request:
    """One request in flight; mutable, owned by the run that created it."""

    __slots__ = ("arrival", "deadline", "engine", "first_t", "g0", "join_step", "kv", "output", "prefilled", "prompt", "rid", "state")

    def __init__(self, rid: int, arrival: float, prompt: int, output: int, deadline: float) -> None:
        self.rid = rid
        self.arrival = arrival
        self.prompt = prompt
        self.output = output
        self.deadline = deadline
        self.state = WAITING
        self.prefilled = 0
        self.kv = 0
        self.join_step = 0
        self.g0 = 0
        self.first_t: float | None = None
        self.engine: Engine | None = None


class EngineSink(Protocol):
    """What an engine reports to the simulation."""

    def on_first_token(self, req: Request, t: float) -> None: ...
    def on_done(self, req: Request, t: float) -> None: ...
    def on_prefill_done(self, req: Request, t: float) -> None: ...
    def on_timeout(self, req: Request, t: float) -> None: ...
    def on_drained(self, engine: Engine) -> None: ...


class ItlHistogram:
    """Token-weighted histogram of inter-token gaps (step durations), 100 log bins per decade from 0.1 ms."""

    __slots__ = ("counts", "total")
    LO = -4.0
    PER_DECADE = 100
    BINS = 800

    def __init__(self) -> None:
        self.counts = [0.0] * self.BINS
        self.total = 0.0

    def add(self, duration_s: float, tokens: float) -> None:
        i = int((math.log10(duration_s) - self.LO) * self.PER_DECADE) if duration_s > 0 else 0
        self.counts[min(max(i, 0), self.BINS - 1)] += tokens
        self.total += tokens

    def quantile(self, q: float) -> float | None:
        if self.total <= 0:
            return None
        goal = q * self.total
        acc = 0.0
        for i, c in enumerate(self.counts):
            acc += c
            if acc >= goal and c > 0:
                return float(10 ** (self.LO + (i + 0.5) / self.PER_DECADE))
        return float(10 ** (self.LO + self.BINS / self.PER_DECADE))


_IDLE, _STEP, _RUN = 0, 1, 2


class Engine:
    """The scheduler and step loop of one replica (one vLLM engine).

    ``prefill`` and ``decode`` select the role: both for aggregated serving, one each for disaggregated.
    """

    __slots__ = (
        "_busy_since", "_chunks", "_gen", "_mode", "_run_A", "_run_C0", "_run_k", "_run_n", "_run_t0", "_seq",
        "_step_dur", "_truncated", "busy_cum", "ctx_k", "decoding", "does_decode", "does_prefill", "draining", "env",
        "generation_tokens", "itl", "kv_used", "m", "n_dec", "name", "prefilling", "prompt_tokens", "sink", "step",
        "waiting",
    )

    def __init__(
        self, env: Environment, model: ReplicaModel, sink: EngineSink, itl: ItlHistogram, *, prefill: bool = True,
        decode: bool = True, name: str = "",
    ) -> None:
        self.env = env
        self.m = model
        self.sink = sink
        self.itl = itl
        self.does_prefill = prefill
        self.does_decode = decode
        self.name = name
        self.waiting: deque[Request] = deque()
        self.prefilling: list[Request] = []
        self.decoding: list[tuple[int, int, Request]] = []
        self._seq = itertools.count()
        self.step = 0
        self.n_dec = 0
        self.ctx_k = 0
        self.kv_used = 0
        self.busy_cum = 0.0
        self.prompt_tokens = 0
        """``vllm:prompt_tokens_total``: vLLM counts a prompt's tokens when its prefill finishes."""
        self.generation_tokens = 0
        """``vllm:generation_tokens_total``: one per running sequence per step, plus each prompt's first token."""
        self._busy_since: float | None = None
        self.draining = False
        self._mode = _IDLE
        self._gen = 0
        self._chunks: list[tuple[Request, int]] = []
        self._step_dur = 0.0
        self._run_t0 = self._run_A = self._run_C0 = 0.0
        self._run_k = self._run_n = 0
        self._truncated = False

    # ------------------------------------------------------------------ observation

    def busy_time(self, t: float) -> float:
        """Seconds this engine has been stepping, up to ``t`` (the GPU duty cycle's numerator)."""
        return self.busy_cum + (t - self._busy_since if self._busy_since is not None else 0.0)

    def num_waiting(self, t: float) -> int:
        """``vllm:num_requests_waiting``, after dropping requests whose client has already given up."""
        w = self.waiting
        while w and w[0].deadline < t:
            r = w.popleft()
            self.sink.on_timeout(r, t)
        return len(w)

    @property
    def num_running(self) -> int:
        return len(self.prefilling) + self.n_dec

    @property
    def kv_usage(self) -> float:
        """``vllm:kv_cache_usage_perc`` as a fraction."""
        return self.kv_used / self.m.kv_capacity_tokens

    @property
    def load(self) -> int:
        return len(self.waiting) + len(self.prefilling) + self.n_dec

    def is_empty(self) -> bool:
        return not self.waiting and not self.prefilling and not self.n_dec

    # ------------------------------------------------------------------ input

    def submit(self, req: Request) -> None:
        req.engine = self
        req.state = WAITING
        self.waiting.append(req)
        if self._mode == _IDLE:
            self._plan()
        elif self._mode == _RUN and not self._truncated and self._head_admissible():
            self._interrupt()

    def abort_all(self, t: float) -> tuple[list[Request], list[Request]]:
        """Kill the engine (eviction, drain budget exceeded): returns (never started, in flight)."""
        self._gen += 1
        self._set_idle(t)
        waiting = list(self.waiting)
        running = list(self.prefilling) + [r for _, _, r in self.decoding]
        self.waiting.clear()
        self.prefilling = []
        self.decoding = []
        self.n_dec = self.ctx_k = self.kv_used = 0
        self._chunks = []
        for r in waiting + running:
            r.engine = None
            r.kv = 0
        return waiting, running

    # ------------------------------------------------------------------ stepping

    def _set_busy(self, t: float) -> None:
        if self._busy_since is None:
            self._busy_since = t

    def _set_idle(self, t: float) -> None:
        if self._busy_since is not None:
            self.busy_cum += t - self._busy_since
            self._busy_since = None
        self._mode = _IDLE

    def _head_admissible(self) -> bool:
        r = self.waiting[0]
        if self.kv_used + r.prompt + (r.output if self.does_decode else 0) > self.m.kv_capacity_tokens:
            return False
        if len(self.prefilling) + self.n_dec >= self.m.max_num_seqs:
            return False
        return not self.does_prefill or self.n_dec < self.m.max_num_batched_tokens

    def _join(self, r: Request, g0: int) -> None:
        r.state = DECODING
        r.join_step = self.step
        r.g0 = g0
        heapq.heappush(self.decoding, (self.step + r.output - g0, next(self._seq), r))
        self.n_dec += 1
        self.ctx_k += r.prompt + g0 - self.step

    def _finish_completed(self, t: float) -> None:
        dec = self.decoding
        while dec and dec[0][0] <= self.step:
            r = heapq.heappop(dec)[2]
            self.n_dec -= 1
            self.ctx_k -= r.prompt + r.g0 - r.join_step
            self.kv_used -= r.kv
            r.kv = 0
            r.state = DONE
            r.engine = None
            self.sink.on_done(r, t)

    def _prefill_chunks(self, t: float) -> list[tuple[Request, int]]:
        """This step's prefill work: continuing prompts first, then new requests while budget, KV and seats allow."""
        m, sink = self.m, self.sink
        chunks: list[tuple[Request, int]] = []
        budget = m.max_num_batched_tokens - self.n_dec
        keep: list[Request] = []
        for r in self.prefilling:
            if r.deadline < t:  # the client left: the router aborts the request and vLLM frees its blocks
                self.kv_used -= r.kv
                r.kv = 0
                r.engine = None
                sink.on_timeout(r, t)
                continue
            keep.append(r)
            if budget > 0:
                take = min(r.prompt - r.prefilled, budget)
                chunks.append((r, take))
                budget -= take
        w = self.waiting
        seats = m.max_num_seqs - self.n_dec
        while budget > 0 and w and len(keep) < seats:
            r = w[0]
            if r.deadline < t:
                w.popleft()
                sink.on_timeout(r, t)
                continue
            need = r.prompt + (r.output if self.does_decode else 0)
            if self.kv_used + need > m.kv_capacity_tokens:
                break
            w.popleft()
            self.kv_used += need
            r.kv = need
            r.state = PREFILL
            r.prefilled = 0
            keep.append(r)
            take = min(r.prompt, budget)
            chunks.append((r, take))
            budget -= take
        self.prefilling = keep
        return chunks

    def _admit_decode(self, t: float) -> list[Request]:
        """Decode-only role: move transferred requests into the batch while KV and seats allow."""
        m, w = self.m, self.waiting
        joined: list[Request] = []
        while w and self.n_dec < m.max_num_seqs:
            r = w[0]
            if r.deadline < t:
                w.popleft()
                self.sink.on_timeout(r, t)
                continue
            need = r.prompt + r.output
            if self.kv_used + need > m.kv_capacity_tokens:
                break
            w.popleft()
            self.kv_used += need
            r.kv = need
            self._join(r, 0)
            joined.append(r)
        return joined

    def _plan(self) -> None:
        """One vLLM scheduling pass at a step boundary: a mixed step, a decode run to the next completion, or idle."""
        t = self.env.now
        m = self.m
        chunks = self._prefill_chunks(t) if self.does_prefill else []
        joined = [] if self.does_prefill else self._admit_decode(t)
        n = self.n_dec
        ctx = self.ctx_k + n * self.step
        if chunks:
            dur = m.decode_step_s(n, ctx)
            for r, take in chunks:
                dur += m.prefill_s(take, r.prefilled)
            self._mode = _STEP
            self._chunks = chunks
            self._step_dur = dur
            self._set_busy(t)
            self.env.at(t + dur, self._on_step_end, self._gen)
        elif n:
            A = m.step_base_s + m.step_per_seq_s * n
            k = self.decoding[0][0] - self.step
            self._mode = _RUN
            self._truncated = False
            self._run_t0, self._run_A, self._run_C0, self._run_n, self._run_k = t, A, float(ctx), n, k
            self._set_busy(t)
            for r in joined:  # their first token is the end of this run's first step
                self.sink.on_first_token(r, t + A + m.step_per_context_token_s * ctx)
            self.env.at(t + self._run_time(k), self._on_run_end, self._gen, k)
        else:
            self._set_idle(t)
            if self.draining and not self.waiting:
                self.sink.on_drained(self)

    def _run_time(self, k: int) -> float:
        c = self.m.step_per_context_token_s
        return k * self._run_A + c * (k * self._run_C0 + self._run_n * k * (k - 1) / 2.0)

    def _interrupt(self) -> None:
        """A request can join: end the current decode run at the next step boundary."""
        elapsed = self.env.now - self._run_t0
        q = self.m.step_per_context_token_s * self._run_n / 2.0
        lin = self._run_A + self.m.step_per_context_token_s * self._run_C0 - q
        if elapsed <= 0:
            steps = 0
        elif q > 0:
            steps = math.ceil((-lin + math.sqrt(lin * lin + 4.0 * q * elapsed)) / (2.0 * q))
        else:
            steps = math.ceil(elapsed / lin)
        while steps > 0 and self._run_time(steps - 1) >= elapsed:
            steps -= 1
        while self._run_time(steps) < elapsed:
            steps += 1
        if steps >= self._run_k:
            return  # the run ends at its natural boundary anyway
        self._gen += 1
        self._truncated = True
        self.env.at(self._run_t0 + self._run_time(steps), self._on_run_end, self._gen, steps)

    def _on_step_end(self, gen: int) -> None:
        if gen != self._gen:
            return
        t = self.env.now
        if self.n_dec:
            self.step += 1
            self.itl.add(self._step_dur, self.n_dec)
            self.generation_tokens += self.n_dec
        self._finish_completed(t)
        sink = self.sink
        for r, take in self._chunks:
            if r.state != PREFILL or r.engine is not self:
                continue
            r.prefilled += take
            if r.prefilled < r.prompt:
                continue
            self.prefilling.remove(r)
            self.prompt_tokens += r.prompt
            self.generation_tokens += 1
            if self.does_decode:
                sink.on_first_token(r, t)
                if r.output <= 1:
                    self.kv_used -= r.kv
                    r.kv = 0
                    r.state = DONE
                    r.engine = None
                    sink.on_done(r, t)
                else:
                    self._join(r, 1)
            else:
                self.kv_used -= r.kv
                r.kv = 0
                r.state = TRANSFER
                r.engine = None
                sink.on_prefill_done(r, t)
        self._chunks = []
        self._plan()

    def _on_run_end(self, gen: int, steps: int) -> None:
        if gen != self._gen:
            return
        n = self._run_n
        if steps > 0:
            self.step += steps
            mid = self._run_A + self.m.step_per_context_token_s * (self._run_C0 + n * (steps - 1) / 2.0)
            self.itl.add(mid, n * steps)
            self.generation_tokens += n * steps
        self._finish_completed(self.env.now)
        self._plan()
