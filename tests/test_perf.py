"""The one step model: its vectorised forms agree with the scalar step to the bit, and the KV link's share."""

from __future__ import annotations

import numpy as np
import pytest

from gpuscale import perf
from gpuscale.sim.replica import ReplicaModel
from gpuscale.spec.catalogue import CATALOGUE, L40S
from gpuscale.spec.model_catalogue import MODELS
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
    assert c.step_s(1, 0.0) == c.overhead_s + c.per_seq_s + c.weights_s + c.comm_s_per_token
    assert c.step_s(0, 0.0, 8192) == c.overhead_s + c.s_per_token * 8192 + c.comm_s_per_token * 8192
    assert c.s_per_token * 8192 > c.weights_s


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


def test_tensor_parallel_traffic_is_its_ring_bytes_over_the_parts_link() -> None:
    arch = MODELS["llama-3.1-70b"]
    h100, l40s = CATALOGUE["p5.48xlarge"].gpu, L40S
    ring = 2 * arch.layers * 2 * (4 - 1) / 4 * arch.hidden_size * perf.ACTIVATION_BYTES
    assert perf.allreduce_bytes_per_token(arch, 4) == ring
    nvlink = perf.step_cost(arch, h100, 4, 1)
    assert nvlink.comm_s_per_token == pytest.approx(ring / (450e9 * perf.LINK_EFFICIENCY))
    # L40S has no NVLink: the same all-reduces cross PCIe Gen4 at 32 GB/s, 14x slower per token
    pcie = perf.step_cost(arch, l40s, 4, 1)
    assert pcie.comm_s_per_token == pytest.approx(ring / (32e9 * perf.LINK_EFFICIENCY))
    assert pcie.comm_s_per_token / nvlink.comm_s_per_token == pytest.approx(450 / 32)
    # the fixed part is two all-reduces per layer: vLLM's custom all-reduce over NVLink or two PCIe GPUs, NCCL beyond
    assert nvlink.overhead_s == pytest.approx(perf.STEP_OVERHEAD_S + 2 * arch.layers * perf.ALLREDUCE_LATENCY_S)
    assert pcie.overhead_s == pytest.approx(perf.STEP_OVERHEAD_S + 2 * arch.layers * perf.NCCL_PCIE_ALLREDUCE_LATENCY_S)
    assert perf.allreduce_latency_s(l40s, 2) == perf.ALLREDUCE_LATENCY_S < perf.allreduce_latency_s(l40s, 4)
    alone = perf.step_cost(arch, h100, 1, 1)
    assert alone.comm_s_per_token == 0.0 and alone.overhead_s == perf.STEP_OVERHEAD_S
    # a compute-bound prefill chunk pays its traffic on top of its GEMMs (vLLM does not overlap them)
    assert pcie.token_s == pcie.s_per_token + pcie.comm_s_per_token


def test_a_pipeline_boundary_between_nodes_crosses_the_network() -> None:
    arch = MODELS["llama-3.1-70b"]
    p4d = CATALOGUE["p4d.24xlarge"]
    inside = perf.stage_link_gb_s(p4d.gpu, p4d.gpus_per_node, p4d.network_gbps, 4, 2)
    across = perf.stage_link_gb_s(p4d.gpu, p4d.gpus_per_node, p4d.network_gbps, 8, 2)
    assert inside == p4d.gpu.nvlink_gb_s == 300
    assert across == pytest.approx(400 / 8 * 8 / 8)  # 8 ranks, each over its share of the node's 400 Gbit/s
    one_hop = arch.hidden_size * perf.ACTIVATION_BYTES / (across * 1e9 * perf.LINK_EFFICIENCY)
    within = perf.step_cost(arch, p4d.gpu, 8, 2)
    between = perf.step_cost(arch, p4d.gpu, 8, 2, stage_link_gb_s=across)
    assert between.comm_s_per_token - within.comm_s_per_token == pytest.approx(
        one_hop - arch.hidden_size * perf.ACTIVATION_BYTES / (300e9 * perf.LINK_EFFICIENCY))
    # stages pipeline: per token, each stage all-reduces its 1/pp of the layers and the hand-over costs one boundary,
    # while a step pays every boundary's latency
    pp4 = perf.step_cost(arch, p4d.gpu, 8, 4, stage_link_gb_s=across)
    ring = perf.allreduce_bytes_per_token(arch, 8) / (300e9 * perf.LINK_EFFICIENCY)
    assert pp4.comm_s_per_token == pytest.approx(ring / 4 + one_hop)
    assert between.comm_s_per_token == pytest.approx(ring / 2 + one_hop)
    assert pp4.overhead_s - between.overhead_s == pytest.approx(2 * perf.STEP_OVERHEAD_S + 2 * perf.ALLREDUCE_LATENCY_S)


def test_pipeline_parallel_decode_spreads_its_sequences_over_one_batch_per_stage() -> None:
    """vLLM keeps ``pp`` batches in flight (``max_concurrent_batches``): the KV read and per-sequence work of a decode
    step are paid per micro-batch of n / pp sequences, the weights' stream per traversal; one sequence is one batch."""
    arch = MODELS["llama-3.1-70b"]
    gpu = CATALOGUE["p4d.24xlarge"].gpu
    pp2 = perf.step_cost(arch, gpu, 4, 2)
    one = perf.StepCost(**{**pp2.__dict__, "batches_in_flight": 1})
    assert pp2.batches_in_flight == perf.pipeline_batches(2) == 2
    assert perf.step_cost(arch, gpu, 4, 1).batches_in_flight == 1
    assert pp2.step_s(1, 3000.0) == one.step_s(1, 3000.0)  # a lone sequence crosses every stage with all its KV
    kv = 64 * 2000.0
    saved = one.step_s(64, kv) - pp2.step_s(64, kv)
    assert saved == pytest.approx((one.per_context_token_s * kv + one.per_seq_s * 64) / 2)
    assert pp2.context_token_s(64) == pp2.per_context_token_s / 2 and pp2.context_token_s(1) == pp2.per_context_token_s
    n = np.array([0, 1, 2, 64])
    assert pp2.step_s_array(n, n * 2000.0).tolist() == [pp2.step_s(int(k), k * 2000.0) for k in n]


def test_a_pipeline_parallel_replica_decodes_faster_under_load_with_its_batches_in_flight() -> None:
    """Through the engine: a PP2 replica decoding a batch of 64 sequences of 1000 tokens' context takes less time per
    token than the same replica with one batch in flight (the engine's decode runs read the per-batch KV cost), and the
    same at one client. (The decode part alone: a closed loop's prompts, arriving one at a time, each ride in one
    micro-batch and stall the pipeline, ``test_one_prompt_in_one_micro_batch_stalls_the_pipeline``.)"""
    from gpuscale.sim import replica_load

    arch = MODELS["llama-3.1-70b"].model_copy(update={"max_context_tokens": 32768})
    m = replica_load.replica_alone(arch, CATALOGUE["p4d.24xlarge"], 4, 2)
    single = m.model_copy(update={"cost": perf.StepCost(**{**m.cost.__dict__, "batches_in_flight": 1})})

    def decode_s(model: ReplicaModel) -> float:  # the batch's 999 decode steps: its latency less its prefill's
        return replica_load.batch_latency(model, 64, 1000, 1000) - replica_load.batch_latency(model, 64, 1000, 1)

    assert decode_s(single) > 1.05 * decode_s(m)  # the KV read, about a quarter of these steps, halves
    # one sequence alone is in one micro-batch either way; crossing the stages it pays each stage's per-token compute
    # and traffic (perf.StepCost.stage_s), which the weight stream all but hides
    alone = replica_load.closed_loop(m, 1, 4000, 200, jitter=0.0).as_json()["itl_mean_s"]
    assert alone == pytest.approx(replica_load.closed_loop(single, 1, 4000, 200, jitter=0.0).as_json()["itl_mean_s"],
                                  rel=1e-3)
