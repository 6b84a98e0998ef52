"""The benchmark clients ``gpuscale perf`` and ``bench/calibration.py`` share (``gpuscale.sim.replica_load``)."""

from __future__ import annotations

import numpy as np
import pytest

from gpuscale import perf
from gpuscale.sim import replica_load as rl
from gpuscale.sim.replica import ReplicaModel
from gpuscale.spec.catalogue import CATALOGUE
from gpuscale.spec.model_catalogue import MODELS


@pytest.fixture(scope="module")
def r8b() -> ReplicaModel:
    return rl.replica_alone(MODELS["llama-3.1-8b"], CATALOGUE["p5.48xlarge"], 1)


def test_one_client_sees_an_idle_replica(r8b: ReplicaModel) -> None:
    got = rl.closed_loop(r8b, 1, 2000, 200).as_json()
    # alone on the replica: TTFT is the API server's per-request overhead plus the prompt's chunked prefill, each token
    # one decode step at its context
    assert got["ttft_mean_s"] == pytest.approx(perf.request_overhead_s() + r8b.idle_prefill_s(2000), rel=0.06)
    # in-process (offline) requests pay no API server
    alone = rl.offline(r8b, [2000], [200]).as_json()
    assert alone["ttft_mean_s"] == pytest.approx(r8b.idle_prefill_s(2000), rel=1e-9)
    assert got["itl_mean_s"] == pytest.approx(r8b.cost.step_s(1, 2100), rel=0.03)
    assert got["tpot_mean_s"] == pytest.approx(got["itl_mean_s"], rel=0.02)


def test_jittered_clients_do_not_run_in_lockstep(r8b: ReplicaModel) -> None:
    lockstep = rl.closed_loop(r8b, 16, 2000, 200, jitter=0.0).as_json()
    jittered = rl.closed_loop(r8b, 16, 2000, 200).as_json()
    # identical requests arrive together every round, each prompt waiting behind the others' prefills (issue 28: TTFT
    # inflated by up to +235 %); jittered lengths spread them, at the same throughput
    assert jittered["ttft_mean_s"] < 0.5 * lockstep["ttft_mean_s"]
    assert jittered["output_tokens_per_s"] == pytest.approx(lockstep["output_tokens_per_s"], rel=0.05)


def test_open_loop_carries_its_rate_below_capacity_and_offline_is_the_ceiling(r8b: ReplicaModel) -> None:
    rng = np.random.default_rng(0)
    prompts, outputs = rl.jittered(rng, 2000, 400).tolist(), rl.jittered(rng, 200, 400).tolist()
    light = rl.open_loop(r8b, 2.0, prompts, outputs).as_json()
    ceiling = rl.offline(r8b, prompts, outputs).as_json()
    assert light["requests_per_s"] == pytest.approx(2.0, rel=0.1)
    assert light["ttft_p50_s"] < 2 * r8b.idle_prefill_s(2000)
    assert ceiling["requests_per_s"] > 3 * light["requests_per_s"]
    over = rl.open_loop(r8b, 2 * ceiling["requests_per_s"], prompts, outputs).as_json()
    assert over["requests_per_s"] <= ceiling["requests_per_s"] * 1.02  # never above the ceiling
    assert over["ttft_mean_s"] > 10 * light["ttft_mean_s"]  # the queue grows


def test_jitter_stays_within_its_band() -> None:
    x = rl.jittered(np.random.default_rng(1), 1000, 10_000)
    assert x.min() >= 900 and x.max() <= 1100 and abs(x.mean() - 1000) < 5


def test_offline_runs_the_engine_with_the_llm_class_prefill_budget(r8b: ReplicaModel) -> None:
    """``LLM.generate`` prefills in chunks of 16384 tokens on an H100 (8192 behind the API server), 8192 on an L40S."""
    assert r8b.max_num_batched_tokens == 8192
    alone = rl.offline(r8b, [12000], [2]).as_json()
    assert alone["ttft_mean_s"] == pytest.approx(float(r8b.cost.prefill_alone_s(np.array([12000]), 16384)[0]), rel=1e-9)
    assert alone["ttft_mean_s"] < r8b.idle_prefill_s(12000)
    l40s = rl.replica_alone(MODELS["llama-3.1-8b"], CATALOGUE["g6e.xlarge"], 1)
    assert l40s.max_num_batched_tokens == 2048
    got = rl.offline(l40s, [12000], [2]).as_json()["ttft_mean_s"]
    assert got == pytest.approx(float(l40s.cost.prefill_alone_s(np.array([12000]), 8192)[0]), rel=1e-9)
