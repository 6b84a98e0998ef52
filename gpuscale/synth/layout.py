"""The layout of a synth output directory, shared by the writer (``render``) and the reader (``diff``) without either
importing the other's dependencies (the reader needs no Pulumi)."""

from __future__ import annotations

FORMAT = "gpuscale-synth/1"
"""Marker in ``resources.json``; ``gpuscale diff`` refuses directories without it."""
RESOURCES_FILE = "resources.json"
CHARTS_FILE = "charts.yaml"
MANIFESTS_DIR = "manifests"
