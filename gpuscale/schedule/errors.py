"""The one base of ``gpuscale schedule``'s refusals: what it names as their source and how it prints them."""

from __future__ import annotations

from gpuscale.problems import Refusal


class ScheduleRefusal(Refusal):
    """No verdict can be had (no Go, a failed build or replay, a synth it cannot replay): exit 2, one line per line of
    the message (a build failure carries the tail of Go's output)."""

    source = "gpuscale schedule"

    def lines(self) -> list[str]:
        return str(self).splitlines() or [str(self)]
