"""Alerts derived from the spec and the sizing: prometheus-operator ``PrometheusRule`` bodies (``gpuscale.alerts.rules``)."""
