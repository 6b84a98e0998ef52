"""The discrete-event core: an instance-owned clock and event heap (SimPy's shape, without its processes).

Events are plain callbacks keyed ``(time, priority, seq)``; ``seq`` comes from an ``itertools.count()`` owned by
the instance, so two environments never share state and equal-time events run in a fixed order (determinism).
Cancellation is the caller's business: components keep a generation number and ignore stale callbacks, which
is cheaper than deleting from a heap.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from heapq import heappop, heappush
from typing import Any

PRIORITY_STATE = 0
"""Engine steps, node and replica transitions: the world changes first."""
PRIORITY_ARRIVAL = 1
"""Request arrivals see the state as of their instant."""
PRIORITY_CONTROL = 2
"""Metric scrapes and controller syncs observe everything that happened at the same instant."""


class Environment:
    """Simulation clock plus a heap of pending callbacks."""

    __slots__ = ("_heap", "_seq", "events_run", "now")

    def __init__(self, start_s: float = 0.0) -> None:
        self.now: float = start_s
        self.events_run: int = 0
        self._heap: list[tuple[float, int, int, Callable[..., Any], tuple[Any, ...]]] = []
        self._seq = itertools.count()

    def at(self, t: float, fn: Callable[..., Any], *args: Any, priority: int = PRIORITY_STATE) -> None:
        """Run ``fn(*args)`` at absolute time ``t`` (never earlier than now)."""
        now = self.now
        heappush(self._heap, (t if t > now else now, priority, next(self._seq), fn, args))

    def after(self, delay_s: float, fn: Callable[..., Any], *args: Any, priority: int = PRIORITY_STATE) -> None:
        """Run ``fn(*args)`` ``delay_s`` seconds from now."""
        self.at(self.now + delay_s, fn, *args, priority=priority)

    def peek(self) -> float:
        """Time of the next event, or infinity when none is pending."""
        return self._heap[0][0] if self._heap else float("inf")

    def run(self, until_s: float) -> None:
        """Run every event with time <= ``until_s``, then leave the clock at ``until_s``."""
        heap = self._heap
        pop = heappop
        n = 0
        while heap and heap[0][0] <= until_s:
            t, _, _, fn, args = pop(heap)
            self.now = t
            fn(*args)
            n += 1
        self.events_run += n
        self.now = max(self.now, until_s)
