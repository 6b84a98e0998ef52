"""The decode capacity lines sizing derives (``sizing.itl_capacity_lines``) read the step the engine runs
(``perf.StepCost.step_s``), pipeline parallelism included: its per-sequence work and KV read per in-flight micro-batch."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuscale import perf, sizing

KV_TOKENS = 400_000
MAX_SEQS = 256


def _cost(pp: int) -> perf.StepCost:
    return perf.StepCost(
        overhead_s=0.004, weights_s=0.012, s_per_token=2e-5, per_seq_s=6e-5, per_context_token_s=4e-8,
        attention_s_per_pair=1e-10, comm_s_per_token=1e-6, batches_in_flight=pp,
    )


def _envelope(lines: tuple[tuple[float, float], ...], share: float) -> float:
    return max(a + b * share for a, b in lines)


@pytest.mark.parametrize("pp", [1, 2, 4])
@pytest.mark.parametrize("kv_share", [0.05, 0.3, 0.9])
def test_the_floor_line_is_the_engine_step_at_max_num_seqs(pp: int, kv_share: float) -> None:
    cost = _cost(pp)
    lines = sizing.itl_capacity_lines(cost, 10.0, MAX_SEQS, KV_TOKENS)  # a budget so loose only max_num_seqs binds
    per_seq_context = kv_share * KV_TOKENS  # the share is per running sequence: its context
    step = cost.step_s(MAX_SEQS, MAX_SEQS * per_seq_context)
    assert _envelope(lines, kv_share) == pytest.approx(step / MAX_SEQS)


def test_pipeline_stages_in_flight_raise_the_decode_capacity() -> None:
    budget = 0.05
    one = sizing.itl_capacity_lines(_cost(1), budget, MAX_SEQS, KV_TOKENS)
    two = sizing.itl_capacity_lines(_cost(2), budget, MAX_SEQS, KV_TOKENS)
    assert _envelope(two, 0.5) < _envelope(one, 0.5)
    # without batches in flight the two costs are the same replica
    assert sizing.itl_capacity_lines(replace(_cost(2), batches_in_flight=1), budget, MAX_SEQS, KV_TOKENS) == one
