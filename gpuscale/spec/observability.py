"""Where autoscalers read metrics from."""

from __future__ import annotations

from pydantic import Field

from gpuscale.spec.base import HttpUrl, Spec


class ObservabilitySpec(Spec):
    """The Prometheus that scrapes vLLM and that KEDA (or prometheus-adapter) queries."""

    install_prometheus_stack: bool = True
    """Install the pinned kube-prometheus-stack chart (Prometheus + prometheus-operator CRDs) in ``monitoring``."""
    prometheus_url: HttpUrl = "http://kube-prometheus-stack-prometheus.monitoring.svc:9090"
    """Prometheus HTTP endpoint KEDA triggers and prometheus-adapter query."""
    scrape_interval_s: int = Field(default=15, gt=0, le=3600)
    """How often vLLM ``/metrics`` is scraped; autoscalers see load at most this late."""
