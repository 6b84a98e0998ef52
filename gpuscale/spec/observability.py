"""Where autoscalers read metrics from."""

from __future__ import annotations

from pydantic import Field, model_validator

from gpuscale.problems import at
from gpuscale.spec.base import HttpUrl, Spec


class ObservabilitySpec(Spec):
    """The Prometheus that scrapes vLLM and that KEDA (or prometheus-adapter) queries."""

    install_prometheus_stack: bool = True
    """Install the pinned kube-prometheus-stack chart (Prometheus + prometheus-operator CRDs) in ``monitoring``."""
    prometheus_url: HttpUrl = "http://kube-prometheus-stack-prometheus.monitoring.svc:9090"
    """Prometheus HTTP endpoint KEDA triggers and prometheus-adapter query; the default is the Prometheus of the
    kube-prometheus-stack gpuscale installs, so it must be given when gpuscale does not install it."""
    scrape_interval_s: int = Field(default=15, gt=0, le=3600)
    """How often vLLM ``/metrics`` is scraped; autoscalers see load at most this late."""

    @model_validator(mode="after")
    def _url_of_a_prometheus_that_exists(self) -> ObservabilitySpec:
        if not self.install_prometheus_stack and "prometheus_url" not in self.model_fields_set:
            raise at("prometheus_url", "install_prometheus_stack is false, so the default URL (the Prometheus of the "
                     "kube-prometheus-stack gpuscale would install) does not exist: set prometheus_url to the "
                     "Prometheus that scrapes the vLLM pods")
        return self
