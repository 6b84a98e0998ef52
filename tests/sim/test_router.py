"""The request path: the router alone (rejections, the front door, a plain Service at zero), cache-aware routing on
prefix ids, P/D KV transfers over the catalogue's network."""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np

from gpuscale.sim.accounting import RequestLedger
from gpuscale.sim.context import RunContext
from gpuscale.sim.events import Environment
from gpuscale.sim.inputs import FrontDoorSim
from gpuscale.sim.pods import Replica, RoleGroup
from gpuscale.sim.router import SAMPLE_POOL_MAX, Router, two_at_random
from gpuscale.sim.runner import Runner
from gpuscale.sim.scenarios import build_scenario
from gpuscale.sim.states import LossReason, Outcome, RequestFlag
from gpuscale.sim.traffic import Arrivals, TraceTraffic
from gpuscale.sim.vllm_engine import Engine, ItlHistogram
from tests.sim.actors import FakeCapacity, NoOwners, context
from tests.sim.conftest import spec_of, write_prefix_trace


def trace_run(path: Path, replay: str = "spread", **setup: object):  # type: ignore[no-untyped-def]
    sc = build_scenario("trace", spec_of("tiny-disaggregated"), trace=TraceTraffic(path=path, replay=replay))  # type: ignore[arg-type]
    if setup:
        sc = sc.model_copy(update={"setup": sc.setup.model_copy(update=setup)})
    return Runner(sc, seed=0, policies=["ceiling"]).run()


def test_prefix_ids_hit_the_cache(tmp_path: Path) -> None:
    few = trace_run(write_prefix_trace(tmp_path / "few.csv", groups=4)).result("ceiling")
    assert few.prefix_hit_rate is not None and few.prefix_hit_rate > 0.8  # four prefixes: nearly every prompt hits


def test_cache_aware_routing_keeps_a_prefix_on_one_replica(tmp_path: Path) -> None:
    # 300 prefixes of 64 blocks do not fit one replica's cache twice over: spreading them thrashes both caches
    path = write_prefix_trace(tmp_path / "p.csv", groups=300, buckets=200)
    aware = trace_run(path)
    assert aware.traffic.prefix_ids and aware.traffic.granularity_s == 3.0 and aware.traffic.replay == "spread"
    blind = trace_run(path, prefill_routing="least-load")
    hit_aware, hit_blind = aware.result("ceiling").prefix_hit_rate, blind.result("ceiling").prefix_hit_rate
    assert hit_aware is not None and hit_blind is not None
    assert hit_aware > 5 * hit_blind
    assert aware.result("ceiling").ttft_p50_s < blind.result("ceiling").ttft_p50_s  # type: ignore[operator]


def test_a_trace_without_prefix_ids_has_no_cache_effect(tmp_path: Path) -> None:
    plain = tmp_path / "plain.csv"
    plain.write_text("arrival_s,input_tokens,output_tokens\n" + "".join(f"{0.5 * i:.1f},1100,30\n" for i in range(200)))
    r = trace_run(plain).result("ceiling")
    assert r.prefix_hit_rate is None


def test_batch_and_spread_replay_differ_and_say_so(tmp_path: Path) -> None:
    path = write_prefix_trace(tmp_path / "p.csv", per_bucket=12)
    batch, spread = trace_run(path, "batch"), trace_run(path, "spread")
    assert (batch.traffic.replay, spread.traffic.replay) == ("batch", "spread")
    assert batch.result("ceiling").ttft_p99_s > spread.result("ceiling").ttft_p99_s  # type: ignore[operator]


def test_kv_transfer_time_follows_the_network_and_concurrent_transfers_share_it(tmp_path: Path) -> None:
    path = write_prefix_trace(tmp_path / "p.csv")
    fast = trace_run(path).result("ceiling")
    # 20 Gbit/s shared by a 4-GPU node: a 1,100-token prompt's 144 MB of KV takes about 0.3 s, and requests of one
    # bucket share the link
    slow = trace_run(path, network_gbps=20.0).result("ceiling")
    assert slow.ttft_p50_s > fast.ttft_p50_s + 0.2  # type: ignore[operator]
    lone = trace_run(write_prefix_trace(tmp_path / "lone.csv", per_bucket=1), network_gbps=20.0).result("ceiling")
    assert slow.ttft_p50_s > lone.ttft_p50_s + 0.02  # type: ignore[operator]


def test_power_of_two_draws_the_pair_random_sample_draws() -> None:
    # the decode router's fast pick must keep every seeded run identical to the sample() it replaces, on both sides
    # of sample()'s pool/rejection switch
    for n in (2, 3, 5, SAMPLE_POOL_MAX, SAMPLE_POOL_MAX + 1, 40):
        population = list(range(n))
        for seed in range(200):
            fast, ref = random.Random(seed), random.Random(seed)
            for _ in range(5):
                assert two_at_random(fast, population) == tuple(ref.sample(population, 2))


def alone(prompts: list[int], door: FrontDoorSim | None = None, at_zero: str = "hold") -> tuple[Router, RequestLedger, Environment, FakeCapacity]:
    """The router alone over requests one second apart (200 output tokens each), its roles with no replica."""
    base = context()
    arrivals = Arrivals(
        arrival_s=np.arange(len(prompts), dtype=float), prompt_tokens=np.array(prompts), output_tokens=np.full(len(prompts), 200),
    )
    variant = base.variant.model_copy(update={"front_door": door, "at_zero": at_zero, "prewarm": door is not None})
    ctx = RunContext(setup=base.setup, variant=variant, arrivals=arrivals, seed=0)
    env, ledger, capacity = Environment(), RequestLedger(len(prompts)), FakeCapacity()
    router = Router(ctx, env, ledger, [RoleGroup(r) for r in ctx.setup.roles])
    router.connect(NoOwners(), capacity)
    router.start()
    return router, ledger, env, capacity


def test_alone_a_request_that_does_not_fit_is_rejected_and_one_at_zero_is_held() -> None:
    too_long = context().setup.replica.max_request_tokens
    router, ledger, env, _ = alone([too_long, 500])
    env.run(5.0)
    assert ledger.status[0] == Outcome.REJECTED
    assert ledger.status[1] == Outcome.IN_SYSTEM and [r.rid for r in router.first_role.gateway] == [1]
    assert ledger.flags[1] == RequestFlag.HELD | RequestFlag.STARTING


def test_alone_the_front_door_holds_to_its_limit_refuses_past_its_bound_and_prewarms_once() -> None:
    door = FrontDoorSim(hold_limit_s=10.0, queue_bound=2, retry_after_s=30.0, poll_s=1.0)
    router, ledger, env, capacity = alone([500, 500, 500], door)
    env.run(5.0)
    assert ledger.status[2] == Outcome.REFUSED  # the queue held two already: 503 at once
    assert [r.rid for r in router.first_role.gateway] == [0, 1] and capacity.prewarms == 1
    env.run(10.5)
    assert ledger.status[0] == Outcome.REFUSED and ledger.status[1] == Outcome.IN_SYSTEM  # 10 s after its arrival
    env.run(11.5)
    assert ledger.status[1] == Outcome.REFUSED and not router.first_role.gateway


def test_alone_a_plain_service_at_zero_refuses_the_connection() -> None:
    _, ledger, env, _ = alone([500], at_zero="connection-refused")
    env.run(2.0)
    assert ledger.status[0] == Outcome.LOST and ledger.loss[0] == LossReason.NO_ENDPOINT


def test_alone_a_ready_replica_gets_the_request_on_its_engine() -> None:
    router, ledger, env, _ = alone([500])
    role = router.first_role
    rep = Replica(1, role, 1, 1, 0.0)
    rep.engine = Engine(env, router.ctx.setup.replica, router, ItlHistogram())
    role.replicas.append(rep)
    role.ready.append(rep)
    env.run(100.0)
    assert ledger.status[0] == Outcome.COMPLETED and ledger.flags[0] == 0
    assert rep.engine.done_requests == 1 and not math.isnan(ledger.first[0])


def prefill_replicas(ctx: RunContext, n: int) -> tuple[Environment, list[Replica]]:
    """``n`` ready prefill-only replicas of ``ctx``'s model, on one clock, reporting nowhere."""
    from tests.sim.test_vllm_engine import Sink

    env = Environment()
    role = RoleGroup(ctx.setup.roles[0])
    reps = []
    for i in range(n):
        rep = Replica(i, role, 1, 1, 0.0)
        rep.engine = Engine(env, ctx.setup.replica, Sink(), ItlHistogram(), prefill=True, decode=False)
        reps.append(rep)
    return env, reps


def work_router(ctx: RunContext, routing: str) -> Router:
    s = ctx.setup.model_copy(update={"prefill_routing": routing})
    arrivals = Arrivals(np.zeros(1), np.array([1]), np.array([1]), prefixes=((1,),))
    return Router(RunContext(setup=s, variant=ctx.variant, arrivals=arrivals, seed=0), Environment(), RequestLedger(1),
                  [RoleGroup(r) for r in s.roles])


def test_the_work_pick_balances_prefill_work_where_the_routers_rule_counts_requests() -> None:
    from gpuscale.sim.vllm_engine import Request

    ctx = context("tiny-disaggregated")
    bt = ctx.setup.replica.block_tokens
    env, (warm, cold) = prefill_replicas(ctx, 2)
    assert warm.engine is not None and cold.engine is not None
    prefix = tuple(range(400))  # 6,400 tokens
    warm.engine.submit(Request(0, 0.0, 400 * bt + 8, 1, 1e9, prefix))
    env.run(1e3)  # prefilled: its blocks are in warm's cache
    new = Request(1, 1e3, 400 * bt + 8, 1, 1e9, prefix)
    assert warm.engine.uncached_tokens(new) == 8 and cold.engine.uncached_tokens(new) == 400 * bt + 8
    by_work, by_requests = work_router(ctx, "cache-aware-work"), work_router(ctx, "cache-aware")
    assert by_work._pick_prefill([cold, warm], new) is warm and by_requests._pick_prefill([cold, warm], new) is warm
    # a backlog of one long prompt on the warm replica: still one request, but more work than the hit saves
    warm.engine.submit(Request(2, 1e3, 8000, 1, 1e9, None))
    assert warm.engine.backlog == 8000
    assert by_work._pick_prefill([cold, warm], new) is cold  # 6,408 tokens on cold < 8,008 on warm
    assert by_requests._pick_prefill([cold, warm], new) is warm  # one request apart: the router's rule keeps the hit
    # a shorter backlog than the hit saves: the hit wins again
    env.run(2e3)
    warm.engine.submit(Request(3, 2e3, 3000, 1, 1e9, None))
    assert by_work._pick_prefill([cold, warm], new) is warm


def test_the_routers_rule_leaves_the_hit_only_when_loads_are_imbalanced_both_ways() -> None:
    """vLLM Router ``cache_aware``: imbalanced means more than 32 requests apart AND more than 1.1 x the least loaded;
    a match of exactly half the prompt is not enough (``match_rate > cache_threshold``)."""
    from gpuscale.sim.vllm_engine import Request

    ctx = context("tiny-disaggregated")
    bt = ctx.setup.replica.block_tokens
    env, (warm, cold) = prefill_replicas(ctx, 2)
    assert warm.engine is not None and cold.engine is not None
    prefix = tuple(range(40))
    warm.engine.submit(Request(0, 0.0, 40 * bt + 8, 1, 1e9, prefix))
    env.run(1e3)
    router = work_router(ctx, "cache-aware")
    new = Request(1, 1e3, 40 * bt + 8, 1, 1e9, prefix)
    assert router._pick_prefill([cold, warm], new) is warm
    half = Request(2, 1e3, 80 * bt, 1, 1e9, prefix)  # 40 of 80 blocks cached: exactly half, not more
    assert router._pick_prefill([cold, warm], half) is cold
    def queue(rep: Replica, n: int) -> None:
        assert rep.engine is not None
        for _ in range(n):
            rep.engine.waiting.append(Request(99, 1e3, 10, 1, 1e9, None))

    queue(warm, 33)  # 34 requests on warm (its prefilled one is gone: 33 waiting), none on cold: imbalanced both ways
    assert router._pick_prefill([cold, warm], new) is cold
    queue(cold, 400)
    queue(warm, 400)  # 433 on warm, 400 on cold: 33 apart, but 433 <= 1.1 x 400: balanced, the hit wins
    assert router._pick_prefill([cold, warm], new) is warm


def _with_ready_replicas(router: Router, env: Environment, n: int) -> list[Replica]:
    role = router.first_role
    reps = []
    for i in range(n):
        rep = Replica(i, role, 1, 1, 0.0)
        rep.engine = Engine(env, router.ctx.setup.replica, router, ItlHistogram(), name=f"r{i}")
        role.replicas.append(rep)
        role.ready.append(rep)
        reps.append(rep)
    return reps


def test_the_api_server_overhead_delays_the_engine_submit_and_counts_in_ttft() -> None:
    from gpuscale import perf

    router, ledger, env, _ = alone([500])
    (rep,) = _with_ready_replicas(router, env, 1)
    assert rep.engine is not None
    overhead = perf.request_overhead_s()
    env.run(overhead / 2)  # routed at t = 0, still in the API server: the engine has not seen it
    assert rep.engine.is_empty() and ledger.status[0] == Outcome.IN_SYSTEM
    env.run(overhead * 1.01)
    assert rep.engine.load == 1  # handed over at t = overhead and scheduled at once
    env.run(30.0)
    assert ledger.status[0] == Outcome.COMPLETED
    # the first token: the overhead plus the prompt alone on the idle engine (and no earlier)
    assert ledger.first[0] >= overhead + rep.engine.m.idle_prefill_s(500) - 1e-9


def test_a_replica_that_stops_being_ready_within_the_overhead_never_gets_the_request() -> None:
    router, ledger, env, _ = alone([500])
    (rep,) = _with_ready_replicas(router, env, 1)
    assert rep.engine is not None
    env.run(1e-6)  # routed to it, still in the API server
    router.first_role.ready.remove(rep)  # drained within the window
    env.run(1.0)
    assert rep.engine.is_empty() and ledger.status[0] == Outcome.IN_SYSTEM
    assert [r.rid for r in router.first_role.gateway] == [0]  # routed again: no replica ready, the gateway holds it


def test_requests_on_their_way_count_in_the_pick_so_a_burst_is_spread() -> None:
    """A burst within the API server's overhead: each request sees the ones routed before it (vLLM Router counts a
    request from the moment it routes it), so four go two and two, not all four to the first replica."""
    from gpuscale import perf
    from gpuscale.sim.vllm_engine import Request

    router, _, env, _ = alone([500] * 8)
    a, b = _with_ready_replicas(router, env, 2)
    for rid in range(4, 8):  # arrivals 0-3 of `alone` come a second apart; these four at once
        router.route(router.first_role, Request(rid, 0.0, 500, 200, 1e9))
    assert (a.in_transit, b.in_transit) == (2, 2) and a.transit_tokens == b.transit_tokens == 1000
    env.run(perf.request_overhead_s() * 1.01)  # all admitted, with `alone`'s first arrival (also routed at t = 0)
    assert a.engine is not None and b.engine is not None
    assert sorted((a.engine.load, b.engine.load)) == [2, 3] and a.in_transit == b.in_transit == 0
