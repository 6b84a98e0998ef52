"""The layer-2 scheduler alone: gangs bind all or nothing, the default scheduler pod by pod, unbound pods are demand."""

from __future__ import annotations

import dataclasses

from gpuscale.sim.events import Environment
from gpuscale.sim.inputs import HeadroomSim
from gpuscale.sim.pods import Replica, RoleGroup
from gpuscale.sim.scheduler import Scheduler
from tests.sim.actors import FakeLoader, FakePool, context, ready_node


def scheduler(gang: bool, free: list[int]) -> tuple[Scheduler, FakePool, FakeLoader, Environment]:
    ctx = context(gang=gang, gpus_per_node=8, pods_per_replica=2, gpus_per_pod=4)
    env = Environment(5.0)
    pool = FakePool([ready_node(i + 1, 8, f) for i, f in enumerate(free)])
    loader = FakeLoader()
    s = Scheduler(ctx, env)
    s.connect(pool, loader)
    return s, pool, loader, env


def replica(s: Scheduler, rid: int = 1) -> Replica:
    rep = Replica(rid, RoleGroup(s.ctx.setup.roles[0]), 2, 4, 0.0)
    s.add(rep)
    return rep


def test_a_gang_that_fits_binds_every_pod_and_starts_loading() -> None:
    s, pool, loader, env = scheduler(True, [4, 4])
    rep = replica(s)
    s.schedule()
    assert [p.node.nid for p in rep.pods if p.node] == [1, 2]  # two 4-GPU pods, one per node
    assert loader.loading == [rep] and s.pending == [] and pool.met == 1
    assert all(n.free == 0 for n in pool.nodes)
    # binding started the image pull on each node, drawn from the run's common random numbers
    st = s.ctx.startup
    for p in rep.pods:
        assert p.node is not None and p.node.pull_done_at == p.pull_done_at
        assert env.now + st.image_pull_s * 0.85 <= p.pull_done_at <= env.now + st.image_pull_s * 1.15


def test_a_gang_that_does_not_fit_binds_nothing_and_is_demand() -> None:
    s, pool, loader, _ = scheduler(True, [4, 2])
    rep = replica(s)
    s.schedule()
    assert all(p.node is None for p in rep.pods) and [n.free for n in pool.nodes] == [4, 2]
    assert s.unbound_needs() == [4, 4] and pool.demands == 1 and loader.loading == []


def test_the_default_scheduler_binds_what_fits_and_holds_those_gpus_idle() -> None:
    s, pool, loader, _ = scheduler(False, [4, 2])
    rep = replica(s)
    s.schedule()
    assert rep.bound_gpus() == 4 and s.unbound_needs() == [4]  # the 7-of-8 trap in small
    assert pool.demands == 1 and loader.loading == []
    pool.nodes.append(ready_node(3, 8))
    s.schedule()
    assert rep.bound_gpus() == 8 and loader.loading == [rep] and pool.met == 1


def test_discard_removes_a_replica_from_the_queue() -> None:
    s, pool, _, _ = scheduler(True, [])
    rep = replica(s)
    s.add(rep)  # twice: queued once
    assert s.pending == [rep]
    s.discard(rep)
    s.schedule()
    assert s.pending == [] and pool.met == 1


def test_a_replica_takes_the_gpus_placeholders_hold_only_after_its_preemption_delay() -> None:
    ctx = context(gang=True, gpus_per_node=8, pods_per_replica=2, gpus_per_pod=4)
    held = HeadroomSim(pods=2, resync_s=30.0, prepull=True, preemption_delay_s=90.0)
    ctx = dataclasses.replace(ctx, variant=ctx.variant.model_copy(update={"headroom": held}))
    env = Environment(5.0)
    pool = FakePool([ready_node(1, 8, 4), ready_node(2, 8, 4)], held={1: 4, 2: 4})  # both free halves are placeholders'
    loader = FakeLoader()
    s = Scheduler(ctx, env)
    s.connect(pool, loader)
    rep = replica(s)  # pending since t = 5
    s.schedule()
    assert all(p.node is None for p in rep.pods) and pool.demands == 1  # Karpenter is asked for a node meanwhile
    env.run(5.0 + 89.0)
    assert all(p.node is None for p in rep.pods)
    env.run(5.0 + 91.0)  # the delay ends: KAI preempts the placeholders and the gang binds
    assert [p.node.nid for p in rep.pods if p.node] == [1, 2] and loader.loading == [rep]


def test_free_gpus_are_taken_at_once_whatever_the_delay() -> None:
    ctx = context(gang=True, gpus_per_node=8, pods_per_replica=2, gpus_per_pod=4)
    held = HeadroomSim(pods=1, resync_s=30.0, prepull=True, preemption_delay_s=90.0)
    ctx = dataclasses.replace(ctx, variant=ctx.variant.model_copy(update={"headroom": held}))
    env = Environment(5.0)
    pool = FakePool([ready_node(1, 8, 8), ready_node(2, 8, 4)], held={2: 4})
    s = Scheduler(ctx, env)
    s.connect(pool, FakeLoader())
    rep = replica(s)
    s.schedule()
    assert [p.node.nid for p in rep.pods if p.node] == [1, 1]  # node 1's 8 free GPUs, not node 2's placeholder
