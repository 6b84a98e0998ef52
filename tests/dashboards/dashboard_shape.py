"""The shape of a Grafana dashboard JSON model that gpuscale emits, as a JSON Schema, plus the grid rules a schema
cannot say (panels inside 24 columns, none overlapping, ids unique, every query on the ``datasource`` variable).

No Grafana dashboard schema ships in a library installed here (grafana-foundation-sdk builds dashboards, it does not
validate them; Grafana's own CUE kinds are AGPL), so the subset gpuscale relies on is written out: the fields the
kube-prometheus-stack 88.0.0 dashboards use (``templates/grafana/dashboards-1.14/*.yaml``)."""

from __future__ import annotations

from typing import Any

import jsonschema

_DATASOURCE = {"type": "object", "required": ["type", "uid"],
               "properties": {"type": {"const": "prometheus"}, "uid": {"const": "${datasource}"}}}
_GRID = {"type": "object", "required": ["x", "y", "w", "h"], "additionalProperties": False,
         "properties": {k: {"type": "integer", "minimum": 0} for k in ("x", "y", "w", "h")}}
_TARGET = {"type": "object", "required": ["refId", "expr", "datasource"],
           "properties": {"refId": {"type": "string", "pattern": "^[A-Z]$"}, "expr": {"type": "string", "minLength": 1},
                          "legendFormat": {"type": "string"}, "datasource": _DATASOURCE}}
_STEP = {"type": "object", "required": ["color", "value"],
         "properties": {"color": {"type": "string"}, "value": {"type": ["number", "null"]}}}
_PANEL = {
    "type": "object", "required": ["type", "id", "title", "gridPos"],
    "properties": {
        "type": {"enum": ["row", "timeseries"]}, "id": {"type": "integer", "minimum": 1}, "title": {"type": "string"},
        "gridPos": _GRID, "datasource": _DATASOURCE, "targets": {"type": "array", "items": _TARGET},
        "fieldConfig": {"type": "object", "required": ["defaults", "overrides"], "properties": {"defaults": {
            "type": "object", "required": ["thresholds"],
            "properties": {"thresholds": {"type": "object", "required": ["mode", "steps"], "properties": {
                "mode": {"const": "absolute"}, "steps": {"type": "array", "minItems": 1, "items": _STEP}}}}}}},
    },
    "if": {"properties": {"type": {"const": "timeseries"}}},
    "then": {"required": ["datasource", "targets", "fieldConfig"], "properties": {"targets": {"minItems": 1}}},
}
SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["uid", "title", "schemaVersion", "panels", "templating", "time"],
    "properties": {
        "uid": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,40}$"},
        "title": {"type": "string", "minLength": 1},
        "schemaVersion": {"const": 39},
        "panels": {"type": "array", "minItems": 1, "items": _PANEL},
        "templating": {"type": "object", "required": ["list"], "properties": {"list": {
            "type": "array", "contains": {"type": "object", "required": ["name", "type", "query"], "properties": {
                "name": {"const": "datasource"}, "type": {"const": "datasource"}, "query": {"const": "prometheus"}}}}}},
    },
}


def _grid_problems(panels: list[dict[str, Any]]) -> list[str]:
    found = []
    cells: dict[tuple[int, int], int] = {}
    for p in panels:
        g = p["gridPos"]
        if g["x"] + g["w"] > 24:
            found.append(f"panel {p['id']} {p['title']!r} ends past column 24")
        taken = {cells[c] for c in ((x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"]))
                 if c in cells}
        found += [f"panel {p['id']} overlaps panel {other}" for other in sorted(taken)]
        cells |= {(x, y): p["id"] for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
    return found


def problems(body: dict[str, Any]) -> list[str]:
    """What is wrong with a dashboard body; [] when its shape is right."""
    found = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
             for e in jsonschema.Draft202012Validator(SCHEMA).iter_errors(body)]
    if found:
        return found
    ids = [p["id"] for p in body["panels"]]
    if len(set(ids)) != len(ids):
        found.append(f"panel ids repeat: {ids}")
    found += [f"panel {p['id']}: refIds repeat" for p in body["panels"]
              if len({t["refId"] for t in p.get("targets", [])}) != len(p.get("targets", []))]
    return found + _grid_problems(body["panels"])
