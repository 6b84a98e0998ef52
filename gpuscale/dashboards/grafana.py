"""A Grafana dashboard as typed structures: panels of PromQL queries and thresholds, each number naming its source.

``Dashboard.body()`` is the dashboard JSON model Grafana reads (``json.dumps`` happens at the edge, in the ConfigMap).
The shape follows the dashboards kube-prometheus-stack 88.0.0 ships itself
(``charts/kube-prometheus-stack/templates/grafana/dashboards-1.14/*.yaml`` at tag ``kube-prometheus-stack-88.0.0``):
``schemaVersion`` 39, a ``datasource`` template variable of type ``datasource`` over ``prometheus``, and every query's
datasource ``{"type": "prometheus", "uid": "${datasource}"}``.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import Field, model_validator

from gpuscale.spec.base import Spec

SCHEMA_VERSION = 39
"""The ``schemaVersion`` of the chart's own dashboards at 88.0.0 (33 of its 35; Grafana migrates older ones on load)."""
DATASOURCE_VARIABLE = "datasource"
DATASOURCE: Final = {"type": "prometheus", "uid": f"${{{DATASOURCE_VARIABLE}}}"}
"""Every query reads the Prometheus the ``datasource`` variable selects (the chart's is ``uid: prometheus``); each body
gets its own copy, so editing one emitted panel never changes another."""
GRID_COLUMNS = 24
"""Grafana's grid is 24 columns wide."""
PANEL_HEIGHT = 8
ROW_HEIGHT = 1

Unit = Literal["short", "s", "percentunit", "reqps"]
THRESHOLD_COLORS = ("red", "orange", "purple", "blue")


class Query(Spec):
    """One PromQL query of a panel; ``source`` says which object's query it is (a trigger, an alert), so a test can
    compare the two strings."""

    expr: str
    legend: str
    source: str = ""
    """``trigger:<ScaledObject or HPA>/<trigger name>``, ``alert:<AlertName>``, or empty for a plain read."""


class Threshold(Spec):
    """A line drawn on a panel at a number the spec or sizing fixed."""

    value: float
    label: str
    field: str
    """Where the value comes from: ``role.max_replicas``, ``slo.ttft_p99_s``, ``sizing.KV_TARGET_UTILISATION``, ..."""
    per_replica: bool = False
    """True: a per-replica target, drawn as ``value x`` the panel's replica count (``Panel.replicas``)."""


class GridPos(Spec):
    x: int = Field(ge=0, lt=GRID_COLUMNS)
    y: int = Field(ge=0)
    w: int = Field(ge=1, le=GRID_COLUMNS)
    h: int = Field(ge=1)


class Panel(Spec):
    """A time series panel (or, with no queries, a row header)."""

    title: str
    queries: list[Query] = []
    thresholds: list[Threshold] = []
    unit: Unit = "short"
    description: str = ""
    replicas: str = ""
    """The replica count a per-replica threshold is multiplied by (a PromQL expression)."""
    measure: str = ""
    """What the panel shows, as a key (``replicas:<role>``, ``signal:<role>:<trigger>``, ``pool_gpus:<pool>``...):
    how a rendering finds the simulated series of the same quantity (``gpuscale.dashboards.snapshot``)."""
    row: bool = False
    grid: GridPos

    @model_validator(mode="after")
    def _replicas_for_per_replica(self) -> Panel:
        if any(t.per_replica for t in self.thresholds) and not self.replicas:
            raise ValueError(f"panel {self.title!r}: a per-replica threshold needs the replica count (replicas)")
        return self

    def lines(self) -> list[Threshold]:
        """The thresholds drawn as constant lines."""
        return [t for t in self.thresholds if not t.per_replica]

    def series(self) -> list[Query]:
        """What the panel queries: its queries, then each per-replica threshold times the replica count."""
        scaled = [Query(expr=f"{t.value:g} * {self.replicas}", legend=f"{t.label} x replicas", source=t.field)
                  for t in self.thresholds if t.per_replica]
        return [*self.queries, *scaled]

    def body(self, panel_id: int) -> dict[str, Any]:
        if self.row:
            return {"type": "row", "id": panel_id, "title": self.title, "collapsed": False, "panels": [],
                    "gridPos": self.grid.model_dump()}
        steps: list[dict[str, Any]] = [{"color": "green", "value": None}]
        steps += [{"color": THRESHOLD_COLORS[i % len(THRESHOLD_COLORS)], "value": t.value}
                  for i, t in enumerate(sorted(self.lines(), key=lambda t: t.value))]
        return {
            "type": "timeseries",
            "id": panel_id,
            "title": self.title,
            "description": self.description,
            "datasource": dict(DATASOURCE),
            "gridPos": self.grid.model_dump(),
            "fieldConfig": {
                "defaults": {
                    "unit": self.unit,
                    "custom": {"fillOpacity": 10, "showPoints": "never", "spanNulls": True,
                               "thresholdsStyle": {"mode": "dashed" if self.lines() else "off"}},
                    "thresholds": {"mode": "absolute", "steps": steps},
                },
                "overrides": [],
            },
            "options": {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                        "tooltip": {"mode": "multi"}},
            "targets": [{"datasource": dict(DATASOURCE), "refId": chr(ord("A") + i), "expr": q.expr, "legendFormat": q.legend}
                        for i, q in enumerate(self.series())],
        }


class Dashboard(Spec):
    uid: str = Field(pattern=r"^[A-Za-z0-9_-]{1,40}$")
    """Grafana's dashboard uid (at most 40 characters)."""
    title: str
    tags: list[str]
    panels: list[Panel]
    refresh: str = "30s"
    time_from: str = "now-3h"

    def body(self) -> dict[str, Any]:
        return {
            "uid": self.uid,
            "title": self.title,
            "tags": self.tags,
            "editable": False,
            "schemaVersion": SCHEMA_VERSION,
            "refresh": self.refresh,
            "time": {"from": self.time_from, "to": "now"},
            "timezone": "utc",
            "templating": {"list": [{
                "name": DATASOURCE_VARIABLE, "label": "Data source", "type": "datasource", "query": "prometheus",
                "current": {"selected": True, "text": "default", "value": "default"}, "hide": 0, "regex": "",
            }]},
            "annotations": {"list": []},
            "panels": [p.body(i + 1) for i, p in enumerate(self.panels)],
        }

    def graphs(self) -> list[Panel]:
        """The panels that draw series (rows left out)."""
        return [p for p in self.panels if not p.row]


class Layout:
    """Places panels on the 24-column grid left to right, a new line when the next does not fit, a row header on a
    line of its own."""

    def __init__(self) -> None:
        self.panels: list[Panel] = []
        self._x = 0
        self._y = 0

    def row(self, title: str) -> None:
        self._newline()
        self.panels.append(Panel(title=title, row=True, grid=GridPos(x=0, y=self._y, w=GRID_COLUMNS, h=ROW_HEIGHT)))
        self._y += ROW_HEIGHT

    def add(self, title: str, queries: list[Query], thresholds: list[Threshold], *, unit: Unit = "short",
            width: int = 8, description: str = "", per_replica: str = "", measure: str = "") -> None:
        if self._x + width > GRID_COLUMNS:
            self._newline()
        self.panels.append(Panel(title=title, queries=queries, thresholds=thresholds, unit=unit, description=description,
                                 replicas=per_replica, measure=measure, grid=GridPos(x=self._x, y=self._y, w=width, h=PANEL_HEIGHT)))
        self._x += width

    def _newline(self) -> None:
        if self._x:
            self._x = 0
            self._y += PANEL_HEIGHT
