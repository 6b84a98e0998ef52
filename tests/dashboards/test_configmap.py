"""The dashboard ConfigMaps: the sidecar's label, the JSON of the dashboard as their one key, a valid shape, and the
emitted objects of every shipped stack's synth carry one per model."""

from __future__ import annotations

import json

import pytest

from gpuscale.dashboards import configmap
from gpuscale.dashboards.grafana import Dashboard, GridPos, Panel, Query, Threshold
from gpuscale.dashboards.model_dashboard import model_dashboard
from gpuscale.feasibility import checked_sizing
from gpuscale.spec.platform import PlatformSpec
from gpuscale.synth.render import SynthResult
from tests.conftest import STACKS, requires_shared
from tests.dashboards.dashboard_shape import problems
from tests.k8s_schema import validate_object


@pytest.mark.parametrize("stack", STACKS)
def test_each_models_dashboard_has_the_right_shape(stack_specs: dict[str, PlatformSpec], stack: str) -> None:
    spec = stack_specs[stack]
    sizing = checked_sizing(spec)
    for model in spec.models:
        assert problems(model_dashboard(spec, sizing, model.name).body()) == []


def test_the_shape_check_refuses_what_grafana_would_misplace() -> None:
    q = [Query(expr="up", legend="up")]
    board = Dashboard(uid="x", title="x", tags=[], panels=[
        Panel(title="a", queries=q, grid=GridPos(x=0, y=0, w=12, h=8)),
        Panel(title="b", queries=q, grid=GridPos(x=6, y=4, w=12, h=8)),
    ])
    assert any("overlaps" in p for p in problems(board.body()))
    body = board.body()
    body["panels"][1]["gridPos"] = {"x": 12, "y": 0, "w": 12, "h": 8}
    assert problems(body) == []
    body["schemaVersion"] = 16
    body["panels"][0]["targets"][0]["datasource"]["uid"] = "prometheus"
    assert len(problems(body)) == 2
    with pytest.raises(ValueError, match="per-replica threshold"):
        Panel(title="c", queries=q, thresholds=[Threshold(value=1, label="t", field="f", per_replica=True)],
              grid=GridPos(x=0, y=0, w=8, h=8))


def test_a_per_replica_target_is_drawn_against_the_replica_count() -> None:
    panel = Panel(title="c", queries=[Query(expr="sum(x)", legend="x")], replicas="hpa_current",
                  thresholds=[Threshold(value=0.3, label="target 0.3", field="f", per_replica=True)],
                  grid=GridPos(x=0, y=0, w=8, h=8))
    body = panel.body(1)
    assert [t["expr"] for t in body["targets"]] == ["sum(x)", "0.3 * hpa_current"]
    assert body["fieldConfig"]["defaults"]["thresholds"]["steps"] == [{"color": "green", "value": None}]


def test_the_config_map_is_labelled_for_the_sidecar_and_holds_the_dashboard(dev_spec: PlatformSpec) -> None:
    sizing = checked_sizing(dev_spec)
    (cm,) = configmap.config_maps(dev_spec, sizing)
    body = cm.body()
    model = dev_spec.models[0]
    assert body["metadata"]["namespace"] == model.serving.namespace
    assert body["metadata"]["labels"][configmap.SIDECAR_LABEL] == "1"
    (key,) = body["data"]
    assert key == f"gpuscale-{model.name}.json"
    assert json.loads(body["data"][key]) == model_dashboard(dev_spec, sizing, model.name).body()


def test_a_dashboard_too_large_for_a_config_map_is_refused(monkeypatch: pytest.MonkeyPatch, dev_spec: PlatformSpec) -> None:
    (cm,) = configmap.config_maps(dev_spec, checked_sizing(dev_spec))
    monkeypatch.setattr(configmap, "CONFIGMAP_DATA_LIMIT_BYTES", 1000)
    with pytest.raises(ValueError, match="do not fit a ConfigMap"):
        cm.body()


@requires_shared
@pytest.mark.parametrize("stack", STACKS)
def test_synth_emits_a_valid_dashboard_per_model(stack_specs: dict[str, PlatformSpec],
                                                 stack_synths: dict[str, SynthResult], stack: str) -> None:
    spec = stack_specs[stack]
    boards = {o["metadata"]["name"]: o for _, o in stack_synths[stack].kubernetes_objects()
              if o["kind"] == "ConfigMap" and o["metadata"].get("labels", {}).get(configmap.SIDECAR_LABEL) == "1"}
    assert set(boards) == {configmap.config_map_name(m.name) for m in spec.models}
    for model in spec.models:
        obj = boards[configmap.config_map_name(model.name)]
        assert obj["metadata"]["namespace"] == model.serving.namespace
        assert validate_object(obj) == []
        (text,) = obj["data"].values()
        assert problems(json.loads(text)) == []
