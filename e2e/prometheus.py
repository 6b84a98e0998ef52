"""A real Prometheus (Debian's ``prometheus`` package) scraping the synthetic vLLM exporter, on 127.0.0.1.

There is no prometheus-operator here, so the scrape configuration is built from the emitted PodMonitors: each
simulated pod of a role is one target whose labels are what the operator's relabelling gives a pod's series
(``namespace``, ``pod``, and every ``podTargetLabels`` key of the PodMonitor, sanitised as the operator does:
``autoscaling.prom_label``), scraped at the PodMonitor's own interval. The front door's target carries ``namespace``
and ``service`` (its ServiceMonitor's Service), as the door's KEDA query selects.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from e2e.processes import Child, Supervisor, free_port, http_ok
from gpuscale.manifests.autoscaling import prom_label

BINARY = "prometheus"
"""Debian's package installs ``/usr/bin/prometheus`` (``apt-get install prometheus``)."""


def prometheus_binary() -> str | None:
    return shutil.which(BINARY)


def prometheus_version() -> str:
    """``prometheus, version 2.42.0+ds (...)`` -> ``2.42.0+ds``; ``"absent"`` without the package."""
    import subprocess

    binary = prometheus_binary()
    if binary is None:
        return "absent"
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False, timeout=30)
    first = (out.stdout or out.stderr).splitlines()[:1]
    parts = first[0].split() if first else []
    return parts[2] if len(parts) > 2 and parts[1] == "version" else "unknown"


@dataclass(frozen=True)
class Target:
    path: str
    labels: Mapping[str, str]
    interval_s: int


def pod_target(path: str, pod_monitor: Mapping[str, Any], pod_name: str, pod_labels: Mapping[str, str]) -> Target:
    """The target prometheus-operator would make of one pod the PodMonitor selects."""
    spec = pod_monitor["spec"]
    labels = {"namespace": str(pod_monitor["metadata"]["namespace"]), "pod": pod_name}
    for key in spec.get("podTargetLabels", []):
        if key in pod_labels:
            labels[prom_label(key)] = pod_labels[key]
    interval = str(spec["podMetricsEndpoints"][0].get("interval", "30s"))
    return Target(path, labels, int(interval.removesuffix("s")))


@dataclass
class Prometheus:
    supervisor: Supervisor
    directory: Path
    exporter_port: int
    port: int = field(default_factory=free_port)
    targets: list[Target] = field(default_factory=list)
    child: Child | None = None
    name: str = "prometheus"
    """Its process's (and log's) name: one Prometheus per KEDA lane (``e2e.lanes``)."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def config(self) -> dict[str, Any]:
        jobs = []
        for i, t in enumerate(self.targets):
            jobs.append({
                "job_name": f"target-{i}",
                "scrape_interval": f"{t.interval_s}s",
                "scrape_timeout": f"{max(1, t.interval_s - 1)}s" if t.interval_s > 1 else "1s",
                "metrics_path": t.path,
                "static_configs": [{"targets": [f"127.0.0.1:{self.exporter_port}"], "labels": dict(t.labels)}],
            })
        return {"global": {"scrape_interval": "5s", "evaluation_interval": "5s"}, "scrape_configs": jobs}

    def start(self) -> None:
        binary = prometheus_binary()
        if binary is None:
            raise FileNotFoundError("prometheus not found: apt-get install prometheus (make e2e does)")
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "prometheus.yml").write_text(yaml.safe_dump(self.config(), sort_keys=False),
                                                      encoding="utf-8")
        self.child = self.supervisor.start(self.name, [
            binary, f"--config.file={self.directory / 'prometheus.yml'}",
            f"--storage.tsdb.path={self.directory / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}",
            "--web.enable-lifecycle", "--storage.tsdb.retention.time=2h",
        ])
        self.supervisor.wait_ready(self.child, lambda: http_ok(f"{self.url}/-/ready"), timeout_s=60)

    def reload(self) -> None:
        """Write the configuration for the current targets and have Prometheus load it."""
        import urllib.request

        (self.directory / "prometheus.yml").write_text(yaml.safe_dump(self.config(), sort_keys=False),
                                                      encoding="utf-8")
        req = urllib.request.Request(f"{self.url}/-/reload", method="POST")
        with urllib.request.urlopen(req, timeout=10) as resp:
            if resp.status != 200:
                raise RuntimeError(f"prometheus reload answered {resp.status}")

    def stop(self) -> None:
        """Take Prometheus away (the outage scenarios); ``start`` brings it back on the same port and data."""
        if self.child is None:
            return
        self.supervisor.children.remove(self.child)
        import os
        import signal

        os.killpg(self.child.popen.pid, signal.SIGKILL)
        self.child.popen.wait(timeout=10)
        self.child = None

    def query(self, promql: str) -> list[dict[str, Any]]:
        import json
        import urllib.request

        url = f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
        with urllib.request.urlopen(url, timeout=10) as resp:
            body = json.load(resp)
        result: list[dict[str, Any]] = body["data"]["result"]
        return result
