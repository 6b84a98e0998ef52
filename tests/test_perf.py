"""The one step model: its vectorised forms agree with the scalar step to the bit, and the KV link's share."""

from __future__ import annotations

import numpy as np

from gpuscale import perf
from gpuscale.spec.catalogue import CATALOGUE
from tests.sim.conftest import spec_of


def cost() -> perf.StepCost:
    m = spec_of("prod").models[0]
    return perf.step_cost(m.architecture, CATALOGUE["p5.48xlarge"].gpu, 4, 1)


def test_the_array_step_is_the_scalar_step_term_for_term() -> None:
    c = cost()
    rng = np.random.default_rng(0)
    n = rng.integers(0, 300, 500)
    ctx = rng.uniform(0, 2e6, 500)
    tokens = rng.integers(0, 8192, 500)
    pairs = rng.uniform(0, 3e7, 500)
    arr = c.step_s_array(n, ctx, tokens, pairs)
    assert arr.tolist() == [c.step_s(int(a), float(b), int(d), float(e)) for a, b, d, e in zip(n, ctx, tokens, pairs, strict=True)]
    # both sides of the roofline: a small batch is weight-bound, a long prefill chunk compute-bound
    assert c.step_s(1, 0.0) == c.overhead_s + c.per_seq_s + c.weights_s
    assert c.step_s(0, 0.0, 8192) == c.overhead_s + c.s_per_token * 8192 > c.overhead_s + c.weights_s


def test_a_prompt_alone_is_its_chunks_with_the_whole_prompt_attention() -> None:
    c = cost()
    chunk = 2048
    p = np.array([100, 2048, 5000])
    got = c.prefill_alone_s(p, chunk)
    rest = 5000 - 2 * chunk
    steps = 2 * c.step_s(0, 0.0, chunk) + c.step_s(0, 0.0, rest)
    assert got[2] == steps + c.attention_s_per_pair * 5000 * 5000 / 2.0
    assert got[1] == c.step_s(0, 0.0, chunk) + c.attention_s_per_pair * 2048 * 2048 / 2.0
    assert got[0] < got[1] < got[2]


def test_the_kv_link_is_the_replica_gpus_share_of_their_nodes_network() -> None:
    p5 = CATALOGUE["p5.48xlarge"]
    line = p5.network_gbps * 1e9 / 8.0
    assert perf.kv_link_bytes_per_s(p5.network_gbps, p5.gpus_per_node, 4) == line / 2  # half the node's GPUs
    assert perf.kv_link_bytes_per_s(p5.network_gbps, p5.gpus_per_node, 8) == line
    # a replica over two nodes moves its ranks' KV slices over both nodes' NICs at once
    assert perf.kv_link_bytes_per_s(p5.network_gbps, p5.gpus_per_node, 16) == 2 * line
