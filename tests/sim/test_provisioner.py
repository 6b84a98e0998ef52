"""The node layer alone: pending pods launch the nodes they need within the pool's limit, disruption evicts and
removes, and every node change is told to the GPU-time watch."""

from __future__ import annotations

from gpuscale.sim.accounting import EventLog
from gpuscale.sim.events import Environment
from gpuscale.sim.pods import Replica, RoleGroup
from gpuscale.sim.provisioner import NodeLayer
from gpuscale.sim.states import LossReason, NodeState
from tests.sim.actors import CountingWatch, FakePendingPods, FakeWorkloads, context


def layer(needs: list[int], pool_gpu_limit: int = 32) -> tuple[NodeLayer, FakePendingPods, FakeWorkloads, Environment, CountingWatch]:
    ctx = context(gpus_per_node=8, pods_per_replica=2, gpus_per_pod=4, pool_gpu_limit=pool_gpu_limit)
    env = Environment()
    watch = CountingWatch()
    prov = NodeLayer(ctx, env, EventLog(env), watch)
    pods, workloads = FakePendingPods(needs), FakeWorkloads()
    prov.connect(pods, workloads)
    return prov, pods, workloads, env, watch


def test_pending_pods_launch_the_nodes_they_need_then_schedule_when_ready() -> None:
    prov, pods, _, env, watch = layer([4, 4, 4], pool_gpu_limit=32)
    env.now = 7.0
    prov.demand()
    prov.demand()  # one decision in flight at a time
    env.run(1e4)
    assert prov.launched == 2 and len(prov.nodes) == 2  # three 4-GPU pods: two 8-GPU nodes
    assert all(n.state == NodeState.READY and n.requested_at == 7.0 for n in prov.nodes)
    assert pods.schedules == 2  # each node's readiness runs the scheduler
    assert len(prov.ready_latencies) == 2 and min(prov.ready_latencies) > 0
    assert watch.changes >= 4  # created, then ready, for each node


def test_the_pool_gpu_limit_caps_the_launch() -> None:
    prov, _, _, env, _ = layer([4] * 8, pool_gpu_limit=16)
    prov.demand()
    env.run(1e4)
    assert prov.launched == 2 and sum(n.gpus for n in prov.nodes) == 16


def test_disruption_evicts_every_replica_on_the_node_then_removes_it_after_the_grace() -> None:
    prov, pods, workloads, env, _ = layer([])
    node = prov.warm_node()
    rep = Replica(1, RoleGroup(prov.ctx.setup.roles[0]), 2, 4, 0.0)
    for p in rep.pods:
        node.free -= p.gpus
        node.pods += 1
        p.node = node
        workloads.bound.append((rep, p))
    prov.disrupt(node, LossReason.INTERRUPTION, 120.0)
    assert workloads.evicted == [(1, LossReason.INTERRUPTION, 120.0)]  # one eviction per replica, not per pod
    assert node.cordoned and node in prov.nodes and pods.schedules == 1
    env.run(119.0)
    assert node in prov.nodes
    env.run(121.0)
    assert node not in prov.nodes and node.state == NodeState.GONE and prov.terminated == 1
