"""The ReplicaSet alone: scale-up queues pending replicas, scale-down drains the serving victim, an eviction puts the
replica back in the queue and sends its waiting requests elsewhere."""

from __future__ import annotations

from gpuscale.sim.accounting import EventLog
from gpuscale.sim.events import Environment
from gpuscale.sim.replica_set import ReplicaSet
from gpuscale.sim.states import LossReason, ReplicaState
from gpuscale.sim.vllm_engine import ItlHistogram, Request
from tests.sim.actors import CountingWatch, FakePendingPods, FakeRequests, context, ready_node


def replica_set() -> tuple[ReplicaSet, FakePendingPods, FakeRequests, Environment, CountingWatch]:
    ctx = context()
    env = Environment()
    watch = CountingWatch()
    rs = ReplicaSet(ctx, env, EventLog(env), ItlHistogram(), watch)
    pending, requests = FakePendingPods(), FakeRequests()
    rs.connect(pending, requests)
    return rs, pending, requests, env, watch


def test_scale_up_queues_pending_replicas_and_scale_down_removes_pending_ones_first() -> None:
    rs, pending, _, _, watch = replica_set()
    role = rs.roles[0]
    rs.set_desired(role, 3)
    assert len(role.replicas) == 3 and pending.pending == role.replicas and pending.schedules == 1
    assert all(r.state == ReplicaState.PENDING for r in role.replicas) and watch.changes >= 3
    serving = role.replicas[0]
    pending.discard(serving)  # what the scheduler does when it binds the pods
    rs.make_ready(serving)
    rs.set_desired(role, 1)
    assert role.replicas == [serving] and pending.pending == [] and len(rs.all) == 1


def test_a_serving_victim_drains_then_goes() -> None:
    rs, pending, _, env, _ = replica_set()
    role = rs.roles[0]
    rs.set_desired(role, 2)
    a, b = role.replicas
    for rep in (a, b):
        pending.discard(rep)
        rs.make_ready(rep)
        env.now += 1.0
    assert b.engine is not None
    b.engine.submit(Request(0, 0.0, 500, 400, 1e9))
    rs.set_desired(role, 1)  # the newest serving replica is the victim
    assert b.state == ReplicaState.DRAINING and role.ready == [a] and b in rs.all
    env.run(1e3)  # its request finishes, the engine reports drained, the replica is deleted
    assert b.state == ReplicaState.GONE and b not in rs.all and b.engine is None and rs.all == [a]


def test_an_eviction_requeues_the_replica_and_reroutes_waiting_requests() -> None:
    rs, pending, requests, _, _ = replica_set()
    role = rs.roles[0]
    rs.set_desired(role, 1)
    rep = role.replicas[0]
    node = ready_node(1, 1)
    node.free, node.pods = 0, 1
    rep.pods[0].node = node
    pending.discard(rep)
    rs.make_ready(rep)
    old = rep.engine
    assert old is not None and rs.on_node(node) == [(rep, rep.pods[0])]
    old.waiting.append(Request(7, 0.0, 100, 10, 1e9))
    rs.evict(rep, LossReason.EVICTION, 0.0)
    assert ("aggregated", 7) in requests.routed  # never started: sent elsewhere
    assert rep.state == ReplicaState.PENDING and rep.evicted and pending.pending == [rep] and rs.evictions == 1
    assert rep.engine is None and rs.owner_of(old) is None and node.free == 1 and role.ready == []
