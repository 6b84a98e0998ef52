"""Grafana dashboards derived from the spec and the sizing: one per model, every query the one an autoscaler or an
alert reads (``gpuscale.dashboards.model_dashboard``), shipped as ConfigMaps for the Grafana sidecar
(``gpuscale.dashboards.configmap``)."""
