"""Signals as objects: the value the simulator observes is what the emitted trigger's query answers, every query is
total, and the objects round-trip through sizing's JSON."""

from __future__ import annotations

import math
import random

import pytest

from gpuscale.manifests import autoscaling as au
from gpuscale.signals import promql, selection
from gpuscale.signals.base import Signal
from gpuscale.sim.policies import ObservedSeries, RoleObservation, signal_value
from gpuscale.sizing import RoleSizing, size_platform
from gpuscale.spec.platform import PlatformSpec
from tests.signals.scenarios import Tsdb, scrape, shipped_roles


def _observation(rng: random.Random, finished: bool) -> RoleObservation:
    done = rng.uniform(0.5, 20) if finished else 0.0
    return RoleObservation(
        role="x", current=3, ready=3, duty_sum=2.0, queue=rng.uniform(0, 30), gateway=0.0, kv_sum=rng.uniform(0, 2),
        running=rng.uniform(0, 300), prompt_rate=rng.uniform(0, 5e4), generation_rate=rng.uniform(0, 1e4),
        done_rate=done, queue_time_rate=done * rng.uniform(0, 2), itl_rate=rng.uniform(0, 300), itl_count_rate=rng.uniform(0, 1e4),
        done_rate_5m=done, done_prompt_rate_5m=done * rng.uniform(100, 8000),
    )


def test_the_simulator_reads_what_each_emitted_trigger_answers(stack_specs: dict[str, PlatformSpec]) -> None:
    """For every signal of every shipped role, the simulator's observation and the emitted query (parsed back from
    the ScaledObject) agree on the same scrape, finished requests or not."""
    rng = random.Random(7)
    checked = 0
    for r in shipped_roles(stack_specs):
        triggers = {t["name"]: t for t in r.body["spec"]["triggers"]}
        for sig in r.scaling.signals:
            query = promql.parse(triggers[sig.trigger_name]["metadata"]["query"])
            for finished in (True, False):
                obs = _observation(rng, finished)
                emitted = promql.evaluate(query, ObservedSeries(obs))
                assert emitted is not None
                # the PromQL literals carry six significant digits; the simulator keeps sizing's full coefficients
                assert signal_value(sig, obs) == pytest.approx(emitted, rel=1e-5, abs=1e-12), (r.key, sig.kind)
                checked += 1
    assert checked >= 30


def test_every_emitted_query_is_total(stack_specs: dict[str, PlatformSpec]) -> None:
    """No pod (a role at zero) and no finished request both read 0: never an empty result or NaN, which KEDA
    v2.20.2 turns into a trigger error with ignoreNullValues false."""
    for r in shipped_roles(stack_specs):
        for t in r.body["spec"]["triggers"]:
            if t["type"] != "prometheus":
                continue
            query = promql.parse(t["metadata"]["query"])
            assert promql.evaluate(query, Tsdb(scrape(), ready=0)) == 0.0, (r.key, t["name"])
            idle = promql.evaluate(query, Tsdb(scrape(), ready=2))
            assert idle is not None and not math.isnan(idle) and idle == 0.0, (r.key, t["name"])


def test_signals_round_trip_with_their_kind(prod_spec: PlatformSpec) -> None:
    for ms in size_platform(prod_spec).models:
        for rs in ms.roles:
            again = RoleSizing.model_validate_json(rs.model_dump_json())
            assert [type(x) for x in again.signals] == [type(x) for x in rs.signals]
            assert again == rs


def test_queries_read_one_role_through_the_tree(prod_spec: PlatformSpec) -> None:
    rs = size_platform(prod_spec).model("llama-70b-fp8").role("prefill")
    for sig in rs.signals:
        expr = sig.expr(au.role_selector("inference", "llama-70b-fp8", "prefill"))
        assert au.check_single_role(expr) == "prefill"
        unpinned = sig.expr((("namespace", "=", "inference"),))
        with pytest.raises(ValueError, match="exactly one role"):
            au.check_single_role(unpinned)


def test_the_activation_threshold_sits_on_the_queue_signal(dev_spec: PlatformSpec) -> None:
    rs = size_platform(dev_spec).model("llama-8b").role("aggregated")
    signals: list[Signal] = list(rs.signals)
    waker = selection.waker(signals)
    assert signals[waker].kind == "prompt_backlog"
    assert [selection.activation(signals, 7.0, s) for s in signals] == [7.0 if i == waker else 0.0 for i in range(len(signals))]
