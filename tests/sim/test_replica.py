"""The replica model: the sizing's numbers, exact step arithmetic, KV admission, duty cycle, chunked prefill, P/D."""

from __future__ import annotations

import pytest

from gpuscale import perf
from gpuscale.sim.engine import Environment
from gpuscale.sim.replica import Engine, ItlHistogram, ReplicaModel, Request, replica_model_from_sizing
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

    def on_prefill_done(self, req: Request, t: float) -> None:
        self.prefilled[req.rid] = t

    def on_timeout(self, req: Request, t: float) -> None:
        self.timeouts.append(req.rid)

    def on_drained(self, engine: Engine) -> None:
        self.drained += 1


@pytest.fixture
def model(prod_spec: PlatformSpec) -> ReplicaModel:
    m = prod_spec.models[0]
    return replica_model_from_sizing(m, size_platform(prod_spec).model(m.name))


def engine(model: ReplicaModel, **kw: bool) -> tuple[Environment, Engine, Sink]:
    env, sink = Environment(), Sink()
    return env, Engine(env, model, sink, ItlHistogram(), **kw), sink


def req(rid: int, prompt: int, output: int, t: float = 0.0, timeout: float = 1e9) -> Request:
    return Request(rid, t, prompt, output, t + timeout)


def test_replica_model_carries_the_sizing_numbers(prod_spec: PlatformSpec, model: ReplicaModel) -> None:
    m = prod_spec.models[0]
    ms = size_platform(prod_spec).model(m.name)
    assert model.kv_capacity_tokens == ms.kv_capacity_tokens == 678_094
    assert model.prefill_tokens_per_s == ms.prefill_tokens_per_s
    gpu = CATALOGUE[ms.shape.instance_type].gpu
    for n, ctx in ((1, 2000.0), (64, 128_000.0), (179, 300_000.0)):
        assert model.decode_step_s(n, ctx) == pytest.approx(perf.decode_step_s(m.architecture, gpu, 4, 1, n, ctx), rel=1e-9)
    assert (model.max_num_seqs, model.max_num_batched_tokens) == (1024, 8192)


def test_single_request_timing_is_exact(model: ReplicaModel) -> None:
    env, e, sink = engine(model)
    e.submit(req(1, 1000, 5))
    env.run(100)
    ttft = model.decode_step_s(0, 0) + model.prefill_s(1000)
    assert sink.first[1] == pytest.approx(ttft)
    # 4 more tokens, one step each, context 1001..1004
    decode = sum(model.decode_step_s(1, 1001 + i) for i in range(4))
    assert sink.done[1] == pytest.approx(ttft + decode)
    assert e.kv_used == 0 and e.is_empty()


def test_long_prompt_is_chunked_by_the_token_budget(model: ReplicaModel) -> None:
    env, e, sink = engine(model)
    e.submit(req(1, 3 * 8192, 2))
    env.run(100)
    steps = [model.decode_step_s(0, 0) + model.prefill_s(8192, 8192 * i) for i in range(3)]
    assert sink.first[1] == pytest.approx(sum(steps))


def test_requests_wait_when_kv_is_full(model: ReplicaModel) -> None:
    env, e, sink = engine(model)
    big = model.kv_capacity_tokens - 1000
    e.submit(req(1, big - 200, 200))
    e.submit(req(2, 2000, 10))  # does not fit next to the first
    env.run(0.0)
    assert e.num_waiting(0.0) == 1 and e.kv_usage > 0.99
    env.run(1e4)
    assert sink.first[2] > sink.done[1]


def test_duty_cycle_saturates_however_deep_the_queue(model: ReplicaModel) -> None:
    busy = []
    for n in (10, 500):
        env, e, _ = engine(model)
        for i in range(n):
            e.submit(req(i, 2000, 5000))
        env.run(30.0)
        busy.append(e.busy_time(30.0) / 30.0)
    assert busy == [pytest.approx(1.0), pytest.approx(1.0)]


def test_idle_engine_has_no_duty(model: ReplicaModel) -> None:
    env, e, _ = engine(model)
    e.submit(req(1, 500, 10))
    env.run(60.0)
    assert 0 < e.busy_time(60.0) / 60.0 < 0.01


def test_an_arrival_joins_at_the_next_step_boundary(model: ReplicaModel) -> None:
    env, e, sink = engine(model)
    e.submit(req(1, 100, 1000))
    env.run(1.0)  # request 1 is deep in a decode run
    e.submit(req(2, 100, 2, t=1.0))
    env.run(100.0)
    assert 1.0 < sink.first[2] < 1.0 + 0.05  # one decode step plus a small prefill
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
    assert psink.prefilled[1] == pytest.approx(model.decode_step_s(0, 0) + model.prefill_s(4000))
    assert pre.kv_used == 0 and not psink.first  # prefill-only engines emit no token to the client
    dec.submit(r)
    env.run(20.0)
    assert dsink.first[1] == pytest.approx(10.0 + model.decode_step_s(1, 4000))
    assert 1 in dsink.done and dec.kv_used == 0


def test_token_counters_count_like_vllm(model: ReplicaModel) -> None:
    # vllm:prompt_tokens_total counts a prompt when its prefill finishes; vllm:generation_tokens_total every token
    env, e, _ = engine(model)
    for i, (prompt, output) in enumerate([(1000, 5), (3 * 8192, 20), (200, 1)]):
        e.submit(req(i, prompt, output, t=0.01 * i))
    assert e.prompt_tokens == 0
    env.run(100.0)
    assert e.prompt_tokens == 1000 + 3 * 8192 + 200
    assert e.generation_tokens == 5 + 20 + 1


def test_token_counters_of_disaggregated_roles(model: ReplicaModel) -> None:
    env, pre, _ = engine(model, prefill=True, decode=False)
    _, dec, _ = engine(model, prefill=False, decode=True)
    dec.env = env
    r = req(1, 4000, 50)
    pre.submit(r)
    env.run(10.0)
    assert (pre.prompt_tokens, pre.generation_tokens) == (4000, 1)  # the prefill instance's one token
    dec.submit(r)
    env.run(20.0)
    assert dec.generation_tokens == 50


def test_itl_histogram_quantiles() -> None:
    h = ItlHistogram()
    h.add(0.010, 990)
    h.add(0.500, 10)
    assert h.quantile(0.5) == pytest.approx(0.010, rel=0.03)
    assert h.quantile(0.995) == pytest.approx(0.5, rel=0.03)
    assert ItlHistogram().quantile(0.5) is None
