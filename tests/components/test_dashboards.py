"""Dashboards under mocks: one labelled ConfigMap per model, parented, in the namespace asked, each once; the
platform creates them with the Prometheus stack."""

from __future__ import annotations

import json

import pulumi
import pytest

from gpuscale.components import Dashboards, DashboardsArgs, InferencePlatform, InferencePlatformArgs, NameClash
from gpuscale.dashboards.configmap import SIDECAR_LABEL, config_map_name, config_maps
from gpuscale.feasibility import checked_sizing
from tests.components.support import of_type, run
from tests.specs import small_spec

CONFIG_MAP = "kubernetes:core/v1:ConfigMap"


def test_every_dashboard_becomes_a_parented_labelled_config_map() -> None:
    spec = small_spec()
    sizing = checked_sizing(spec)
    want = {c.name: c.body() for c in config_maps(spec, sizing)}

    def program() -> None:
        Dashboards("boards", DashboardsArgs.from_platform(spec, sizing))

    records = run(program)
    maps = of_type(records, CONFIG_MAP)
    assert {r.name for r in maps} == {f"boards-{n}" for n in want}
    (parent,) = [r for r in records if r.type == "gpuscale:index:Dashboards"]
    for r in maps:
        assert r.parent_urn == parent.urn
        meta = r.inputs["metadata"]
        assert meta == want[meta["name"]]["metadata"]
        assert meta["labels"][SIDECAR_LABEL] == "1"
        assert r.inputs["data"] == want[meta["name"]]["data"]
        (text,) = r.inputs["data"].values()
        assert json.loads(text)["uid"].startswith("gpuscale-")


def test_a_program_puts_a_models_dashboard_in_its_own_namespace_and_once() -> None:
    spec = small_spec()
    sizing = checked_sizing(spec)
    model = spec.models[0].name

    def program() -> None:
        Dashboards("boards", DashboardsArgs.for_model(spec, sizing, model, namespace=pulumi.Output.from_input("team-llm")))

    (cm,) = of_type(run(program), CONFIG_MAP)
    assert cm.inputs["metadata"]["namespace"] == "team-llm"
    assert cm.inputs["metadata"]["name"] == config_map_name(model)

    def twice() -> None:
        Dashboards("a", DashboardsArgs.for_model(spec, sizing, model))
        Dashboards("b", DashboardsArgs.for_model(spec, sizing, model))

    with pytest.raises(Exception, match="ConfigMap") as info:
        run(twice)
    assert isinstance(info.value, NameClash) or "already creates" in str(info.value)


@pytest.mark.parametrize("install", [True, False])
def test_the_platform_creates_the_dashboards_with_the_prometheus_stack(install: bool) -> None:
    spec = small_spec() if install else small_spec(observability={
        "install_prometheus_stack": False, "prometheus_url": "http://prometheus.example.svc:9090"})
    sizing = checked_sizing(spec)

    def program() -> None:
        InferencePlatform("p", InferencePlatformArgs(spec=spec))

    records = run(program)
    boards = [r for r in records if r.type == "gpuscale:index:Dashboards"]
    maps = [r for r in of_type(records, CONFIG_MAP) if SIDECAR_LABEL in r.inputs["metadata"].get("labels", {})]
    if install:
        assert len(boards) == 1
        assert {r.inputs["metadata"]["name"] for r in maps} == {c.name for c in config_maps(spec, sizing)}
    else:
        assert boards == [] and maps == []


def test_the_short_form_creates_the_models_dashboard_unless_told_not_to() -> None:
    from gpuscale.components import ModelOnCluster
    from tests.components.test_user_programs import short_form

    def with_board() -> None:
        ModelOnCluster("llama-8b", short_form(namespace="team-b-llm"))

    def without() -> None:
        ModelOnCluster("llama-8b", short_form(namespace="team-b-llm", dashboards=False))

    records = run(with_board)
    boards = [r for r in of_type(records, "kubernetes:core/v1:ConfigMap")
              if "grafana_dashboard" in (r.inputs["metadata"].get("labels") or {})]
    (board,) = boards
    assert board.inputs["metadata"]["namespace"] == "team-b-llm"
    (parent,) = [r for r in records if r.type == "gpuscale:index:Dashboards"]
    assert board.parent_urn == parent.urn
    assert not [r for r in of_type(run(without), "kubernetes:core/v1:ConfigMap")
                if "grafana_dashboard" in (r.inputs["metadata"].get("labels") or {})]
