"""One vLLM engine: iteration-level continuous batching with chunked prefill, paged KV and a prefix cache.

Scheduling follows vLLM v1 (``vllm/v1/core/sched/scheduler.py``):

* Running sequences are scheduled first: every decoding sequence gets one token per step and the KV slot for it.
  When the KV blocks run out, the most recently scheduled running request is preempted: its blocks are freed and it
  goes back to the head of the queue, to be recomputed (prompt plus the tokens it had generated) when it is admitted
  again. A step that preempted admits nothing new.
* The rest of the ``max_num_batched_tokens`` budget goes to prefill chunks: prompts in progress first, then waiting
  requests in order while their KV blocks fit and ``max_num_seqs`` allows.
* KV is allocated in ``block_tokens`` blocks: a prompt's blocks (minus prefix-cache hits) at admission, then one token
  per decode step (counted per token: the unused tail of a sequence's last block is not modelled). A decode-only engine
  of disaggregated serving reserves prompt + output when the transferred request joins (it cannot recompute).
* Prefix cache (only when requests carry prefix block ids): an LRU over full prompt blocks. The longest cached prefix of
  a new request skips prefill (vLLM always recomputes the last prompt token). Cached blocks no running request holds
  are free space (``kv_cache_usage_perc`` does not count them), so the cache shrinks as running requests need blocks.
  A request's blocks return to the LRU tail first, as vLLM frees them (``prefix_cache``), so the cached part of a
  prompt is a prefix of it.
* The engine keeps its prefill backlog: the uncached prompt tokens of its waiting and prefilling requests not yet
  computed (a waiting request counted at the cache hit it would get now, corrected when it is admitted), which the
  router balances.

Each step costs ``perf.StepCost.step_s`` (the replica model's ``cost``): a mixed step pays close to the larger of its
prefill and decode parts.

Under pipeline parallelism the engine steps per ``schedule()`` call, not per step, as vLLM v0.33.0's default does:
the V2 model runner with async scheduling (``perf.concurrent_batches``; ``docs/simulator.md``, Scheduling). vLLM keeps
up to ``pp + 1`` batches in flight and calls ``schedule()`` whenever one is free and it has requests, an empty batch
included (``EngineCore.step_with_batch_queue``, ``vllm/v1/engine/core.py`` L708-769), each call with the whole
``max_num_batched_tokens`` (``vllm/v1/core/sched/scheduler.py`` L719). A call (``_call``, ``_issue``) takes the
decodes due and prompt chunks (a prompt's next chunk may go in the very next call: ``_place``); a request scheduled
for a token (a decode, or its prompt's last chunk) is due again exactly ``pp`` calls later, before that token is back
(``vllm/v1/core/sched/async_scheduler.py`` L51-56), and its micro-batch starts on the first stage once the call
``pp`` before it has sampled (the V2 worker's sampled-token ring, ``vllm/v1/worker/gpu/pp_utils.py`` L55-86). The
micro-batch crosses the stages one at a time, ``perf.StepCost.stage_s`` on each, behind the micro-batches issued
before it (``perf.cross_stages``), and returns when it leaves the last (``_returned``): its decodes' tokens, its
prompts' first tokens, and the next call. A request that arrives is taken by the next call: at once when a slot is
free, else when the oldest batch returns (with requests in flight the queue is full, of empty batches if need be).
There are no closed-form decode runs then (one event per micro-batch), and no lazy decode engine.

A run of pure decode steps is one event, lasting until the next completion or until KV runs out: the step time is
``step_s(n, 0)`` plus ``context_token_s(n)`` per token of context, and the context grows by n a step, so the run's
length is the sum of those steps in closed form; a new request interrupts a run at the next step boundary, exactly
where vLLM would admit it. No event is ever per token.

A decode-only engine (the decode role of disaggregated serving) built ``lazy`` schedules no event at all: nothing it
does between two requests' arrivals has an effect outside it that must happen at its instant (first tokens and
completions are stamped with their own times, whenever they are processed). It keeps the time of its next transition
(``_due``: the run's next completion, or the step boundary where a request that arrived joins) and ``sync(t)`` plays
every transition up to ``t`` in order, through the same code the events run; every reader (the router's decode pick,
a scrape, a drain, a kill, the end of the run) syncs it first, so what it reads is what the event-driven engine holds
at that instant, and the results are the same number for number. A draining engine goes back to events, because the
ReplicaSet must learn the instant it empties.
Async scheduling (on by default at the pinned vLLM v0.33.0 unless an option is incompatible, ``vllm/config/vllm.py``
L1685-1719) keeps two batches in flight (``max_concurrent_batches``, L588-598): ``EngineCore.step_with_batch_queue``
(``vllm/v1/engine/core.py`` L708-769) schedules step N+1 as soon as step N is launched and only then waits for N's
output, so a request that arrives while N runs is first scheduled in N+2. The engine defers such a request by
``ReplicaModel.scheduler_lag_steps`` steps when there is other work (an idle engine schedules it at once, as the empty
batch queue does).
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from heapq import heappop, heappush
from typing import TYPE_CHECKING, Protocol

from gpuscale import perf
from gpuscale.sim.prefix_cache import PrefixCache
from gpuscale.sim.replica import ReplicaModel
from gpuscale.sim.states import EngineMode, RequestState

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpuscale.sim.events import Environment

_log10 = math.log10

# plain ints on the hot path (IntEnum comparisons and look-ups cost more than the arithmetic around them)
WAITING, PREFILL, TRANSFER, DECODING, DONE, DROPPED = (
    int(RequestState.WAITING), int(RequestState.PREFILL), int(RequestState.TRANSFER), int(RequestState.DECODING),
    int(RequestState.DONE), int(RequestState.DROPPED),
)


class Request:
    """One request in flight; mutable, owned by the run that created it."""

    __slots__ = (
        "arrival", "backlog", "deadline", "dseq", "due_call", "engine", "first_t", "g0", "generated", "join_step", "kv",
        "last_t", "output", "prefilled", "prefix", "prompt", "queued_t", "rid", "sched_n", "sched_t", "state", "target",
    )

    def __init__(
        self, rid: int, arrival: float, prompt: int, output: int, deadline: float, prefix: tuple[int, ...] | None = None,
    ) -> None:
        self.rid = rid
        self.arrival = arrival
        self.prompt = prompt
        self.output = output
        self.deadline = deadline
        """Client timeout for the first token."""
        self.prefix = prefix
        """KV block ids of the prompt's leading blocks (prefix-cache keys), or None."""
        self.state = WAITING
        self.target = prompt
        """Tokens the next prefill must hold: the prompt, or prompt + generated tokens after a preemption."""
        self.generated = 0
        """Output tokens produced before a preemption (recomputed, not re-sent)."""
        self.prefilled = 0
        self.backlog = 0
        """Tokens of this request in its engine's ``prefill_backlog``."""
        self.kv = 0
        """KV tokens allocated at admission (block-rounded); decode growth is counted on top."""
        self.join_step = 0
        self.g0 = 0
        self.dseq = -1
        """Sequence number of the live entry in the engine's decode heap (-1: none)."""
        self.first_t: float | None = None
        self.engine: Engine | None = None
        self.due_call = -1
        """Pipeline parallelism: the ``schedule()`` call from which its next decode may be scheduled (-1: none due)."""
        self.sched_n = 0
        """Pipeline parallelism: its tokens scheduled (decodes, or its last prompt chunk) whose batch has not returned."""
        self.queued_t = arrival
        """When the current engine queued it (vLLM's ``queued_ts``)."""
        self.sched_t = -1.0
        """When that engine first scheduled it (``scheduled_ts``); -1 before."""
        self.last_t = 0.0
        """Under pipeline parallelism, when its last token came (its next inter-token gap starts there)."""


def hit_of(r: Request, cached_blocks: int, block_tokens: int) -> int:
    """Prompt tokens of ``r`` served by ``cached_blocks`` cached leading blocks: vLLM always recomputes the last
    prompt token."""
    hit = cached_blocks * block_tokens
    return hit if hit < r.target else r.target - 1


class EngineSink(Protocol):
    """What an engine reports to the simulation."""

    def on_first_token(self, req: Request, t: float) -> None: ...
    def on_done(self, req: Request, t: float) -> None: ...
    def on_prefill_done(self, req: Request, t: float, engine: Engine) -> None: ...
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
        i = int((_log10(duration_s) - self.LO) * self.PER_DECADE) if duration_s > 0 else 0
        if i < 0:
            i = 0
        elif i >= self.BINS:
            i = self.BINS - 1
        self.counts[i] += tokens
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


_IDLE, _STEP, _RUN = int(EngineMode.IDLE), int(EngineMode.STEP), int(EngineMode.RUN)
_NO_CHUNKS: tuple[tuple[Request, int], ...] = ()
"""A pass with no prefill work (no list allocated on the common path)."""


class Engine:
    """The scheduler and step loop of one replica (one vLLM engine).

    ``prefill`` and ``decode`` select the role: both for aggregated serving, one each for disaggregated.
    """

    __slots__ = (
        "_batches",
        "_busy_since",
        "_c",
        "_calls",
        "_cap",
        "_cap_blocks",
        "_chunk_pairs",
        "_chunk_tokens",
        "_chunks",
        "_due",
        "_fixed",
        "_gates",
        "_gen",
        "_inflight",
        "_lag",
        "_lazy",
        "_mode",
        "_pending",
        "_queue",
        "_ready",
        "_run_A",
        "_run_C0",
        "_run_c",
        "_run_k",
        "_run_n",
        "_run_t0",
        "_seats",
        "_seq",
        "_stage_free",
        "_stage_s",
        "_step_budget",
        "_step_dur",
        "_step_s",
        "_step_t0",
        "_trunc_steps",
        "_truncated",
        "backlog",
        "busy_cum",
        "cache",
        "ctx_k",
        "decoding",
        "does_decode",
        "does_prefill",
        "done_prompt_tokens",
        "done_requests",
        "draining",
        "env",
        "generation_tokens",
        "itl",
        "itl_count",
        "itl_sum",
        "kv_used",
        "m",
        "n_dec",
        "name",
        "order",
        "preemptions",
        "prefilling",
        "prefix_hit_tokens",
        "prefix_query_tokens",
        "prompt_tokens",
        "queue_time_sum",
        "sink",
        "step",
        "waiting",
    )

    def __init__(
        self, env: Environment, model: ReplicaModel, sink: EngineSink, itl: ItlHistogram, *, prefill: bool = True,
        decode: bool = True, name: str = "", lazy: bool = False,
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
        self.order: list[Request] = []
        """Decoding requests in the order they joined (the preemption victim is the last live one)."""
        self.cache = PrefixCache()
        self._seq = itertools.count()
        self.step = 0
        self.n_dec = 0
        self.ctx_k = 0
        self.kv_used = 0
        self.busy_cum = 0.0
        self.prompt_tokens = 0
        """``vllm:prompt_tokens_total``: vLLM counts a prompt's tokens when its prefill finishes."""
        self.generation_tokens = 0
        """``vllm:generation_tokens_total``: one per running sequence per step, plus each prefill's sampled token."""
        self.preemptions = 0
        """``vllm:num_preemptions_total``."""
        self.done_requests = 0
        self.done_prompt_tokens = 0
        """``vllm:request_prompt_tokens`` count and sum: observed when a request finishes on this engine."""
        self.queue_time_sum = 0.0
        """``vllm:request_queue_time_seconds`` sum (its count is ``done_requests``)."""
        self.itl_sum = 0.0
        self.itl_count = 0
        """``vllm:inter_token_latency_seconds`` sum and count: every inter-token gap."""
        self.prefix_query_tokens = 0
        self.prefix_hit_tokens = 0
        self.backlog = 0
        """Prefill backlog: uncached prompt tokens of the waiting and prefilling requests still to compute."""
        self._busy_since: float | None = None
        self.draining = False
        self._mode = _IDLE
        self._gen = 0
        self._chunks: Sequence[tuple[Request, int]] = _NO_CHUNKS
        self._step_dur = 0.0
        self._lag = model.scheduler_lag_steps
        self._step_t0 = 0.0
        """Start of the step that ended last (or runs now): a request submitted after it waits one step more."""
        self._run_t0 = self._run_A = self._run_C0 = 0.0
        self._run_k = self._run_n = 0
        self._truncated = False
        self._trunc_steps = 0
        self._batches = model.cost.batches_in_flight
        if self._batches > 1 and model.scheduler_lag_steps:
            raise ValueError("the async-scheduling lag is modelled per step, not per schedule() call of a pipeline")
        self._lazy = lazy and decode and not prefill and self._batches == 1
        """Decode-only and built lazy: transitions are played by ``sync``, not by events (module docstring)."""
        self._due = math.inf
        """A lazy engine's next transition: the end of its run (natural or truncated); infinity when idle."""
        # the step cost's parts the step loop reads on every event, looked up once
        self._step_s = model.cost.step_s
        self._stage_s = model.cost.stage_s
        self._step_budget = model.step_token_budget
        self._chunk_tokens = 0
        """Prompt tokens of the batch being scheduled (``_prefill_chunks``)."""
        self._chunk_pairs = 0.0
        """Their attention pairs (query token x earlier token)."""
        # pipeline parallelism (``_call``): the batches in flight, oldest first, as (decodes, prompt chunks)
        self._inflight: deque[tuple[list[Request], Sequence[tuple[Request, int]]]] = deque()
        self._queue = perf.concurrent_batches(self._batches)
        """Batches in flight at most: ``pp + 1`` (``perf.concurrent_batches``)."""
        self._calls = 0
        """``schedule()`` calls so far, empty ones included (the scheduler's ``current_step``)."""
        self._ready: list[Request] = []
        """Decoding requests eligible for the next ``schedule()`` call (their ``due_call`` has come)."""
        self._pending: deque[list[Request]] = deque([] for _ in range(self._batches))
        """The decodes scheduled by each of the last ``pp`` calls, oldest first: eligible again ``pp`` calls later."""
        self._gates: deque[float] = deque(0.0 for _ in range(self._batches))
        """When each of the last ``pp`` calls' sampled tokens leave the last stage (0: it sampled none), oldest first:
        the first stage runs a call's batch only once the call ``pp`` before it has sampled."""
        self._stage_free = [0.0] * self._batches
        """When each pipeline stage finishes the last micro-batch issued to it (``perf.cross_stages``)."""
        self._fixed = model.decode_fixed_s
        self._c = model.decode_context_s
        self._run_c = 0.0
        self._cap, self._seats = model.kv_capacity_tokens, model.max_num_seqs
        self._cap_blocks = model.kv_capacity_blocks

    # ------------------------------------------------------------------ observation

    def sync(self, t: float) -> None:
        """Play a lazy engine's transitions up to ``t`` (at their own instants): afterwards it holds what the
        event-driven engine holds at ``t``. A no-op for an engine on events or with nothing due."""
        while self._due <= t:
            due, self._due = self._due, math.inf
            self._end_run(due, self._trunc_steps if self._truncated else self._run_k)

    def busy_time(self, t: float) -> float:
        """Seconds this engine has been stepping, up to ``t`` (the GPU duty cycle's numerator)."""
        if self._due <= t:
            self.sync(t)
        return self.busy_cum + (t - self._busy_since if self._busy_since is not None else 0.0)

    def num_waiting(self, t: float) -> int:
        """``vllm:num_requests_waiting``, after dropping requests whose client has already given up."""
        if self._due <= t:
            self.sync(t)
        w = self.waiting
        while w and w[0].deadline < t and w[0].first_t is None:
            self._gave_up(w.popleft(), t)
        return len(w)

    @property
    def num_running(self) -> int:
        if self._due <= self.env.now:
            self.sync(self.env.now)
        return len(self.prefilling) + self.n_dec

    def kv_in_use(self, t: float) -> int:
        """KV tokens held at ``t``, counting the tokens a decode run in progress has added so far."""
        if self._due <= t:
            self.sync(t)
        if self._mode == _RUN and self.does_prefill:
            return self.kv_used + self._run_n * self._steps_done(t - self._run_t0)
        return self.kv_used

    def kv_usage(self, t: float) -> float:
        """``vllm:kv_cache_usage_perc`` as a fraction (blocks held by scheduled requests)."""
        return min(self.kv_in_use(t) / self.m.kv_capacity_tokens, 1.0)

    @property
    def load(self) -> int:
        if self._due <= self.env.now:
            self.sync(self.env.now)
        return len(self.waiting) + len(self.prefilling) + self.n_dec

    def is_empty(self) -> bool:
        if self._due <= self.env.now:
            self.sync(self.env.now)
        return not self.waiting and not self.prefilling and not self.n_dec

    def cached_prefix_blocks(self, prefix: tuple[int, ...] | None) -> int:
        """Leading blocks of ``prefix`` this engine holds in its prefix cache."""
        return self.cache.held(prefix) if prefix else 0

    def hit_tokens(self, r: Request) -> int:
        """Prompt tokens of ``r`` the prefix cache would serve if it were admitted now (vLLM always recomputes the last
        prompt token)."""
        if r.prefix is None:
            return 0
        return hit_of(r, self.cache.held(r.prefix), self.m.block_tokens)

    def uncached_tokens(self, r: Request) -> int:
        """Prompt tokens ``r`` would compute here if admitted now."""
        return r.target - self.hit_tokens(r)

    # ------------------------------------------------------------------ input

    def submit(self, req: Request) -> None:
        now = self.env.now
        if self._due <= now:
            self.sync(now)
        req.engine = self
        req.state = WAITING
        req.queued_t = now
        req.sched_t = -1.0
        if self.does_prefill:
            b = req.backlog = req.target if req.prefix is None else self.uncached_tokens(req)
            self.backlog += b
        self.waiting.append(req)
        if self._batches > 1:  # a free slot in the batch queue: vLLM's next schedule() call is now, once every
            if len(self._inflight) < self._queue:  # request of this instant is in (``core.py`` L1673-1676)
                self.env.at(now, self._on_call, self._gen)
            return
        mode = self._mode
        if mode == _IDLE:
            self._plan(now)
        elif mode == _RUN and not self._truncated and self._head_admissible():
            self._interrupt()

    def abort_all(self, t: float) -> tuple[list[Request], list[Request]]:
        """Kill the engine (eviction, drain budget exceeded, node reclaimed): returns (never started, in flight)."""
        if self._due <= t:
            self.sync(t)
        self._due = math.inf
        self._gen += 1
        self._set_idle(t)
        waiting = list(self.waiting)
        running = list(self.prefilling) + self._decoders()
        self.waiting.clear()
        self.prefilling = []
        self.decoding = []
        self.order = []
        self.n_dec = self.ctx_k = self.kv_used = self.backlog = 0
        self._chunks = _NO_CHUNKS
        self._inflight.clear()
        self._ready = []
        for bucket in self._pending:
            bucket.clear()
        for r in waiting + running:
            r.engine = None
            r.kv = r.backlog = 0
            r.dseq = -1
            r.due_call = -1
            r.sched_n = 0
        return waiting, running

    def drain(self) -> None:
        """Take no new request and tell the sink the instant the engine is empty (``on_drained``): a lazy engine is
        synced and steps on events from now on, since that instant has an effect outside it."""
        if self._lazy:
            now = self.env.now
            self.sync(now)
            self._lazy = False
            if self._due < math.inf:
                self.env.at(self._due, self._on_run_end, self._gen, self._trunc_steps if self._truncated else self._run_k)
                self._due = math.inf
        self.draining = True

    # ------------------------------------------------------------------ stepping

    def _gave_up(self, r: Request, t: float) -> None:
        """A waiting request whose client left: out of the backlog, reported."""
        self.backlog -= r.backlog
        r.backlog = 0
        self.sink.on_timeout(r, t)

    def _set_busy(self, t: float) -> None:
        if self._busy_since is None:
            self._busy_since = t

    def _set_idle(self, t: float) -> None:
        if self._busy_since is not None:
            self.busy_cum += t - self._busy_since
            self._busy_since = None
        self._mode = _IDLE

    def _need(self, r: Request) -> int:
        """KV tokens a waiting request allocates when admitted (after prefix-cache hits)."""
        m = self.m
        if not self.does_prefill:
            return r.prompt + r.output
        return -(-self.uncached_tokens(r) // m.block_tokens) * m.block_tokens

    def _head_admissible(self) -> bool:
        r = self.waiting[0]
        if not self.does_prefill:  # decode-only: reserve prompt + output
            return self.kv_used + r.prompt + r.output <= self._cap and self.n_dec < self._seats
        if self.kv_used + self._need(r) > self._cap:
            return False
        if len(self.prefilling) + self.n_dec >= self._seats:
            return False
        return self.n_dec < self._step_budget

    def _decoders(self) -> list[Request]:
        """The live decoding requests."""
        if self._batches > 1:  # a request may be in the eligible list and in flight at once (``_issue``)
            tracked = self._ready + [r for dec, _ in self._inflight for r in dec] + [r for b in self._pending for r in b]
            return [r for r in dict.fromkeys(tracked) if r.state == DECODING and r.engine is self]
        return [r for _, s, r in self.decoding if r.dseq == s]

    def _join(self, r: Request, g0: int) -> None:
        r.state = DECODING
        r.join_step = self.step
        r.g0 = g0
        seq = next(self._seq)
        r.dseq = seq
        self.order.append(r)
        self.n_dec += 1
        if self._batches > 1:  # per-call stepping: no step counter (``_call``)
            r.last_t = self.env.now
            if r.due_call < 0:  # joined from a transfer: due now; one whose last chunk was scheduled is due already
                r.due_call = self._calls
                self._ready.append(r)
            return
        heappush(self.decoding, (self.step + r.output - g0, seq, r))
        self.ctx_k += r.prompt + g0 - self.step  # context at join: the prompt plus every token generated so far

    def _leave_decode(self, r: Request) -> None:
        """Remove a decoding request's context and KV (it finished or was preempted). Under pipeline parallelism its
        KV growth is already in ``r.kv`` (``_call``) and there is no step counter."""
        self.n_dec -= 1
        if self._batches > 1:
            self.kv_used -= r.kv
        else:
            grown = self.step - r.join_step
            self.ctx_k -= r.prompt + r.g0 - r.join_step
            self.kv_used -= r.kv + (grown if self.does_prefill else 0)
        r.kv = 0
        r.dseq = -1

    def _finish_completed(self, t: float) -> None:
        dec = self.decoding
        while dec and dec[0][0] <= self.step:
            _, seq, r = heappop(dec)
            if r.dseq != seq:
                continue  # preempted: a stale entry
            self._leave_decode(r)
            r.state = DONE
            r.engine = None
            self._finished(r, t)
            self.sink.on_done(r, t)

    def _finished(self, r: Request, t: float) -> None:
        """vLLM's finished-request histograms (prompt length, queue time), observed as the request leaves the engine."""
        self.done_requests += 1
        self.done_prompt_tokens += r.prompt
        if r.sched_t >= 0:
            self.queue_time_sum += r.sched_t - r.queued_t

    def _preempt_for(self, room: int) -> bool:
        """Preempt the newest decoding requests until ``room`` more KV tokens fit; True if any was preempted."""
        cap = self.m.kv_capacity_tokens
        preempted = False
        order = self.order
        while self.kv_used + room > cap and order:
            r = order.pop()
            if r.dseq < 0 or r.engine is not self or r.state != DECODING:
                continue
            generated = r.g0 + (self.step - r.join_step)
            self._leave_decode(r)
            room -= 1  # the victim no longer grows this step
            self._requeue(r, generated)
            preempted = True
        return preempted

    def _requeue(self, r: Request, generated: int) -> None:
        """A preempted request back at the head of the queue, to recompute its prompt and the tokens it generated."""
        r.generated = generated
        r.target = r.prompt + generated
        r.prefilled = 0
        r.state = WAITING
        b = r.backlog = self.uncached_tokens(r)
        self.backlog += b
        self.waiting.appendleft(r)
        self.preemptions += 1
        r.due_call = -1  # pipeline parallelism: its tokens in flight are dropped when their batch returns
        r.sched_n = 0

    def _preempt_ready(self, room: int) -> bool:
        """``_preempt_for`` under pipeline parallelism: the newest decoding requests, in flight or not (vLLM preempts
        from its running list, ``vllm/v1/core/sched/scheduler.py`` L933-978 at v0.33.0, and the async scheduler drops
        the tokens of a preempted request's batches in flight), until ``room`` more KV tokens fit; True if any was
        preempted."""
        order, ready = self.order, self._ready
        preempted = False
        i = len(order) - 1
        while self.kv_used + room > self._cap and i >= 0:
            r = order[i]
            i -= 1
            if r.dseq < 0 or r.engine is not self or r.state != DECODING:
                del order[i + 1]
                continue
            del order[i + 1]
            if r in ready:
                ready.remove(r)
            self._leave_decode(r)
            room -= 1
            self._requeue(r, r.g0)
            preempted = True
        return preempted

    def _place(self, r: Request, todo: int, chunks: list[tuple[Request, int]], room: int) -> int:
        """Schedule up to ``todo`` more prompt tokens of ``r`` (``r.prefilled`` already computed) in ``room`` tokens of
        budget; returns the room left. Under pipeline parallelism the request's computed tokens advance at once, as
        vLLM's do when it schedules a chunk, "allowing us to schedule the prefill request again immediately in the next
        scheduling step" (``_update_after_schedule``, ``vllm/v1/core/sched/scheduler.py`` L1845-1856 at v0.33.0): the
        next ``schedule()`` call may take the next chunk before this one has left the pipeline."""
        if todo <= 0 or room <= 0:
            return room
        take = todo if todo < room else room
        chunks.append((r, take))
        self._chunk_tokens += take
        self._chunk_pairs += take * (r.prefilled + take / 2.0)
        if self._batches > 1:
            r.prefilled += take
        return room - take

    def _prefill_chunks(self, t: float, admit: bool, budget: int) -> Sequence[tuple[Request, int]]:
        """This batch's prefill work in ``budget`` tokens: continuing prompts first, then new requests while budget, KV
        and seats allow (``_chunk_tokens`` and ``_chunk_pairs`` sum it)."""
        self._chunk_tokens = 0
        self._chunk_pairs = 0.0
        if not self.prefilling and not self.waiting:
            if self.cache:
                self._trim_cache()
            return _NO_CHUNKS
        m, sink = self.m, self.sink
        chunks: list[tuple[Request, int]] = []
        keep: list[Request] = []
        for r in self.prefilling:
            if r.deadline < t and r.first_t is None:  # the client left: the router aborts it and vLLM frees its blocks
                self.kv_used -= r.kv
                self.backlog -= r.backlog
                r.kv = r.backlog = 0
                r.engine = None
                sink.on_timeout(r, t)
                continue
            keep.append(r)
            budget = self._place(r, r.target - r.prefilled, chunks, budget)
        w = self.waiting
        seats = m.max_num_seqs - self.n_dec
        cap = m.kv_capacity_tokens
        lag = self._lag
        while admit and budget > 0 and w and len(keep) < seats:
            r = w[0]
            if lag and r.queued_t > self._step_t0 and (chunks or self.n_dec):
                break  # async scheduling: the step after the one just ended was scheduled before this request arrived
            if r.deadline < t and r.first_t is None:
                w.popleft()
                self._gave_up(r, t)
                continue
            hit = self.hit_tokens(r) if r.prefix is not None else 0
            need = -(-(r.target - hit) // m.block_tokens) * m.block_tokens
            if self.kv_used + need > cap:
                break
            w.popleft()
            if r.prefix is not None:
                self._touch(r.prefix, hit // m.block_tokens)
                self.prefix_query_tokens += r.target
                self.prefix_hit_tokens += hit
            self.kv_used += need
            r.kv = need
            r.state = PREFILL
            if r.sched_t < 0:
                r.sched_t = t
            r.prefilled = hit
            self.backlog += r.target - hit - r.backlog  # the hit it gets now, not the one it was queued with
            r.backlog = r.target - hit
            keep.append(r)
            budget = self._place(r, r.target - hit, chunks, budget)
        self.prefilling = keep
        if self.cache:
            self._trim_cache()
        return chunks

    def _admit_decode(self, t: float) -> list[Request]:
        """Decode-only role: move transferred requests into the batch while KV and seats allow."""
        m, w = self.m, self.waiting
        joined: list[Request] = []
        while w and self.n_dec < m.max_num_seqs:
            r = w[0]
            if r.deadline < t and r.first_t is None:
                w.popleft()
                self.sink.on_timeout(r, t)
                continue
            need = r.prompt + r.output
            if self.kv_used + need > m.kv_capacity_tokens:
                break
            w.popleft()
            self.kv_used += need
            r.kv = need
            if r.sched_t < 0:
                r.sched_t = t
            self._join(r, 0)
            joined.append(r)
        return joined

    # prefix cache ------------------------------------------------------

    def _touch(self, prefix: tuple[int, ...], hits: int) -> None:
        """The hit blocks become the most recently used, the tail first: the prompt's first block is evicted last."""
        self.cache.use(prefix, hits)

    def _remember(self, r: Request) -> None:
        """A finished prefill leaves its full prompt blocks in the cache (most recently used), freed tail first as
        vLLM frees a request's blocks, so that a block never outlives the blocks in front of it."""
        assert r.prefix is not None
        self.cache.use(r.prefix, r.prompt // self.m.block_tokens)
        self._trim_cache()

    def _trim_cache(self) -> None:
        room = self._cap_blocks - -(-self.kv_used // self.m.block_tokens)
        excess = len(self.cache) - (room if room > 0 else 0)
        if excess > 0:
            self.cache.evict(excess)

    # planning ------------------------------------------------------------

    def _plan(self, t: float) -> None:
        """One vLLM scheduling pass at a step boundary ``t``: a mixed step, a decode run, or idle (under pipeline
        parallelism, ``schedule()`` calls while the pipeline has a free slot: ``_call``)."""
        if self._batches > 1:
            self._call(t)
            return
        chunks: Sequence[tuple[Request, int]] = _NO_CHUNKS
        joined: list[Request] | None = None
        if self.does_prefill:
            preempted = False
            if self.n_dec and self.kv_used + self.n_dec > self._cap:
                preempted = self._preempt_for(self.n_dec)
            chunks = self._prefill_chunks(t, not preempted, self.m.max_num_batched_tokens - self.n_dec)
        elif self.waiting:
            joined = self._admit_decode(t)
        n = self.n_dec
        ctx = self.ctx_k + n * self.step
        if chunks:
            dur = self._step_s(n, ctx, self._chunk_tokens, self._chunk_pairs)
            self._step_t0 = t
            self._mode = _STEP
            self._chunks = chunks
            self._step_dur = dur
            self._set_busy(t)
            self.env.at(t + dur, self._on_step_end, self._gen)
        elif n:
            A = self._fixed[n]  # the run of k steps lasts k A + c (k C0 + n k (k - 1) / 2)
            dec = self.decoding
            while dec[0][2].dseq != dec[0][1]:
                heappop(dec)
            k = dec[0][0] - self.step
            if self.does_prefill:
                room = (self._cap - self.kv_used) // n
                if room < k:
                    k = room if room > 1 else 1
            self._mode = _RUN
            self._truncated = False
            self._run_t0, self._run_A, self._run_C0, self._run_n, self._run_k = t, A, float(ctx), n, k
            if self._busy_since is None:
                self._busy_since = t
            c = self._run_c = self._c[n]  # per token of context at this batch (pipeline parallelism shares it)
            if joined:  # their first token is the end of this run's first step
                for r in joined:
                    self.sink.on_first_token(r, t + A + c * ctx)
            end = t + k * A + c * (k * ctx + n * k * (k - 1) / 2.0)
            if self._lazy:
                self._due = end
            else:
                self.env.at(end, self._on_run_end, self._gen, k)
            w = self.waiting
            if self._lag and w and w[0].queued_t > self._step_t0 and self.does_prefill and self._head_admissible():
                self._interrupt()  # the head was deferred by the lag: it joins after the step already scheduled
        else:
            self._set_idle(t)
            if self.draining and not self.waiting:
                self.sink.on_drained(self)

    def _run_time(self, k: int) -> float:
        return k * self._run_A + self._run_c * (k * self._run_C0 + self._run_n * k * (k - 1) / 2.0)

    def _steps_done(self, elapsed: float) -> int:
        """Whole steps of the current run finished ``elapsed`` seconds after it started."""
        k = self._next_boundary(elapsed)
        return min(k if self._run_time(k) <= elapsed else k - 1, self._run_k)

    def _interrupt(self) -> None:
        """A request can join: end the current decode run at the next step boundary, or (async scheduling,
        ``ReplicaModel.scheduler_lag_steps``) that many steps later: the step after the one in flight is already
        scheduled without it."""
        steps = self._next_boundary(self.env.now - self._run_t0) + self._lag
        if steps >= self._run_k:
            return  # the run ends at its natural boundary anyway
        self._truncated = True
        if self._lazy:  # no event was scheduled for the natural end: only the boundary moves
            self._trunc_steps = steps
            self._due = self._run_t0 + self._run_time(steps)
            return
        self._gen += 1
        self.env.at(self._run_t0 + self._run_time(steps), self._on_run_end, self._gen, steps)

    def _next_boundary(self, elapsed: float) -> int:
        """The first step boundary of the current run at or after ``elapsed`` (solves the run's quadratic)."""
        c, A, C0, n = self._run_c, self._run_A, self._run_C0, self._run_n
        q = c * n / 2.0
        lin = A + c * C0 - q
        if elapsed <= 0:
            steps = 0
        elif q > 0:
            steps = math.ceil((-lin + math.sqrt(lin * lin + 4.0 * q * elapsed)) / (2.0 * q))
        else:
            steps = math.ceil(elapsed / lin)
        # correct the float root against ``_run_time`` itself (inlined, term for term: once per joining request)
        k = steps - 1
        while steps > 0 and k * A + c * (k * C0 + n * k * (k - 1) / 2.0) >= elapsed:
            steps, k = k, k - 1
        while steps * A + c * (steps * C0 + n * steps * (steps - 1) / 2.0) < elapsed:
            steps += 1
        return steps

    def _on_step_end(self, gen: int) -> None:
        if gen != self._gen:
            return
        t = self.env.now
        n = self.n_dec
        if n:
            self.step += 1
            if self.does_prefill:
                self.kv_used += n
            self.itl.add(self._step_dur, n)
            self.itl_sum += self._step_dur * n
            self.itl_count += n
            self.generation_tokens += n
        dec = self.decoding
        if dec and dec[0][0] <= self.step:
            self._finish_completed(t)
        for r, take in self._chunks:
            self._computed(r, take, t)
        self._chunks = _NO_CHUNKS
        self._plan(t)

    def _computed(self, r: Request, take: int, t: float) -> None:
        """``take`` tokens of ``r``'s prompt computed at ``t``; after its last, its first token (or, on a prefill-only
        engine, the hand-over to decode)."""
        if r.state != PREFILL or r.engine is not self:
            return
        if self._batches == 1:
            r.prefilled += take  # under pipeline parallelism it advanced when the chunk was scheduled (``_place``)
        r.backlog -= take
        self.backlog -= take
        if r.backlog > 0:
            return
        self.prefilling.remove(r)
        self.generation_tokens += 1
        resumed = r.generated > 0
        if not resumed:
            self.prompt_tokens += r.prompt
            if r.prefix is not None:
                self._remember(r)
        sink = self.sink
        if self.does_decode:
            if not resumed:
                sink.on_first_token(r, t)
            if r.sched_n > 0:  # pipeline parallelism: the token its last chunk was scheduled for (``_issue``)
                r.sched_n -= 1
            g0 = r.generated + 1
            if g0 >= r.output:
                self.kv_used -= r.kv
                r.kv = 0
                r.state = DONE
                r.engine = None
                self._finished(r, t)
                sink.on_done(r, t)
            else:
                self._join(r, g0)
        else:
            self.kv_used -= r.kv
            r.kv = 0
            r.state = TRANSFER
            r.engine = None
            self._finished(r, t)
            sink.on_prefill_done(r, t, self)

    # pipeline parallelism -------------------------------------------------

    def _call(self, t: float) -> None:
        """vLLM's ``EngineCore.step_with_batch_queue`` (``vllm/v1/engine/core.py`` L708-769 at v0.33.0) under pipeline
        parallelism: while fewer than ``pp + 1`` batches are in flight (``perf.concurrent_batches``) and the scheduler
        has requests, it calls ``schedule()`` and issues the batch without waiting, an empty batch included; with the
        queue full it waits for the oldest batch (``_returned``), which calls again. A request that arrives is taken by
        the next call: at once with a slot free (``submit``), else when the oldest batch returns."""
        while len(self._inflight) < self._queue and self._issue(t):
            pass
        if not self._inflight:
            self._set_idle(t)
            if self.draining and not self.waiting:
                self.sink.on_drained(self)

    def _on_call(self, gen: int) -> None:
        if gen == self._gen:
            self._call(self.env.now)

    def _due_decodes(self, budget: int) -> list[Request]:
        """This call's decodes: the requests due now (scheduled ``pp`` calls ago, ``async_scheduler.py`` L51-56 at
        v0.33.0, checked at ``scheduler.py`` L816-820) and those left over, in order, up to ``budget``. One whose last
        token is already scheduled is not scheduled again (``scheduler.py`` L791-805)."""
        calls = self._calls
        ready = self._ready
        ready.extend(r for r in self._pending.popleft() if r.due_call == calls)
        dec: list[Request] = []
        keep: list[Request] = []
        for r in ready:
            if r.engine is not self or r.due_call < 0 or r.state == DONE:
                continue
            known = r.g0 if r.state == DECODING else r.generated
            if known + r.sched_n >= r.output:
                continue
            (dec if len(dec) < budget else keep).append(r)
        self._ready = keep
        return dec

    def _issue(self, t: float) -> bool:
        """One ``schedule()`` call at ``t`` (the default V2 model runner's with async scheduling): the decodes due
        (``_due_decodes``), then prompt chunks in the rest of the whole ``max_num_batched_tokens`` (each call has its
        own, ``vllm/v1/core/sched/scheduler.py`` L719). A request scheduled now for a token (a decode, or its prompt's
        last chunk) is due again ``pp`` calls later, before that token is back; the worker's first stage runs this
        call's batch only once the call ``pp`` before it has sampled (the sampled tokens' ring,
        ``vllm/v1/worker/gpu/pp_utils.py`` L55-86 and L131-163, consumed at the start of ``execute_model``,
        ``vllm/v1/worker/gpu/model_runner.py`` L1207-1212, L1776-1777). The batch crosses the stages
        (``perf.cross_stages``) and returns when it leaves the last. With nothing to schedule it issues an empty batch
        (it counts as a call) while the scheduler has requests and a batch is in flight or a decode is not yet due
        (vLLM calls again at once while it has requests, ``core.py`` L764-769; with no batch in flight and no decode
        to come due, it would spin on empty calls until a request arrives), else returns False."""
        if not self.does_prefill and self.waiting:
            self._admit_decode(t)  # decode-only: transferred requests join (``_join``) and are due at once
        self._calls += 1
        budget = self.m.max_num_batched_tokens
        preempted = False
        if self._ready and self.does_prefill and self.kv_used + len(self._ready) > self._cap:
            preempted = self._preempt_ready(len(self._ready))
        dec = self._due_decodes(budget)
        chunks = self._prefill_chunks(t, not preempted, budget - len(dec)) if self.does_prefill else _NO_CHUNKS
        gate = self._gates.popleft()
        if not dec and not chunks:
            busy = any(d or c for d, c in self._inflight) or any(self._pending)
            if not busy or not (self.waiting or self.prefilling or self.n_dec):
                self._calls -= 1  # no requests, or none that a call can change: wait for the oldest batch, or idle
                self._gates.appendleft(gate)
                self._pending.appendleft([])
                return False
            self._pending.append([])
            self._gates.append(0.0)
            last = self._stage_free[-1]
            self._inflight.append((dec, chunks))
            self.env.at(last if last > t else t, self._returned, self._gen)
            return True
        ctx = 0
        due = self._calls + self._batches
        sampled: list[Request] = []
        for r in dec:
            known = r.g0 if r.state == DECODING else r.generated
            ctx += r.prompt + known + r.sched_n  # its context: the prompt and every token before this one
            if self.does_prefill:
                r.kv += 1  # the slot for the token this batch computes (a decode-only engine reserved it at join)
            r.sched_n += 1
            r.due_call = due
            sampled.append(r)
        if self.does_prefill:
            self.kv_used += len(dec)
        if self.does_decode:
            for r, _ in chunks:
                if r.prefilled >= r.target and r.generated + 1 < r.output:  # its last chunk: a token that decodes on
                    r.sched_n += 1
                    r.due_call = due
                    sampled.append(r)
        stage = self._stage_s(len(dec), float(ctx), float(self._chunk_tokens), self._chunk_pairs)
        done = perf.cross_stages(self._stage_free, gate if gate > t else t, stage)
        self._pending.append(sampled)
        self._gates.append(done if sampled else 0.0)
        self._inflight.append((dec, chunks))
        self._mode = _STEP
        self._set_busy(t)
        self.env.at(done, self._returned, self._gen)
        return True

    def _returned(self, gen: int) -> None:
        """The oldest batch in flight leaves the last stage (the stages keep issue order, so batches return in it; an
        empty batch returns with the one before it): its decodes' tokens, its prompt chunks computed, and the next
        ``schedule()`` call. A token of a request preempted since is dropped."""
        if gen != self._gen:
            return
        t = self.env.now
        dec, chunks = self._inflight.popleft()
        sink = self.sink
        for r in dec:
            if r.state != DECODING or r.engine is not self or r.sched_n <= 0:
                continue
            if r.g0 == 0:  # decode-only engine: the request's first token is its first decode
                sink.on_first_token(r, t)
            gap = t - r.last_t
            self.itl.add(gap, 1)
            self.itl_sum += gap
            self.itl_count += 1
            self.generation_tokens += 1
            r.g0 += 1
            r.sched_n -= 1
            r.last_t = t
            if r.g0 >= r.output:
                self._leave_decode(r)
                r.state = DONE
                r.engine = None
                self._finished(r, t)
                sink.on_done(r, t)
        for r, take in chunks:
            self._computed(r, take, t)
        self._call(t)

    def _on_run_end(self, gen: int, steps: int) -> None:
        if gen != self._gen:
            return
        self._end_run(self.env.now, steps)

    def _end_run(self, t: float, steps: int) -> None:
        """The decode run ends after ``steps`` steps, at ``t``: its tokens counted, finished requests out, the next
        pass planned."""
        n = self._run_n
        if steps > 0:
            self.step += steps
            if self.does_prefill:
                self.kv_used += n * steps
            mid = self._run_A + self._run_c * (self._run_C0 + n * (steps - 1) / 2.0)
            self.itl.add(mid, n * steps)
            self.itl_sum += mid * n * steps
            self.itl_count += n * steps
            self.generation_tokens += n * steps
            self._step_t0 = self._run_t0 + self._run_time(steps - 1)
        dec = self.decoding
        if dec and dec[0][0] <= self.step:
            self._finish_completed(t)
        self._plan(t)
