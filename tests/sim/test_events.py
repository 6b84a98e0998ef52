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


def test_a_stream_runs_where_its_arrival_events_would() -> None:
    """``stream`` calls land exactly where ``(t, PRIORITY_ARRIVAL)`` events would: after the state changes of their
    instant, before its control events, in index order among themselves, across ``run`` chunks, and events they
    schedule interleave with the rest."""
    env = Environment()
    log: list[tuple[float, str]] = []
    env.at(1.0, lambda: log.append((env.now, "control")), priority=PRIORITY_CONTROL)
    env.at(1.0, lambda: log.append((env.now, "state")), priority=PRIORITY_STATE)
    env.at(2.5, lambda: log.append((env.now, "between")))
    times = [0.5, 1.0, 1.0, 3.0, 12.0]

    def arrive(i: int) -> None:
        log.append((env.now, f"a{i}"))
        if i == 0:
            env.at(1.0, lambda: log.append((env.now, "scheduled by a0")))

    env.stream(times, arrive)
    assert env.peek() == 0.5
    env.run(10.0)
    assert log == [(0.5, "a0"), (1.0, "state"), (1.0, "scheduled by a0"), (1.0, "a1"), (1.0, "a2"), (1.0, "control"),
                   (2.5, "between"), (3.0, "a3")]
    assert env.now == 10.0 and env.peek() == 12.0 and env.events_run == 8
    env.run(20.0)
    assert log[-1] == (12.0, "a4") and env.peek() == float("inf")
