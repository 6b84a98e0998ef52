"""The discrete-event core: an instance-owned clock and event heap (SimPy's shape, without its processes).

Events are plain callbacks keyed ``(time, priority, seq)``; ``seq`` comes from an ``itertools.count()`` owned by
the instance, so two environments never share state and equal-time events run in a fixed order (determinism).
Cancellation is the caller's business: components keep a generation number and ignore stale callbacks, which
is cheaper than deleting from a heap.

A run's arrivals are a known sorted list: ``stream`` hands it over whole, and ``run`` merges it with the heap, calling
``fn(i)`` at ``times[i]`` exactly where the event ``(times[i], PRIORITY_ARRIVAL)`` would have run (nothing else uses
that priority, and arrivals at one instant keep their order), without a heap push and pop per request.
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


_INF = float("inf")


class Environment:
    """Simulation clock plus a heap of pending callbacks."""

    __slots__ = ("_heap", "_next", "_seq", "_stream", "_stream_fn", "events_run", "now")

    def __init__(self, start_s: float = 0.0) -> None:
        self.now: float = start_s
        self.events_run: int = 0
        self._heap: list[tuple[float, int, int, Callable[..., Any], tuple[Any, ...]]] = []
        self._seq = itertools.count()
        self._stream: list[float] = []
        self._stream_fn: Callable[[int], Any] | None = None
        self._next = 0
        """Index of the stream's next time."""

    def stream(self, times: list[float], fn: Callable[[int], Any]) -> None:
        """Call ``fn(i)`` at ``times[i]`` (sorted, none before now) for every ``i``, each at ``PRIORITY_ARRIVAL``."""
        if self._stream_fn is not None:
            raise ValueError("an environment takes one stream")
        self._stream, self._stream_fn, self._next = times, fn, 0

    def at(self, t: float, fn: Callable[..., Any], *args: Any, priority: int = PRIORITY_STATE) -> None:
        """Run ``fn(*args)`` at absolute time ``t`` (never earlier than now)."""
        now = self.now
        heappush(self._heap, (t if t > now else now, priority, next(self._seq), fn, args))

    def after(self, delay_s: float, fn: Callable[..., Any], *args: Any, priority: int = PRIORITY_STATE) -> None:
        """Run ``fn(*args)`` ``delay_s`` seconds from now."""
        self.at(self.now + delay_s, fn, *args, priority=priority)

    def peek(self) -> float:
        """Time of the next event, or infinity when none is pending."""
        top = self._heap[0][0] if self._heap else float("inf")
        if self._next < len(self._stream):
            return min(top, self._stream[self._next])
        return top

    def run(self, until_s: float) -> None:
        """Run every event with time <= ``until_s``, then leave the clock at ``until_s``."""
        heap = self._heap
        pop = heappop
        n = 0
        times, fn_at, i = self._stream, self._stream_fn, self._next
        ends = len(times)
        nt = times[i] if i < ends else _INF
        while True:
            # the stream's next call goes first unless the heap's top is earlier, or as early with a lower priority
            # number (the world changes first)
            if heap:
                top = heap[0]
                tt = top[0]
                if tt < nt or (tt == nt and top[1] < PRIORITY_ARRIVAL):
                    if tt > until_s:
                        break
                    pop(heap)
                    self.now = tt
                    top[3](*top[4])
                    n += 1
                    continue
            if i >= ends or nt > until_s:
                break
            assert fn_at is not None
            self.now = nt
            i += 1
            self._next = i
            nt = times[i] if i < ends else _INF
            fn_at(i - 1)
            n += 1
        self.events_run += n
        self.now = max(self.now, until_s)
