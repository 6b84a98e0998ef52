"""The run's inputs: the set-up's KV link, the frozen run context's cold start and common random numbers."""

from __future__ import annotations

import dataclasses

import pytest

from gpuscale import perf
from tests.sim.actors import context


def test_the_kv_link_is_perfs_share_at_the_transfer_efficiency() -> None:
    s = context("tiny-disaggregated").setup
    line = perf.kv_link_bytes_per_s(s.network_gbps, s.gpus_per_node, s.replica.gpus)
    assert s.kv_link_bytes_per_s == line * perf.KV_TRANSFER_EFFICIENCY
    assert line == s.network_gbps * 1e9 / 8.0 * s.replica.gpus / s.gpus_per_node


def test_the_context_is_frozen_and_resolves_the_variants_cold_start() -> None:
    ctx = context()
    assert ctx.startup == ctx.setup.startup
    faster = ctx.setup.startup.model_copy(update={"image_pull_s": 1.0})
    own = dataclasses.replace(ctx, variant=ctx.variant.model_copy(update={"startup": faster}))
    assert own.startup.image_pull_s == 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.seed = 1  # type: ignore[misc]


def test_draws_are_keyed_by_what_is_drawn() -> None:
    a, b = context(), context()
    assert a.draws("pull/3").random() == b.draws("pull/3").random()
    assert a.draws("pull/3").random() != a.draws("pull/4").random()
