"""The vLLM engine model: the sizing's numbers, exact step arithmetic, paged KV with preemption, prefix cache, P/D."""

from __future__ import annotations

import math

import pytest

from gpuscale import perf
from gpuscale.sim.events import Environment
from gpuscale.sim.replica import ReplicaModel, replica_model_from_sizing
from gpuscale.sim.vllm_engine import Engine, ItlHistogram, Request
from gpuscale.sizing import size_platform
from gpuscale.spec.catalogue import CATALOGUE
from gpuscale.spec.platform import PlatformSpec


class Sink:
    def __init__(self) -> None:
        self.first: dict[int, float] = {}
        self.done: dict[int, float] = {}
        self.prefilled: dict[int, float] = {}
        self.timeouts: list[int] = []
        self.drained = 0

    def on_first_token(self, req: Request, t: float) -> None:
        self.first[req.rid] = t

    def on_done(self, req: Request, t: float) -> None:
        self.done[req.rid] = t

    def on_prefill_done(self, req: Request, t: float, engine: Engine) -> None:
        self.prefilled[req.rid] = t

    def on_timeout(self, req: Request, t: float) -> None:
        self.timeouts.append(req.rid)

    def on_drained(self, engine: Engine) -> None:
        self.drained += 1


@pytest.fixture
def model(tiny: PlatformSpec) -> ReplicaModel:
    m = tiny.models[0]
    return replica_model_from_sizing(m, size_platform(tiny).model(m.name))


def engine(model: ReplicaModel, **kw: bool) -> tuple[Environment, Engine, Sink]:
    env, sink = Environment(), Sink()
    return env, Engine(env, model, sink, ItlHistogram(), **kw), sink


def prefill_s(model: ReplicaModel, tokens: int) -> float:
    """One step that prefills ``tokens`` prompt tokens and nothing else."""
    return model.cost.step_s(0, 0.0, tokens, tokens * tokens / 2.0)


def req(rid: int, prompt: int, output: int, t: float = 0.0, timeout: float = 1e9, prefix: tuple[int, ...] | None = None) -> Request:
    return Request(rid, t, prompt, output, t + timeout, prefix)


def test_replica_model_carries_the_sizing_numbers(tiny: PlatformSpec, model: ReplicaModel) -> None:
    m = tiny.models[0]
    ms = size_platform(tiny).model(m.name)
    assert model.kv_capacity_tokens == ms.kv_capacity_tokens
    assert model.prefill_tokens_per_s == pytest.approx(ms.prefill_tokens_per_s)
    gpu = CATALOGUE[ms.shape.instance_type].gpu
    assert model.cost == perf.step_cost(m.architecture, gpu, 1, 1, prefill_rate=ms.prefill_tokens_per_s)
    assert model.decode_fixed_s[64] == model.cost.step_s(64, 0.0)
    assert (model.max_num_seqs, model.max_num_batched_tokens) == (256, 2048)


def test_a_mixed_step_costs_about_the_larger_part_not_the_sum(model: ReplicaModel) -> None:
    decode = model.cost.step_s(64, 64 * 1000.0)
    prefill = prefill_s(model, 2048 - 64)
    mixed = model.cost.step_s(64, 64 * 1000.0, 2048 - 64, (2048 - 64) ** 2 / 2.0)
    # the weights are streamed once for both parts
    assert max(decode, prefill) <= mixed < decode + prefill - 0.5 * model.cost.weights_s


def test_single_request_timing_is_exact(model: ReplicaModel) -> None:
    env, e, sink = engine(model)
    e.submit(req(1, 1000, 5))
    env.run(100)
    ttft = prefill_s(model, 1000)
    assert sink.first[1] == pytest.approx(ttft)
    decode = sum(model.cost.step_s(1, 1001 + i) for i in range(4))  # 4 more tokens, context 1001..1004
    assert sink.done[1] == pytest.approx(ttft + decode)
    assert e.kv_used == 0 and e.is_empty()


def test_long_prompt_is_chunked_by_the_token_budget(model: ReplicaModel) -> None:
    env, e, sink = engine(model)
    e.submit(req(1, 3 * 2048, 2))
    env.run(100)
    steps = [model.cost.step_s(0, 0.0, 2048, 2048 * 2048 * i + 2048 * 2048 / 2.0) for i in range(3)]
    assert sink.first[1] == pytest.approx(sum(steps))
    assert sink.first[1] == pytest.approx(model.idle_prefill_s(3 * 2048))


def test_kv_is_allocated_in_blocks_and_grows_per_token(model: ReplicaModel) -> None:
    env, e, _ = engine(model)
    e.submit(req(1, 1000, 50))
    env.run(prefill_s(model, 1000) + 1e-9)
    assert e.kv_used == 1008  # 63 blocks of 16 for the prompt
    t = prefill_s(model, 1000) + 10.5 * model.cost.step_s(1, 1010)
    env.run(t)
    assert e.kv_in_use(t) == 1008 + 10  # ten decode steps, one token each, inside a run of 49
    assert e.kv_usage(t) == pytest.approx(1018 / model.kv_capacity_tokens)


def test_blocks_running_out_preempt_the_newest_request_which_is_recomputed(model: ReplicaModel) -> None:
    env, e, sink = engine(model)
    cap = model.kv_capacity_tokens
    # two requests whose prompts fit but whose outputs together do not
    e.submit(req(1, cap // 2, cap // 3))
    e.submit(req(2, cap // 3, cap // 3, t=0.0))
    env.run(1e6)
    assert e.preemptions >= 1
    assert sink.done.keys() == {1, 2}  # both finish: the victim was recomputed, not dropped
    assert sink.done[2] > sink.done[1]
    assert e.kv_used == 0


def test_prefix_cache_hits_skip_prefill(model: ReplicaModel) -> None:
    env, e, sink = engine(model)
    shared = tuple(range(100))  # 1,600 tokens of common prefix
    e.submit(req(1, 1700, 2, prefix=shared))
    env.run(100)
    e.submit(req(2, 1700, 2, t=100.0, prefix=shared))
    env.run(200)
    cold, warm = sink.first[1], sink.first[2] - 100.0
    assert warm < 0.3 * cold
    assert e.prefix_hit_tokens == 1600 and e.prefix_query_tokens == 3400


def test_prefix_cache_is_lru_bounded_by_free_blocks(model: ReplicaModel) -> None:
    env, e, _ = engine(model)
    blocks = model.kv_capacity_blocks
    e.submit(req(1, 16 * (blocks // 2), 1, prefix=tuple(range(blocks // 2))))
    env.run(1e4)
    e.submit(req(2, 16 * (blocks // 2), 1, t=1e4, prefix=tuple(range(10**6, 10**6 + blocks // 2))))
    env.run(2e4)
    assert len(e.cache) <= blocks
    assert e.cached_prefix_blocks(tuple(range(10**6, 10**6 + 5))) == 5  # the newest prefix is kept


def test_requests_wait_when_kv_is_full(model: ReplicaModel) -> None:
    env, e, sink = engine(model)
    big = model.kv_capacity_tokens - 1000
    e.submit(req(1, big - 200, 200))
    e.submit(req(2, 2000, 10))  # its prompt does not fit next to the first
    env.run(0.0)
    assert e.num_waiting(0.0) == 1
    env.run(1e5)
    assert sink.first[2] > sink.first[1]


def test_duty_cycle_saturates_however_deep_the_queue(model: ReplicaModel) -> None:
    busy = []
    for n in (10, 300):
        env, e, _ = engine(model)
        for i in range(n):
            e.submit(req(i, 500, 2000))
        env.run(30.0)
        busy.append(e.busy_time(30.0) / 30.0)
    assert busy == [pytest.approx(1.0), pytest.approx(1.0)]


def test_an_arrival_joins_at_the_next_step_boundary(model: ReplicaModel) -> None:
    env, e, sink = engine(model)
    e.submit(req(1, 100, 1000))
    env.run(1.0)  # request 1 is deep in a decode run
    e.submit(req(2, 100, 2, t=1.0))
    env.run(100.0)
    assert 1.0 < sink.first[2] < 1.0 + 0.1  # one decode step plus a small prefill
    assert 1 in sink.done and 2 in sink.done


def test_timed_out_waiting_requests_are_dropped(model: ReplicaModel) -> None:
    env, e, sink = engine(model)
    e.submit(req(1, model.kv_capacity_tokens - 500, 400))
    e.submit(req(2, 1000, 10, timeout=0.5))
    env.run(2.0)
    assert e.num_waiting(2.0) == 0 and sink.timeouts == [2]


def test_disaggregated_prefill_then_decode(model: ReplicaModel) -> None:
    env, pre, psink = engine(model, prefill=True, decode=False)
    _, dec, dsink = engine(model, prefill=False, decode=True)
    dec.env = env
    r = req(1, 4000, 50)
    pre.submit(r)
    env.run(10.0)
    assert psink.prefilled[1] == pytest.approx(model.idle_prefill_s(4000))
    assert pre.kv_used == 0 and not psink.first  # prefill-only engines emit no token to the client
    dec.submit(r)
    env.run(20.0)
    assert dsink.first[1] == pytest.approx(10.0 + model.cost.step_s(1, 4000))
    assert 1 in dsink.done and dec.kv_used == 0


def test_token_counters_count_like_vllm(model: ReplicaModel) -> None:
    env, e, _ = engine(model)
    for i, (prompt, output) in enumerate([(1000, 5), (3 * 2048, 20), (200, 1)]):
        e.submit(req(i, prompt, output, t=0.01 * i))
    assert e.prompt_tokens == 0
    env.run(100.0)
    assert e.prompt_tokens == 1000 + 3 * 2048 + 200
    assert e.generation_tokens == 5 + 20 + 1


def test_itl_histogram_quantiles() -> None:
    h = ItlHistogram()
    h.add(0.010, 990)
    h.add(0.500, 10)
    assert h.quantile(0.5) == pytest.approx(0.010, rel=0.03)
    assert h.quantile(0.995) == pytest.approx(0.5, rel=0.03)
    assert ItlHistogram().quantile(0.5) is None


def test_the_prefill_backlog_is_the_uncached_work_left(model: ReplicaModel) -> None:
    """Waiting requests count at the hit they would get now, admitted ones at their real hit; timeouts, preemptions
    and completions leave no residue."""
    env, e, sink = engine(model)
    bt = model.block_tokens
    shared = tuple(range(50))
    e.submit(req(0, 50 * bt + 10, 2, prefix=shared))
    assert e.backlog == 50 * bt + 10
    env.run(100)
    assert e.backlog == 0
    e.submit(req(1, 50 * bt + 10, 2, t=100, prefix=shared))  # hits the 50 cached blocks
    e.submit(req(2, 30_000, 2, t=100))
    e.submit(req(3, 20_000, 2, t=100, timeout=0.01))  # its client leaves while it waits
    assert e.backlog == 10 + 30_000 + 20_000
    seen = []

    def check() -> None:
        left = sum(r.backlog for r in e.waiting) + sum(r.target - r.prefilled for r in e.prefilling)
        seen.append(e.backlog)
        assert e.backlog == left

    for k in range(1, 200):
        env.at(100 + 0.01 * k, check)
    env.run(1e4)
    assert 3 in sink.timeouts and e.backlog == 0 and max(seen) > 0
    cap = model.kv_capacity_tokens  # preemption: the victim's prompt and generated tokens are work again
    e.submit(req(4, cap // 2, cap // 3, t=1e4))
    e.submit(req(5, cap // 3, cap // 3, t=1e4))
    env.run(1e6)
    assert e.preemptions >= 1 and e.backlog == 0 and e.kv_used == 0


def test_a_lazy_decode_engine_holds_what_the_event_driven_one_holds(model: ReplicaModel) -> None:
    """The same hand-offs into a decode-only engine on events and into a lazy one (no events: ``sync`` plays its
    transitions when something reads it): every first token, completion, timeout and observation is the same number,
    and the lazy engine scheduled nothing."""
    import random

    rng = random.Random(7)
    handoffs = []
    t = 0.0
    for i in range(300):
        t += rng.expovariate(20.0)
        handoffs.append((t, req(i, rng.randint(50, 4000), rng.randint(1, 400), t=t, timeout=rng.choice([1e9, 0.05]))))
    looks = sorted(rng.uniform(0.0, t + 5.0) for _ in range(60))

    def run(lazy: bool) -> tuple[Sink, list[tuple[float, ...]], int]:
        env, sink = Environment(), Sink()
        e = Engine(env, model, sink, ItlHistogram(), prefill=False, decode=True, lazy=lazy)
        seen: list[tuple[float, ...]] = []

        def look(when: float) -> None:
            seen.append((when, e.num_waiting(when), e.kv_usage(when), e.num_running, e.busy_time(when),
                         e.generation_tokens, e.itl_sum, e.itl_count, e.done_requests, e.queue_time_sum))

        for when, r in handoffs:
            fresh = Request(r.rid, r.arrival, r.prompt, r.output, r.deadline)
            env.at(when, e.submit, fresh)
        for when in looks:
            env.at(when, look, when, priority=2)
        env.run(t + 100.0)
        e.sync(env.now)
        return sink, seen, env.events_run - len(handoffs) - len(looks)

    eager, eager_seen, eager_events = run(False)
    lazy, lazy_seen, lazy_events = run(True)
    assert lazy.first == eager.first and lazy.done == eager.done and lazy.timeouts == eager.timeouts
    assert lazy_seen == eager_seen
    assert len(eager.done) + len(eager.timeouts) == len(handoffs) and eager.timeouts  # both fates occur
    assert lazy_events == 0 and eager_events > len(handoffs) // 2


def test_a_draining_lazy_engine_reports_the_instant_it_empties(model: ReplicaModel) -> None:
    env, eager_sink = Environment(), Sink()
    lazy_env, lazy_sink = Environment(), Sink()
    eager = Engine(env, model, eager_sink, ItlHistogram(), prefill=False, decode=True)
    lazy = Engine(lazy_env, model, lazy_sink, ItlHistogram(), prefill=False, decode=True, lazy=True)
    drained: dict[str, float] = {}
    eager_sink.on_drained = lambda engine: drained.__setitem__("eager", env.now)  # type: ignore[method-assign]
    lazy_sink.on_drained = lambda engine: drained.__setitem__("lazy", lazy_env.now)  # type: ignore[method-assign]
    for e, ev in ((eager, env), (lazy, lazy_env)):
        e.submit(req(1, 1000, 50))
        e.submit(req(2, 2000, 80))
        ev.run(0.5)
        e.drain()
        ev.run(100.0)
    assert drained["lazy"] == drained["eager"] == eager_sink.done[2] == lazy_sink.done[2]


def _first_token_of_a_late_arrival(model: ReplicaModel, lag: int, at: float) -> tuple[float, float]:
    """Request 2 (200-token prompt) submitted at ``at`` while request 1 decodes alone: its first token, and the
    first step boundary of request 1's decode at or after ``at``."""
    env, e, sink = engine(model.model_copy(update={"scheduler_lag_steps": lag}))
    e.submit(req(1, 100, 2000))
    env.at(at, e.submit, req(2, 200, 10, t=at))
    env.run(1e6)
    step = model.cost.step_s(1, 100.0)  # request 1's decode steps, about (its context grows a token a step)
    return sink.first[2], sink.first[1] + math.ceil((at - sink.first[1]) / step) * step


def test_async_scheduling_admits_a_request_arriving_mid_step_one_step_later(model: ReplicaModel) -> None:
    # the lag is off by default (perf.SCHEDULER_LAG_STEPS, off because the held-out set is worse with it); the
    # mechanism is what is tested here, so the run below turns it on
    assert model.scheduler_lag_steps == perf.SCHEDULER_LAG_STEPS == 0
    step = model.cost.step_s(1, 100.0)
    at = 0.5  # request 1 is in its decode run (its prefill took well under a second)
    sync, boundary = _first_token_of_a_late_arrival(model, 0, at)
    lagged, _ = _first_token_of_a_late_arrival(model, 1, at)
    mixed = model.cost.step_s(1, 100.0, 200, 200 * 100.0)  # the step that prefills request 2 beside request 1
    assert sync == pytest.approx(boundary + mixed, rel=1e-3)  # synchronous: the next boundary, then its prefill step
    assert lagged - sync == pytest.approx(step, rel=1e-2)  # async: the step already scheduled runs first


def test_an_idle_engine_schedules_at_once_whatever_the_lag(model: ReplicaModel) -> None:
    firsts = []
    for lag in (0, 1):
        env, e, sink = engine(model.model_copy(update={"scheduler_lag_steps": lag}))
        env.at(1.0, e.submit, req(1, 200, 10, t=1.0))
        env.run(1e6)
        firsts.append(sink.first[1])
    assert firsts[0] == firsts[1] == pytest.approx(1.0 + model.idle_prefill_s(200))


def pipelined(model: ReplicaModel, batches: int) -> ReplicaModel:
    """The same replica with ``batches`` micro-batches in flight (pipeline parallelism's stages), built afresh so no
    table cached from the one-batch cost carries over."""
    fields = {name: getattr(model, name) for name in type(model).model_fields}
    return ReplicaModel(**{**fields, "cost": perf.StepCost(**{**model.cost.__dict__, "batches_in_flight": batches})})


def stage_prefill_s(model: ReplicaModel, tokens: int, before: int = 0) -> float:
    """One micro-batch of ``tokens`` prompt tokens (after ``before`` already computed) on one pipeline stage."""
    return model.cost.stage_s(0, 0.0, tokens, tokens * (before + tokens / 2.0))


def test_each_call_has_its_own_budget_and_a_stage_takes_one_micro_batch_at_a_time(model: ReplicaModel) -> None:
    """PP2: vLLM calls ``schedule()`` once per batch it puts in flight, each with the whole ``max_num_batched_tokens``,
    and issues it at once while a slot is free. Two prompts of a budget each, arriving together, ride in two
    micro-batches issued at once; the second starts on each stage as the first leaves it."""
    pp2 = pipelined(model, 2)
    budget = pp2.max_num_batched_tokens
    env, e, sink = engine(pp2)
    e.submit(req(1, budget, 1))
    e.submit(req(2, budget, 1))
    env.run(100)
    st = stage_prefill_s(pp2, budget)
    assert sink.first[1] == pytest.approx(2 * st)  # its stage-times, one per stage
    assert sink.first[2] == pytest.approx(3 * st)  # one stage-time behind


def test_a_prompt_continues_in_the_next_call(model: ReplicaModel) -> None:
    """PP2, a prompt of two budgets alone: vLLM advances its computed tokens when it schedules a chunk, so the next
    ``schedule()`` call, at once with a slot free, takes the next chunk; the two chunks follow each other through the
    stages, as ``idle_prefill_s`` says. Without pipeline parallelism it takes two steps."""
    pp2 = pipelined(model, 2)
    budget = pp2.max_num_batched_tokens
    env, e, sink = engine(pp2)
    e.submit(req(1, 2 * budget, 2))
    env.run(100)
    first, second = stage_prefill_s(pp2, budget), stage_prefill_s(pp2, budget, budget)  # the second attends to the first
    assert sink.first[1] == pytest.approx(first + 2 * second)
    assert sink.first[1] == pytest.approx(pp2.idle_prefill_s(2 * budget))
    assert model.idle_prefill_s(2 * budget) == pytest.approx(
        prefill_s(model, budget) + model.cost.step_s(0, 0.0, budget, budget * (budget + budget / 2.0)))


def test_with_pp_plus_one_in_flight_a_call_is_issued_while_pp_are_in_flight(model: ReplicaModel) -> None:
    """PP2 under vLLM v0.33.0's default (V2 model runner, async scheduling): ``max_concurrent_batches`` is
    ``pp + 1``, so three prompts arriving together are all scheduled at once, the third while two batches are in
    flight (the V1 runner's ``pp`` slots would take it only when the first returns); on the stages it follows the
    other two."""
    pp2 = pipelined(model, 2)
    assert perf.concurrent_batches(2) == 3
    budget = pp2.max_num_batched_tokens
    env, e, sink = engine(pp2)
    third = req(3, budget, 1)
    for r in (req(1, budget, 1), req(2, budget, 1), third):
        e.submit(r)
    env.run(100)
    st = stage_prefill_s(pp2, budget)
    assert third.sched_t == 0.0  # scheduled at once, not when the first batch returns at 2 st
    assert sink.first[3] == pytest.approx(4 * st)


def test_a_decode_is_scheduled_again_pp_calls_later_before_its_token_is_back(model: ReplicaModel) -> None:
    """PP2: A's last (only) prompt chunk goes in call 1; call 2 is empty (nothing due: a decode is eligible again
    ``pp`` calls later, ``async_scheduler.py`` L51-56); call 3 schedules A's decode at once, before A's first token is
    back, and its batch starts on the first stage when call 1 has sampled (the V2 worker's sampled-token ring). The
    queue is then full, so Y, arriving while A's prefill is on the second stage, is scheduled when call 1 returns and
    runs behind A's decode on each stage (with the V1 rule Y went first and A's decode waited behind it)."""
    pp2 = pipelined(model, 2)
    budget = pp2.max_num_batched_tokens
    env, e, sink = engine(pp2)
    a_req = req(0, 100, 2)
    e.submit(a_req)  # A: prefill, then one decode
    a = stage_prefill_s(pp2, 100)
    y_req = req(2, budget, 1)
    env.at(a, e.submit, y_req)  # Y
    env.run(100)
    y = stage_prefill_s(pp2, budget)
    d = pp2.cost.stage_s(1, 101.0, 0.0, 0.0)  # A's decode: its prompt and first token of context
    assert y > a and y > d
    assert sink.first[0] == pytest.approx(2 * a)
    assert sink.done[0] == pytest.approx(2 * a + 2 * d)  # on stage 0 from 2a (call 1 sampled), then stage 1
    assert y_req.sched_t == pytest.approx(2 * a)  # the queue was full until call 1 returned
    assert sink.first[2] == pytest.approx(2 * a + d + 2 * y)  # behind A's decode on stage 0
    assert e.itl_sum == pytest.approx(2 * d)  # A's one inter-token gap


def test_a_lone_decode_keeps_two_batches_in_flight_and_an_arrival_waits_for_the_oldest(model: ReplicaModel) -> None:
    """PP2, one decoding request A: its decodes go in every second call (due ``pp`` calls later), the calls between
    them empty; with ``pp + 1`` slots the queue is full (A's two batches and an empty one), so its inter-token gap is
    still two stage-times (each batch waits for the one before it to sample) and a prompt arriving then is scheduled
    when A's oldest batch returns, behind A's next decode on the first stage."""
    pp2 = pipelined(model, 2)
    env, e, sink = engine(pp2)
    e.submit(req(0, 100, 50))
    a = stage_prefill_s(pp2, 100)
    d = pp2.cost.stage_s(1, 101.0, 0.0, 0.0)  # A's first decode: call 3, on the stages from 2a
    d2 = pp2.cost.stage_s(1, 102.0, 0.0, 0.0)  # A's second: call 5, issued at 2a, on stage 0 from 2a + 2d
    late = req(1, 300, 1)
    env.at(2 * a + 0.5 * d, e.submit, late)
    env.run(100)
    p = stage_prefill_s(pp2, 300)
    assert p > d
    assert late.sched_t == pytest.approx(2 * a + 2 * d)  # when call 3 returns
    assert sink.first[1] == pytest.approx(2 * a + 2 * d + d2 + 2 * p)  # stage 0 from 2a + 2d + d2, then stage 1


def test_pipeline_parallelism_refuses_the_per_step_scheduling_lag(model: ReplicaModel) -> None:
    """The async-scheduling lag is counted in steps; a pipeline-parallel engine steps per call, so the two together are
    refused rather than one silently ignored."""
    lagged = pipelined(model, 2).model_copy(update={"scheduler_lag_steps": 1})
    with pytest.raises(ValueError, match="schedule"):
        engine(lagged)
