"""``DriftWindow.from_freeze_budget`` inverts ``freeze_budget``: what ``gpuscale diff`` reads back from an emitted
NodePool is the window the spec wrote."""

from __future__ import annotations

import pytest

from gpuscale.spec.topology import DriftWindow


@pytest.mark.parametrize("window", [
    DriftWindow(),
    DriftWindow(start_utc="06:00", duration="6h", day="sun"),
    DriftWindow(start_utc="23:30", duration="1h30m", day="sat"),  # the freeze starts on the next day
    DriftWindow(start_utc="23:00", duration="2h"),
    DriftWindow(start_utc="00:00", duration="167h", day="mon"),
])
def test_the_window_comes_back_from_its_freeze_budget(window: DriftWindow) -> None:
    budget = window.freeze_budget()
    assert budget.schedule is not None and budget.duration is not None
    assert DriftWindow.from_freeze_budget(budget.schedule, budget.duration) == window


@pytest.mark.parametrize(("schedule", "duration", "described"), [
    ("0 6 * * *", "72000s", "daily 02:00 UTC for 4h"),  # seconds, as Karpenter accepts them
    ("0 12 * * 0", "162h", "sun 06:00 UTC for 6h"),  # a numeric weekday
])
def test_budgets_written_otherwise_read_as_the_same_window(schedule: str, duration: str, described: str) -> None:
    window = DriftWindow.from_freeze_budget(schedule, duration)
    assert window is not None and window.describe() == described


@pytest.mark.parametrize(("schedule", "duration"), [
    ("0 6 * * *", "24h"),  # no window left
    ("0 6 * * *", "23h45m"),  # a window shorter than the spec allows
    ("*/5 * * * *", "1h"),  # not a daily or weekly freeze
    ("0 6 * * *", "Never"),
    ("0 6 * * *", "20h30s"),  # not whole minutes
])
def test_other_budgets_are_not_windows(schedule: str, duration: str) -> None:
    assert DriftWindow.from_freeze_budget(schedule, duration) is None
