"""One variant's run, the composition root alone: warm start, the clock, the drain, the result."""

from __future__ import annotations

from gpuscale.sim import traffic
from gpuscale.sim.runner import servable_of
from gpuscale.sim.scenarios import build_scenario
from gpuscale.sim.simulation import Simulation
from gpuscale.sim.states import NodeState, ReplicaState
from gpuscale.spec.platform import PlatformSpec


def simulation(spec: PlatformSpec, variant: int = 2, duration_s: float = 300.0) -> Simulation:
    sc = build_scenario("stack", spec, duration_s=duration_s)
    arrivals = traffic.generate(sc.traffic, 0, sc.setup.duration_s)
    return Simulation(sc.setup, sc.variants[variant], arrivals, 0, servable_of(sc.setup, arrivals))


def test_initial_replicas_serve_from_warm_nodes_at_time_zero(tiny_pd: PlatformSpec) -> None:
    sim = simulation(tiny_pd)
    sim._initial_state()
    for role in sim.replicas.roles:
        assert role.desired == len(role.ready) == role.setup.initial_replicas > 0
        assert all(r.state == ReplicaState.SERVING and r.engine is not None for r in role.ready)
    assert all(n.state == NodeState.READY and n.pull_done_at == 0.0 for n in sim.provisioner.nodes)
    assert sim.scheduler.pending == []
    assert sim.gpus.gpus_now() == sum(n.gpus for n in sim.provisioner.nodes)


def test_a_run_drains_every_request_and_repeats_exactly(tiny: PlatformSpec) -> None:
    first = simulation(tiny).run()
    again = simulation(tiny).run()
    assert first == again
    assert first.arrived == first.completed + first.dropped + first.lost_in_flight
    assert first.end_s >= 300.0 and first.gpu_hours > 0
    progress: list[float] = []
    simulation(tiny).run(progress.append)
    assert progress[-1] == 1.0 and len(progress) == 50
