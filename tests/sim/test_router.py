"""The request path: cache-aware routing on prefix ids, P/D KV transfers over the catalogue's network."""

from __future__ import annotations

import random
from pathlib import Path

from gpuscale.sim.router import SAMPLE_POOL_MAX, two_at_random
from gpuscale.sim.runner import Runner
from gpuscale.sim.scenarios import build_scenario
from gpuscale.sim.traffic import TraceTraffic
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
