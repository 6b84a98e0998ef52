"""One replica under a benchmark's client pattern: the load generators ``gpuscale perf`` and ``bench/calibration.py`` share.

Each drives one ``vllm_engine.Engine`` built on a ``ReplicaModel`` and records every request's arrival, first token and
completion:

* ``closed_loop``: C clients, each sending its next request when its previous one completes (genai-perf's and NIM's
  ``--concurrency``, vLLM ``benchmark_serving --max-concurrency``). Request lengths are jittered around the asked sizes
  (``LENGTH_JITTER``): with identical lengths every client starts, prefills and finishes together round after round,
  each new prompt waits behind C-1 others, and TTFT is inflated by up to +235 % (issue 28). The first
  ``WARMUP_ROUNDS`` x C completions are not measured; the measured requests are those sent in the steady window and
  the clients keep sending until the last of them completes, so each ran at the full concurrency.
* ``open_loop``: Poisson arrivals at a rate (``benchmark_serving --request-rate``); every request is measured.
* ``offline``: every request submitted at t = 0 (``benchmark_throughput``, ``trtllm-bench``): maximum throughput.
* ``batch_latency``: one batch of identical requests, prompt to last token (``benchmark_latency``).

The two serving clients talk to an API server: each request reaches the engine ``perf.request_overhead_s()`` after
the client sent it (HTTP, tokenisation, the hand-over to the engine core), and its TTFT is measured from the send. The
offline loads run the engine in-process (``LLM.generate``) and pay none.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from gpuscale import perf, sizing
from gpuscale.sim.events import Environment
from gpuscale.sim.replica import ReplicaModel, build_replica_model
from gpuscale.sim.vllm_engine import Engine, ItlHistogram, Request
from gpuscale.spec.catalogue import GpuInstanceType
from gpuscale.spec.model import ModelArchitecture, ModelDeployment

LENGTH_JITTER = 0.1
"""Request lengths are drawn uniformly within +-10 % of the asked sizes, as vLLM's ``benchmark_serving`` random dataset
does with ``--random-range-ratio`` (``vllm/benchmarks/datasets.py``, ``RandomDataset``): enough to break the lockstep
of identical requests while keeping the sizes the question names."""
WARMUP_ROUNDS = 2
"""Closed loop: completions per client before measuring (the clients' first requests all start together)."""
MEASURED_ROUNDS = 4
"""Closed loop: completions per client in the measured window."""
NO_DEADLINE = 1e18
"""Benchmark clients wait for every answer (no client timeout)."""
OFFLINE_MAX_NUM_BATCHED_TOKENS = {True: 16384, False: 8192}
"""The chunked-prefill budget vLLM gives its offline ``LLM`` class (``benchmark_throughput``, ``LLM.generate``), by
whether the GPU is one of ``sizing.LARGE_SCHEDULER_GPUS``: ``EngineArgs.get_batch_defaults``
(``vllm/engine/arg_utils.py``) sets ``UsageContext.LLM_CLASS`` to 16384 where the device has at least 70 GiB and is not
an A100, else 8192, against the API server's 8192 / 2048 (``sizing.max_num_batched_tokens``). ``max_num_seqs`` is the
same for both contexts there."""


class _Recorder:
    """Engine sink keeping per-request timings; ``on_complete`` (deferred) lets a closed loop re-submit."""

    def __init__(self, env: Environment) -> None:
        self.env = env
        self.arrival: dict[int, float] = {}
        self.first: dict[int, float] = {}
        self.done: dict[int, float] = {}
        self.output: dict[int, int] = {}
        self.on_complete: Callable[[int, float], None] | None = None

    def on_first_token(self, req: Request, t: float) -> None:
        self.first[req.rid] = t

    def on_done(self, req: Request, t: float) -> None:
        self.done[req.rid] = t
        if self.on_complete is not None:
            self.env.at(t, self.on_complete, req.rid, t)  # defer: never re-enter the engine from its own callback

    def on_prefill_done(self, req: Request, t: float, engine: Engine) -> None:
        raise AssertionError("an aggregated engine never hands a request over")

    def on_timeout(self, req: Request, t: float) -> None:
        raise AssertionError("benchmark clients have no timeout")

    def on_drained(self, engine: Engine) -> None:
        pass


@dataclass(frozen=True)
class LoadResult:
    """What a benchmark client measures: per-request TTFT and TPOT, the engine's inter-token gaps, throughput."""

    ttft_s: np.ndarray
    """Time to first token of each measured request."""
    tpot_s: np.ndarray
    """Each measured request's (last token - first token) / (output tokens - 1); requests of one token left out."""
    itl_mean_s: float
    itl_p50_s: float
    itl_p99_s: float
    """Inter-token gaps (token-weighted step durations, vLLM's ``inter_token_latency_seconds``) over the window."""
    requests_per_s: float
    output_tokens_per_s: float
    kv_capacity_tokens: int

    def as_json(self) -> dict[str, float | int]:
        """The fields ``gpuscale perf --json`` writes (seconds and per second)."""
        return {
            "ttft_mean_s": float(np.mean(self.ttft_s)),
            "ttft_p50_s": float(np.percentile(self.ttft_s, 50)),
            "ttft_p99_s": float(np.percentile(self.ttft_s, 99)),
            "itl_mean_s": self.itl_mean_s,
            "itl_p50_s": self.itl_p50_s,
            "itl_p99_s": self.itl_p99_s,
            "tpot_mean_s": float(np.mean(self.tpot_s)) if self.tpot_s.size else 0.0,
            "output_tokens_per_s": self.output_tokens_per_s,
            "requests_per_s": self.requests_per_s,
            "kv_capacity_tokens": self.kv_capacity_tokens,
        }


def _itl_window(before: ItlHistogram, after: ItlHistogram, s_sum: float, s_count: int, e: Engine) -> tuple[float, float, float]:
    """Mean, p50 and p99 of the inter-token gaps recorded between two snapshots of the engine's histogram."""
    window = ItlHistogram()
    window.counts = [a - b for a, b in zip(after.counts, before.counts, strict=True)]
    window.total = after.total - before.total
    count = e.itl_count - s_count
    mean = (e.itl_sum - s_sum) / count if count else 0.0
    return mean, window.quantile(0.5) or 0.0, window.quantile(0.99) or 0.0


def _snapshot(h: ItlHistogram) -> ItlHistogram:
    copy = ItlHistogram()
    copy.counts, copy.total = list(h.counts), h.total
    return copy


def _result(rec: _Recorder, rids: Sequence[int], itl: tuple[float, float, float], span_s: float, done_in_span: Sequence[int],
            kv: int) -> LoadResult:
    ttft = np.array([rec.first[i] - rec.arrival[i] for i in rids])
    tpot = np.array([(rec.done[i] - rec.first[i]) / (rec.output[i] - 1) for i in rids if rec.output[i] > 1])
    tokens = sum(rec.output[i] for i in done_in_span)
    return LoadResult(ttft, tpot, *itl, requests_per_s=len(done_in_span) / span_s, output_tokens_per_s=tokens / span_s,
                      kv_capacity_tokens=kv)


def jittered(rng: np.random.Generator, mean: int, n: int, jitter: float = LENGTH_JITTER) -> np.ndarray:
    """``n`` lengths uniform in [mean x (1 - jitter), mean x (1 + jitter)], at least 1 token."""
    lo, hi = max(1, round(mean * (1 - jitter))), max(1, round(mean * (1 + jitter)))
    return rng.integers(lo, hi + 1, n)


def closed_loop(model: ReplicaModel, concurrency: int, prompt: int, output: int, *, seed: int = 0,
                jitter: float = LENGTH_JITTER, warmup_rounds: int = WARMUP_ROUNDS,
                rounds: int = MEASURED_ROUNDS) -> LoadResult:
    """``concurrency`` clients in a closed loop around ``prompt`` / ``output`` tokens (jittered by ``jitter``)."""
    rng = np.random.default_rng(seed)
    env = Environment()
    rec = _Recorder(env)
    eng = Engine(env, model, rec, ItlHistogram())
    ids = itertools.count()
    completed = 0
    warm_at, cap_at = concurrency * warmup_rounds, concurrency * (warmup_rounds + rounds)
    t_warm = t_cap = -1.0
    snap: tuple[ItlHistogram, float, int] | None = None
    itl: tuple[float, float, float] = (0.0, 0.0, 0.0)
    pending: set[int] = set()
    stopped = False

    overhead = perf.request_overhead_s()

    def send(t: float) -> None:
        p, o = int(jittered(rng, prompt, 1, jitter)[0]), int(jittered(rng, output, 1, jitter)[0])
        r = Request(next(ids), t + overhead, p, o, NO_DEADLINE)
        rec.arrival[r.rid], rec.output[r.rid] = t, o
        env.at(t + overhead, eng.submit, r)

    def complete(rid: int, t: float) -> None:
        nonlocal completed, t_warm, t_cap, snap, itl, stopped
        completed += 1
        pending.discard(rid)
        if completed == warm_at:
            t_warm, snap = t, (_snapshot(eng.itl), eng.itl_sum, eng.itl_count)
        if completed == cap_at:
            t_cap = t
            assert snap is not None
            itl = _itl_window(snap[0], eng.itl, snap[1], snap[2], eng)
            pending.update(i for i, a in rec.arrival.items() if t_warm <= a < t_cap and i not in rec.done)
        if t_cap >= 0 and not pending:
            stopped = True
        if not stopped:
            send(t)

    rec.on_complete = complete
    for _ in range(concurrency):
        send(0.0)
    env.run(float("inf"))
    measured = [i for i, a in rec.arrival.items() if t_warm <= a < t_cap]
    in_span = [i for i, d in rec.done.items() if t_warm < d <= t_cap]
    return _result(rec, measured, itl, t_cap - t_warm, in_span, model.kv_capacity_tokens)


def _run_all(model: ReplicaModel, arrivals: Sequence[float], prompts: Sequence[int], outputs: Sequence[int], *,
             overhead_s: float) -> LoadResult:
    env = Environment()
    rec = _Recorder(env)
    eng = Engine(env, model, rec, ItlHistogram())
    for i, (t, p, o) in enumerate(zip(arrivals, prompts, outputs, strict=True)):
        rec.arrival[i], rec.output[i] = t, o
        env.at(t + overhead_s, eng.submit, Request(i, t + overhead_s, p, o, NO_DEADLINE))
    env.run(float("inf"))
    rids = list(rec.arrival)
    mean = eng.itl_sum / eng.itl_count if eng.itl_count else 0.0
    itl = (mean, eng.itl.quantile(0.5) or 0.0, eng.itl.quantile(0.99) or 0.0)
    return _result(rec, rids, itl, max(rec.done.values()), rids, model.kv_capacity_tokens)


def open_loop(model: ReplicaModel, rate_per_s: float, prompts: Sequence[int], outputs: Sequence[int], *,
              seed: int = 0) -> LoadResult:
    """Poisson arrivals at ``rate_per_s`` of the given requests; throughput over the benchmark's duration (first
    arrival at 0 to the last completion), as ``benchmark_serving`` reports it."""
    rng = np.random.default_rng([seed, 1])
    gaps = rng.exponential(1.0 / rate_per_s, len(prompts))
    gaps[0] = 0.0
    return _run_all(model, np.cumsum(gaps).tolist(), prompts, outputs, overhead_s=perf.request_overhead_s())


def offline(model: ReplicaModel, prompts: Sequence[int], outputs: Sequence[int]) -> LoadResult:
    """Every request submitted at t = 0: the replica's maximum throughput for these sizes, with the engine configured
    as vLLM's ``LLM`` class configures it (``OFFLINE_MAX_NUM_BATCHED_TOKENS``)."""
    budget = OFFLINE_MAX_NUM_BATCHED_TOKENS[model.gpu in sizing.LARGE_SCHEDULER_GPUS]
    return _run_all(model.model_copy(update={"max_num_batched_tokens": budget}), [0.0] * len(prompts), prompts, outputs,
                    overhead_s=0.0)


def offline_requests(model: ReplicaModel, prompt: int, output: int) -> int:
    """How many requests an offline run needs to reach steady state: three KV-fulls of them, between 64 and 1,000
    (the range ``trtllm-bench`` and ``benchmark_throughput`` runs use)."""
    return max(64, min(1000, int(3 * model.kv_capacity_tokens / (prompt + output))))


def batch_latency(model: ReplicaModel, batch: int, prompt: int, output: int) -> float:
    """vLLM ``benchmark_latency``: one batch of ``batch`` identical requests, seconds from submission to last token."""
    env = Environment()
    rec = _Recorder(env)
    eng = Engine(env, model, rec, ItlHistogram())
    for i in range(batch):
        rec.arrival[i], rec.output[i] = 0.0, output
        eng.submit(Request(i, 0.0, prompt, output, NO_DEADLINE))
    env.run(float("inf"))
    return max(rec.done.values())


def replica_alone(arch: ModelArchitecture, instance: GpuInstanceType, tp: int, pp: int = 1) -> ReplicaModel:
    """The replica of one architecture on one instance type, without a stack: a deployment with vLLM's serving
    defaults around it (``gpu_memory_utilization`` 0.9, the GPU's scheduler limits); only its architecture and serving
    section reach the replica's numbers."""
    model = ModelDeployment.model_validate({
        "name": "replica", "architecture": arch.model_dump(), "weights": {"uri": "s3://bucket/model"},
        "slo": {"ttft_p99_s": 10, "itl_p99_s": 1, "request_timeout_s": 60},
        "workload": {"base_rps": 1, "peak_rps": 1, "prompt_tokens": {"mean": 1, "p99": 1},
                     "output_tokens": {"mean": 1, "p99": 1}},
        "queue": "q", "node_pool": "p",
    })
    return build_replica_model(model, instance, tp, pp)
