"""A synthetic vLLM ``/metrics`` endpoint the scenarios drive, served on 127.0.0.1.

It exposes the metrics gpuscale's autoscaler queries read, by the names gpuscale itself uses (``gpuscale.sizing``), with
vLLM's own label set (``model_name``, ``engine``: ``PrometheusStatLogger`` in ``vllm/v1/metrics/loggers.py`` of the
pinned vLLM). Each simulated pod is one path, ``/pods/<name>/metrics``; Prometheus adds the target labels the emitted
PodMonitor would (``namespace``, ``pod`` and its ``podTargetLabels``), see ``e2e.prometheus``.

Gauges are set; counters and histograms advance at a set rate per second between scrapes, so a scenario says "30
prompt tokens/s, 2 requests finishing/s" and ``rate()`` sees exactly that. A rate of zero is the idle case: no finished
request, so every histogram-mean query is 0/0.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from gpuscale import versions
from gpuscale.manifests import front_door

VLLM_LABELS = ("model_name", "engine")
"""vLLM's label names on every engine metric (``vllm/v1/metrics/loggers.py``: ``labelnames = ["model_name", "engine"]``)."""

GAUGES = tuple(sorted(versions.VLLM_METRICS))
COUNTERS = tuple(sorted(versions.VLLM_RATE_METRICS))
HISTOGRAMS = tuple(sorted(versions.VLLM_HISTOGRAMS))


@dataclass
class PodSeries:
    """The state of one simulated vLLM pod."""

    model_name: str
    gauges: dict[str, float] = field(default_factory=lambda: dict.fromkeys(GAUGES, 0.0))
    counter_rates: dict[str, float] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0.0))
    counters: dict[str, float] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0.0))
    observe_rate: dict[str, float] = field(default_factory=lambda: dict.fromkeys(HISTOGRAMS, 0.0))
    """Observations per second of each histogram (finished requests, for the per-request ones)."""
    observe_value: dict[str, float] = field(default_factory=lambda: dict.fromkeys(HISTOGRAMS, 0.0))
    """The value each observation has (the histogram's mean)."""
    hist_sum: dict[str, float] = field(default_factory=lambda: dict.fromkeys(HISTOGRAMS, 0.0))
    hist_count: dict[str, float] = field(default_factory=lambda: dict.fromkeys(HISTOGRAMS, 0.0))
    last: float = field(default_factory=time.monotonic)

    def advance(self, now: float) -> None:
        dt = max(0.0, now - self.last)
        self.last = now
        for name, rate in self.counter_rates.items():
            self.counters[name] += rate * dt
        for name, rate in self.observe_rate.items():
            self.hist_count[name] += rate * dt
            self.hist_sum[name] += rate * dt * self.observe_value[name]

    def render(self, engine: str = "0") -> str:
        labels = f'{VLLM_LABELS[0]}="{self.model_name}",{VLLM_LABELS[1]}="{engine}"'
        lines: list[str] = []
        for name in GAUGES:
            lines += [f"# TYPE {name} gauge", f"{name}{{{labels}}} {self.gauges[name]!r}"]
        for name in COUNTERS:
            base = name.removesuffix("_total")
            lines += [f"# TYPE {base} counter", f"{name}{{{labels}}} {self.counters[name]!r}"]
        for name in HISTOGRAMS:
            count = self.hist_count[name]
            lines += [f"# TYPE {name} histogram", f'{name}_bucket{{{labels},le="+Inf"}} {count!r}',
                      f"{name}_sum{{{labels}}} {self.hist_sum[name]!r}", f"{name}_count{{{labels}}} {count!r}"]
        return "\n".join(lines) + "\n"


@dataclass
class DoorSeries:
    """The front door's queue: the llm-d router's flow-control gauge (``front_door.QUEUE_METRIC``), scraped through the
    chart's ServiceMonitor."""

    waiting: float = 0.0

    def render(self) -> str:
        name = front_door.QUEUE_METRIC
        return f"# TYPE {name} gauge\n{name} {self.waiting!r}\n"


class Exporter:
    """The HTTP server and the state of every simulated pod and door; thread-safe."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pods: dict[str, PodSeries] = {}
        self.doors: dict[str, DoorSeries] = {}
        self.scrapes = 0
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = exporter.render(self.path)
                if body is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.server.server_address[1])
        self.thread = threading.Thread(target=self.server.serve_forever, name="vllm-exporter", daemon=True)
        self.thread.start()

    def render(self, path: str) -> str | None:
        parts = path.strip("/").split("/")
        with self.lock:
            self.scrapes += 1
            if len(parts) == 3 and parts[0] == "pods" and parts[2] == "metrics" and parts[1] in self.pods:
                pod = self.pods[parts[1]]
                pod.advance(time.monotonic())
                return pod.render()
            if len(parts) == 3 and parts[0] == "doors" and parts[2] == "metrics" and parts[1] in self.doors:
                return self.doors[parts[1]].render()
        return None

    def pod(self, name: str, model_name: str) -> PodSeries:
        with self.lock:
            return self.pods.setdefault(name, PodSeries(model_name=model_name))

    def door(self, name: str) -> DoorSeries:
        with self.lock:
            return self.doors.setdefault(name, DoorSeries())

    def update(self, name: str, *, gauges: dict[str, float] | None = None,
               counter_rates: dict[str, float] | None = None,
               observe: dict[str, tuple[float, float]] | None = None) -> None:
        """Set a pod's gauges, counter rates and histogram ``(observations/s, value)``; unknown names are refused."""
        with self.lock:
            pod = self.pods[name]
            pod.advance(time.monotonic())
            for key, value in (gauges or {}).items():
                if key not in pod.gauges:
                    raise KeyError(f"{key}: not a gauge the exporter serves ({', '.join(GAUGES)})")
                pod.gauges[key] = value
            for key, value in (counter_rates or {}).items():
                if key not in pod.counter_rates:
                    raise KeyError(f"{key}: not a counter the exporter serves ({', '.join(COUNTERS)})")
                pod.counter_rates[key] = value
            for key, (rate, value) in (observe or {}).items():
                if key not in pod.observe_rate:
                    raise KeyError(f"{key}: not a histogram the exporter serves ({', '.join(HISTOGRAMS)})")
                pod.observe_rate[key] = rate
                pod.observe_value[key] = value

    def idle(self, name: str) -> None:
        """No traffic: empty queue, nothing running, no token flows, no request finishing."""
        self.update(name, gauges=dict.fromkeys(GAUGES, 0.0), counter_rates=dict.fromkeys(COUNTERS, 0.0),
                    observe={h: (0.0, 0.0) for h in HISTOGRAMS})

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
