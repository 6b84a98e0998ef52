"""Accounting: the ledgers alone (GPU time observed, each request decided once), the result a pure function of the
record; in runs: every request decided (drain), conservation, misses by cause, attainment over all and servable."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from gpuscale.sim.accounting import GpuLedger, GpuStates, RequestLedger, gpu_states, policy_result
from gpuscale.sim.events import Environment
from gpuscale.sim.nodes import Node
from gpuscale.sim.pods import Replica, RoleGroup
from gpuscale.sim.replica import servable_mask
from gpuscale.sim.runner import Runner, servable_of
from gpuscale.sim.scenarios import build_scenario
from gpuscale.sim.simulation import Simulation
from gpuscale.sim.states import LossReason, NodeState, Outcome, ReplicaState
from gpuscale.sim.traffic import HugePrompt, RatePoint, SyntheticTraffic, generate
from gpuscale.spec.platform import PlatformSpec
from gpuscale.spec.workload import TokenDistribution
from tests.sim.actors import context
from tests.sim.conftest import run_scenario


def test_runs_drain_until_every_request_is_decided() -> None:
    res = run_scenario("tiny-aggregated", "peak-hour", 600.0)
    for r in res.results:
        assert r.arrived == r.completed + r.dropped_timeout + r.dropped_rejected + r.lost_in_flight, r.name
        assert r.end_s >= res.duration_s
        assert r.misses.total == r.arrived - r.on_time
    # the busiest policy is still serving when arrivals stop: the drain decides what is left instead of dropping it
    assert max(r.end_s for r in res.results) > res.duration_s + 1.0


def test_gpu_time_is_charged_to_the_end_of_the_drain() -> None:
    res = run_scenario("tiny-aggregated", "stack", 600.0)
    ceiling = res.ceiling
    assert ceiling is not None
    gpus = sum(ceiling.replicas_max.values())  # single-GPU replicas, every one on its own warm node
    assert ceiling.gpu_hours == pytest.approx(gpus * ceiling.end_s / 3600.0, abs=1e-4)
    for r in res.results:
        assert r.idle_gpu_minutes.total + r.serving_gpu_minutes == pytest.approx(r.gpu_hours * 60, rel=1e-3, abs=0.05)


def huge_requests_scenario(spec: PlatformSpec):  # type: ignore[no-untyped-def]
    """The tiny stack at 1 req/s plus one request longer than the context and one that no replica serves in time."""
    sc = build_scenario("stack", spec, duration_s=300.0)
    traffic = SyntheticTraffic(
        profile=[RatePoint(t_s=0, rps=1.0)], prompt_tokens=TokenDistribution(mean=300, p99=600),
        output_tokens=TokenDistribution(mean=40, p99=100),
        huge_prompts=[
            HugePrompt(at_s=30.0, prompt_tokens=20_000, output_tokens=10, label="too-long"),
            HugePrompt(at_s=60.0, prompt_tokens=14_000, output_tokens=2_000, label="slow-decode"),
        ],
    )
    return sc.model_copy(update={"traffic": traffic})


def test_misses_are_broken_down_by_cause(tiny: PlatformSpec) -> None:
    sc = huge_requests_scenario(tiny)
    # an ITL target no replica meets for a long decode: the slow request is infeasible even on an idle replica
    sc = sc.model_copy(update={"setup": sc.setup.model_copy(update={"itl_slo_s": 0.030})})
    res = Runner(sc, seed=1, policies=["gpuscale"]).run()
    r = res.result("gpuscale")
    assert r.tracked_request("too-long").outcome == "rejected"
    assert r.misses.rejected == r.dropped_rejected == 1
    arrivals = generate(sc.traffic, 1, sc.setup.duration_s)
    servable = servable_of(sc.setup, arrivals)
    assert r.servable == int(servable.sum()) < r.arrived - 1
    assert r.misses.infeasible == r.arrived - r.servable - 1
    assert r.slo_attainment_servable > r.slo_attainment


def test_servable_mask_matches_the_idle_replica(tiny: PlatformSpec) -> None:
    sc = build_scenario("stack", tiny, duration_s=60.0)
    m = sc.setup.replica
    prompt = np.array([500, 14_000, 16_000, 200])
    output = np.array([10, 10, 1_000, 10])
    mask = servable_mask(m, prompt, output, 2.0, 0.08, disaggregated=False, transfer_bytes_per_s=1e12)
    assert mask.tolist() == [True, m.idle_prefill_s(14_000) <= 2.0, False, True]  # 17k tokens > the 16k context


def test_cold_start_misses_are_told_apart_from_queueing(tiny: PlatformSpec) -> None:
    # start from zero replicas: the first requests wait for a node and a replica
    sc = build_scenario("stack", tiny, duration_s=600.0)
    sc = sc.model_copy(update={"variants": [v.model_copy(update={"initial_replicas": {"aggregated": 0}}) for v in sc.variants]})
    res = Runner(sc, seed=0, policies=["queue-depth"]).run()
    r = res.result("queue-depth")
    assert r.misses.cold_start > 0
    first_ready = next(e.t_s for e in r.events if e.kind == "ready")
    early = sum(a for t, a in zip(r.series.t_s, r.series.arrived, strict=True) if t < first_ready - 60.0)
    assert r.misses.cold_start >= early > 0


def test_the_gpu_ledger_integrates_what_it_is_told_changed() -> None:
    env = Environment()
    ledger = GpuLedger(env)
    state = {"serving": 0.0}
    ledger.connect(lambda: GpuStates(serving=state["serving"]))
    for t, serving in ((0.0, 2.0), (0.0, 4.0), (10.0, 4.0), (30.0, 1.0)):  # two changes at t=0, one that changes nothing
        env.now = t
        ledger.will_change()
        state["serving"] = serving
    assert ledger.gpus_now() == 1
    assert ledger.integral(40.0).serving == 4.0 * 30.0 + 1.0 * 10.0


def test_nodes_and_replicas_report_their_changes_without_being_asked() -> None:
    env = Environment()
    ledger = GpuLedger(env)
    nodes: list[Node] = []
    reps: list[Replica] = []
    ledger.connect(lambda: gpu_states(nodes, reps))
    nodes.append(Node(1, 8, 0.0, watch=ledger))  # provisioning from t = 0
    env.now = 60.0
    nodes[0].state = NodeState.READY  # 8 GPUs empty
    env.now = 100.0
    reps.append(Replica(1, RoleGroup(context().setup.roles[0]), 1, 8, 100.0, watch=ledger))
    nodes[0].free = 0
    reps[0].pods[0].node = nodes[0]  # gang wait: the replica is still pending
    env.now = 110.0
    reps[0].state = ReplicaState.SERVING
    g = ledger.integral(200.0)
    assert (g.provisioning, g.empty, g.gang_wait, g.serving) == (480.0, 320.0, 80.0, 720.0)


def test_a_request_is_decided_once() -> None:
    q = RequestLedger(2)
    q.arrive()
    q.arrive()
    q.completed(0, 5.0)
    q.timed_out(0, 9.0)  # too late: already completed
    q.lost(1, LossReason.DRAIN, 7.0)
    assert q.status == [Outcome.COMPLETED, Outcome.LOST] and q.done[0] == 5.0 and q.loss[1] == LossReason.DRAIN
    assert q.open == 0 and q.last_decided_t == 7.0


def test_the_result_is_a_pure_function_of_the_record(tiny: PlatformSpec) -> None:
    sc = build_scenario("stack", tiny, duration_s=120.0)
    arrivals = generate(sc.traffic, 0, sc.setup.duration_s)
    servable = servable_of(sc.setup, arrivals)
    sim = Simulation(sc.setup, sc.variants[2], arrivals, 0, servable)
    result = sim.run()
    record = sim.record(result.end_s)
    again = policy_result(sim.ctx, record, servable)
    assert again == result and policy_result(sim.ctx, record, servable) == again
    undecided = replace(record, status=np.where(np.arange(len(arrivals)) == 0, Outcome.IN_SYSTEM, record.status))
    with pytest.raises(RuntimeError, match="conservation violated"):
        policy_result(sim.ctx, undecided, servable)
