"""Scenarios side by side on one cluster, each in a lane of its own, each in a thread.

The KEDA scenarios mostly wait on the controllers' timers (scrapes, rate windows, polls, cooldowns, stabilisation
windows, one pod per minute down): one after another they took 16 of a whole run's 38 minutes. Side by side they take
as long as the longest. A lane is what keeps them apart: its own namespace and NodePool (``Role.isolate``), its own
simulated pod in the shared exporter, and its own Prometheus, so one lane's outage (its Prometheus stopped) and its
series are nobody else's. What each scenario proves is unchanged: the same emitted objects, windows and waits; the
KEDA operator, the HPA controller and Karpenter serve every lane as they would serve several models.

A lane's verdict is its body's outcome; the test that names the scenario waits for it (``Lanes.join``) and raises its
error, so the report, the test ids and the failures read as when the scenarios ran one at a time.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e.exporter import Exporter
from e2e.kube import Kubectl
from e2e.processes import Supervisor
from e2e.prometheus import Prometheus

JOIN_TIMEOUT_S = 3600.0
"""A bound on waiting for a lane: each scenario's own waits are bounded far below it."""


@dataclass
class Lane:
    """What a scenario's body sees in place of the harness and the scenario: the cluster's kubectl, the shared
    exporter, the lane's own Prometheus, and the observations it records."""

    name: str
    """The scenario's name in the report."""
    key: str
    """A short id for the lane's namespace, NodePool and Prometheus (``k3``)."""
    kubectl: Kubectl
    exporter: Exporter
    prometheus: Prometheus
    observed: dict[str, Any] = field(default_factory=dict)
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)


Body = Callable[[], None]
"""A scenario, bound to its lane and role."""


@dataclass
class Lanes:
    """Start lanes (each body in a thread) and hand each scenario its lane's outcome."""

    supervisor: Supervisor
    work: Path
    kubectl: Kubectl
    exporter: Exporter
    dump: Callable[[str], Path]
    """Saves the cluster at a lane's end as the scenario's dump (``Harness.dump``)."""
    lanes: dict[str, Lane] = field(default_factory=dict)
    threads: list[threading.Thread] = field(default_factory=list)

    def lane(self, name: str) -> Lane:
        """A new lane with its own Prometheus (started), for the scenario ``name``."""
        key = f"k{len(self.lanes)}"
        prometheus = Prometheus(self.supervisor, self.work / f"prometheus-{key}", self.exporter.port,
                                name=f"prometheus-{key}")
        prometheus.start()
        lane = Lane(name, key, self.kubectl, self.exporter, prometheus)
        self.lanes[name] = lane
        return lane

    def run(self, lane: Lane, body: Body, cleanup: Callable[[], None]) -> None:
        """Run ``body`` on ``lane`` in a thread; then dump the cluster and ``cleanup`` (errors there are recorded,
        not raised: the verdict is the body's)."""

        def main() -> None:
            started = time.monotonic()
            try:
                body()
            except BaseException as exc:  # the scenario's verdict, raised again by join in the test
                lane.error = exc
            finally:
                lane.observed["wall_s"] = round(time.monotonic() - started, 1)
                try:
                    lane.observed["dump"] = str(self.dump(lane.name))
                except Exception as exc:  # recorded: the verdict stands without the dump
                    lane.observed["dump_error"] = "".join(traceback.format_exception_only(exc)).strip()
                try:
                    cleanup()
                except Exception as exc:  # recorded: a later lane in its own namespace is not affected
                    lane.observed["cleanup_error"] = "".join(traceback.format_exception_only(exc)).strip()
                lane.done.set()

        thread = threading.Thread(target=main, name=f"lane-{lane.key}", daemon=True)
        self.threads.append(thread)
        thread.start()

    def join(self, name: str, observed: dict[str, Any], timeout_s: float = JOIN_TIMEOUT_S) -> None:
        """Wait for the scenario's lane, copy what it observed into ``observed``, and raise its error if it failed."""
        lane = self.lanes.get(name)
        if lane is None:
            raise LookupError(f"no lane for {name}; lanes: {sorted(self.lanes)}")
        if not lane.done.wait(timeout_s):
            raise TimeoutError(f"{name}: its lane did not end within {timeout_s:.0f} s")
        observed.update(lane.observed)
        if lane.error is not None:
            raise lane.error
