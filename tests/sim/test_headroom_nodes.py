"""The node layer with a headroom buffer: spare nodes exist from the start, a pod binds to one at once, the next
provisioning pass relaunches what was taken (within the resync and a launch), and a node hosting a virtual pod is
never removed as empty while other empty nodes are."""

from __future__ import annotations

import pytest

from gpuscale import headroom
from gpuscale.sim.accounting import EventLog
from gpuscale.sim.events import Environment
from gpuscale.sim.inputs import HeadroomSim
from gpuscale.sim.nodes import ConsolidationSpec
from gpuscale.sim.provisioner import NodeLayer
from gpuscale.sim.states import NodeState
from tests.sim.actors import FakePendingPods, FakeWorkloads, context

RESYNC_S = 30.0


def layer(pods: int, *, prepull: bool = False, consolidate_after_s: float = 3600.0,
          needs: list[int] | None = None) -> tuple[NodeLayer, FakePendingPods, Environment]:
    ctx = context(gpus_per_node=8, pods_per_replica=1, gpus_per_pod=4, pool_gpu_limit=64)
    variant = ctx.variant.model_copy(update={
        "headroom": HeadroomSim(pods=pods, resync_s=RESYNC_S, prepull=prepull),
        "consolidation": ConsolidationSpec(policy="WhenEmpty", consolidate_after_s=consolidate_after_s),
    })
    ctx = type(ctx)(setup=ctx.setup, variant=variant, arrivals=ctx.arrivals, seed=0)
    env = Environment()
    prov = NodeLayer(ctx, env, EventLog(env))
    fake = FakePendingPods(needs or [])
    prov.connect(fake, FakeWorkloads())
    return prov, fake, env


def take(prov: NodeLayer, gpus: int) -> None:
    """A serving pod binds to the fullest spare node (what the scheduler does on free GPUs)."""
    node = min((n for n in prov.nodes if n.state == NodeState.READY and n.free >= gpus), key=lambda n: n.free)
    node.free -= gpus
    node.pods += 1
    node.last_change = prov.env.now


def test_spare_nodes_are_ready_at_the_start_and_pull_nothing_without_placeholders() -> None:
    prov, _, _ = layer(pods=3)
    prov.start()
    assert len(prov.nodes) == 2  # three 4-GPU virtual pods: two 8-GPU nodes
    assert all(n.state == NodeState.READY and n.spare and n.pull_done_at is None for n in prov.nodes)
    assert prov.launched == 0 and prov.ready_latencies == []  # up before the run; no pod waited for them


def test_placeholders_have_the_image_on_their_nodes() -> None:
    prov, _, _ = layer(pods=2, prepull=True)
    prov.start()
    assert [n.pull_done_at for n in prov.nodes] == [0.0]


def test_taken_capacity_is_relaunched_at_the_buffers_next_reconcile_plus_one_batch_idle_window() -> None:
    prov, _, env = layer(pods=2)
    prov.start()
    env.run(RESYNC_S + 60.0)
    assert prov.launched == 0  # the virtual pods still fit: no pass launches anything
    take(prov, 4)
    take(prov, 4)  # a scale-up took the whole spare node; it fit, so no pod went Unschedulable
    prov.demand_met()  # what the scheduler reports after binding it: nothing pending, so no pod trigger
    t_taken = env.now
    boot = prov.ctx.variant.provisioner
    env.run(t_taken + RESYNC_S + boot.worst_case_s)
    assert prov.launched == 1
    fresh = [n for n in prov.nodes if n.requested_at >= t_taken]
    assert len(fresh) == 1 and fresh[0].spare and fresh[0].state == NodeState.READY
    # the buffer reconciles every 30 s at its own phase (capacitybuffer/controller.go L120-124), and its lone trigger
    # closes Karpenter's batch after BATCH_IDLE_DURATION (batcher.go L89-107): the launch is at phase + k*30 + 1 s
    wait = fresh[0].requested_at - t_taken
    assert headroom.KARPENTER_BATCH_IDLE_S <= wait <= RESYNC_S + headroom.KARPENTER_BATCH_IDLE_S
    assert (fresh[0].requested_at - headroom.KARPENTER_BATCH_IDLE_S) % RESYNC_S == pytest.approx(prov_phase(prov) % RESYNC_S)
    assert prov.ready_latencies == []  # relaunched for the buffer, not for a pending pod


def prov_phase(prov: NodeLayer) -> float:
    """The buffer's first reconcile, drawn as ``NodeLayer.start`` draws it."""
    import random
    return random.Random(f"{prov.ctx.seed}/buffer").uniform(0.0, RESYNC_S)


def test_a_taken_placeholder_is_refilled_by_its_pending_replacement_at_once_not_at_the_resync() -> None:
    prov, _, env = layer(pods=2, prepull=True)
    prov.start()
    env.run(100.0)
    take(prov, 4)
    take(prov, 4)  # a serving pod evicted both placeholders; the Deployment recreates them, KAI marks them Unschedulable
    prov.demand_met()
    env.run(100.0 + headroom.KARPENTER_BATCH_IDLE_S + 1e-6)
    assert prov.launched == 1 and prov.nodes[-1].requested_at == pytest.approx(100.0 + headroom.KARPENTER_BATCH_IDLE_S)
    assert prov.nodes[-1].spare and prov.nodes[-1].prewarmed  # a placeholder's node: it pulls the image once Ready


def first_pass_at(pods_at: list[tuple[float, int]], until: float) -> float:
    """When Karpenter's first pass launches, with ``(t, pending pods)`` reported to ``demand`` (no buffer)."""
    ctx = context(gpus_per_node=8, pods_per_replica=1, gpus_per_pod=4, pool_gpu_limit=64)
    env = Environment()
    prov = NodeLayer(ctx, env, EventLog(env))
    fake = FakePendingPods([])
    prov.connect(fake, FakeWorkloads())
    prov.start()
    events = list(pods_at)
    t = 0.0
    while t < until:
        while events and events[0][0] <= t + 1e-9:
            fake.needs = [4] * events.pop(0)[1]
            prov.demand()
            prov.demand()  # the same pods seen again do not extend the window (batcher.go L53-59)
        t = round(t + 0.05, 6)
        env.run(t)
        if prov.launched:
            return t
    raise AssertionError("no pass ran")


def test_karpenters_batch_closes_idle_after_the_last_new_pod_and_never_past_max_after_the_first() -> None:
    idle, most = headroom.KARPENTER_BATCH_IDLE_S, headroom.KARPENTER_BATCH_MAX_S
    # a lone pending pod (or one scale-up's pods, created at once): the pass runs idle after it (batcher.go L89-107)
    assert first_pass_at([(5.0, 3)], 30.0) == pytest.approx(5.0 + idle, abs=0.051)
    # a second pod within the idle window moves the close to idle after it
    assert first_pass_at([(5.0, 1), (5.5, 2)], 30.0) == pytest.approx(5.5 + idle, abs=0.051)
    # pods arriving every 0.5 s keep it open, but never past BATCH_MAX_DURATION after the first
    steady = [(5.0 + 0.5 * k, k + 1) for k in range(60)]
    assert first_pass_at(steady, 40.0) == pytest.approx(5.0 + most, abs=0.051)


def test_a_pending_pod_pass_launches_for_the_virtual_pods_too() -> None:
    prov, _, env = layer(pods=2, needs=[4, 4])
    prov.start()
    take(prov, 4)
    take(prov, 4)
    prov.demand()  # two real pods pending and the spare node already taken: the pass wants both plus the buffer
    env.run(1.0 + prov.ctx.variant.provisioner.worst_case_s)
    assert prov.launched == 2


def test_a_node_hosting_a_virtual_pod_is_not_consolidated_but_an_extra_empty_one_is() -> None:
    prov, _, env = layer(pods=2, consolidate_after_s=60.0)
    prov.start()
    extra = prov.new_node(0.0)  # an empty node the buffer does not need (a scale-down left it)
    extra.state, extra.ready_at = NodeState.READY, 0.0
    env.run(600.0)
    assert extra not in prov.nodes
    assert len(prov.nodes) == 1 and prov.nodes[0].spare and prov.terminated == 1
