"""The consolidation guardrail's advice names the floor the pool actually misses, never one it already keeps."""

from __future__ import annotations

from gpuscale.guardrails import consolidation as c


def _messages(policy: str, after: str, after_s: float, cold_start_s: float | None) -> dict[str, str]:
    found = c.breaches(c.SPEC, pool="p", policy=policy, after=after, after_s=after_s, cold_start_s=cold_start_s,
                       cold_start_of="m")
    return dict(found)


def test_the_floor_rounds_up_to_whole_minutes() -> None:
    assert c.floor_text(None) == c.floor_text(c.MIN_CONSOLIDATE_AFTER_S) == c.MIN_CONSOLIDATE_AFTER == "1h"
    assert c.floor_text(3600.5) == "61m"  # 60m would be refused again
    assert c.floor_text(3660.0) == "61m" and c.floor_text(3661.0) == "62m"


def test_a_pool_already_at_the_floor_is_told_to_change_only_the_policy() -> None:
    msgs = _messages("WhenEmptyOrUnderutilized", "1h", 3600.0, None)
    assert set(msgs) == {"policy"}
    assert "Use WhenEmpty, or set acknowledge" in msgs["policy"] and "consolidate_after: 1h" not in msgs["policy"]
    above = _messages("WhenEmptyOrUnderutilized", "2h", 7200.0, 4000.0)
    assert "Use WhenEmpty, or" in above["policy"]  # never "use 67m" to a pool that keeps 2h


def test_a_pool_below_the_floor_is_told_the_floor_it_misses() -> None:
    msgs = _messages("WhenEmptyOrUnderutilized", "30m", 1800.0, 3600.5)
    assert "Use WhenEmpty with consolidate_after: 61m" in msgs["policy"]
    assert msgs["after"].startswith("GPU pool p: consolidate_after 30m is shorter than the cold start of m (3601 s)")
    assert "Use consolidate_after: 61m or longer" in msgs["after"]
    # exactly the hour with a cold start just past it: the advice is the next whole minute, not the hour again
    just = _messages("WhenEmpty", "1h", 3600.0, 3600.5)
    assert set(just) == {"after"} and "Use consolidate_after: 61m or longer" in just["after"]
    short = _messages("WhenEmpty", "59m", 3540.0, None)
    assert "consolidate_after 59m is shorter than 1h" in short["after"] and "consolidate_after: 1h or longer" in short["after"]
