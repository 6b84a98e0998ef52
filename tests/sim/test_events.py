"""The event core: ordering, clock, and no state shared between environments."""

from __future__ import annotations

from gpuscale.sim.events import PRIORITY_ARRIVAL, PRIORITY_CONTROL, PRIORITY_STATE, Environment


def test_events_run_by_time_then_priority_then_insertion() -> None:
    env = Environment()
    log: list[tuple[float, str]] = []
    env.at(2.0, lambda: log.append((env.now, "late")))
    env.at(1.0, lambda: log.append((env.now, "control")), priority=PRIORITY_CONTROL)
    env.at(1.0, lambda: log.append((env.now, "arrival-a")), priority=PRIORITY_ARRIVAL)
    env.at(1.0, lambda: log.append((env.now, "arrival-b")), priority=PRIORITY_ARRIVAL)
    env.at(1.0, lambda: log.append((env.now, "state")), priority=PRIORITY_STATE)
    env.run(10.0)
    assert log == [(1.0, "state"), (1.0, "arrival-a"), (1.0, "arrival-b"), (1.0, "control"), (2.0, "late")]
    assert env.now == 10.0 and env.events_run == 5


def test_run_stops_at_until_and_keeps_later_events() -> None:
    env = Environment()
    seen: list[float] = []
    env.after(5.0, seen.append, 5.0)
    env.after(15.0, seen.append, 15.0)
    env.run(10.0)
    assert seen == [5.0] and env.now == 10.0 and env.peek() == 15.0
    env.run(20.0)
    assert seen == [5.0, 15.0] and env.peek() == float("inf")


def test_past_times_are_clamped_to_now() -> None:
    env = Environment()
    env.run(3.0)
    seen: list[float] = []
    env.at(1.0, lambda: seen.append(env.now))
    env.run(4.0)
    assert seen == [3.0]


def test_environments_share_no_sequence() -> None:
    a, b = Environment(), Environment()
    a.at(0.0, lambda: None)
    a.at(0.0, lambda: None)
    b.at(0.0, lambda: None)
    assert [e[2] for e in a._heap] == [0, 1]
    assert [e[2] for e in b._heap] == [0]
