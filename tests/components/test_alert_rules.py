"""AlertRules under mocks: one PrometheusRule per rule object, parented, in the namespace asked, each once."""

from __future__ import annotations

import pulumi
import pytest

from gpuscale.alerts.prometheus_rule import PLATFORM_RULE_NAME, model_rule_name, rule_objects
from gpuscale.components import AlertRules, AlertRulesArgs, ModelOnCluster, NameClash
from gpuscale.feasibility import checked_sizing
from tests.components.support import k8s_object, of_type, run
from tests.components.test_user_programs import short_form
from tests.specs import small_spec

RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"


def test_every_rule_object_becomes_a_parented_prometheus_rule() -> None:
    spec = small_spec()
    sizing = checked_sizing(spec)
    want = {o.name: o.body() for o in rule_objects(spec, sizing)}

    def program() -> None:
        AlertRules("alerts", AlertRulesArgs.from_platform(spec, sizing))

    records = run(program)
    rules = of_type(records, RULE)
    assert {r.name for r in rules} == {f"alerts-{n}" for n in want}
    (parent,) = [r for r in records if r.type == "gpuscale:index:AlertRules"]
    for r in rules:
        assert r.parent_urn == parent.urn
        obj = k8s_object(r)
        assert obj == want[obj["metadata"]["name"]]
    assert PLATFORM_RULE_NAME in want


def test_a_program_puts_a_models_rules_in_its_own_namespace_and_once() -> None:
    spec = small_spec()
    sizing = checked_sizing(spec)
    model = spec.models[0].name

    def program() -> None:
        ns = pulumi.Output.from_input("team-llm")
        AlertRules("alerts", AlertRulesArgs.for_model(spec, sizing, model, namespace=ns))

    (rule,) = of_type(run(program), RULE)
    assert rule.inputs["metadata"]["namespace"] == "team-llm"
    assert rule.inputs["metadata"]["name"] == model_rule_name(model)

    def twice() -> None:
        AlertRules("a", AlertRulesArgs.for_model(spec, sizing, model))
        AlertRules("b", AlertRulesArgs.for_model(spec, sizing, model))

    with pytest.raises(Exception, match="PrometheusRule") as info:
        run(twice)
    assert isinstance(info.value, NameClash) or "already creates" in str(info.value)


def test_the_short_form_creates_the_models_rules_unless_told_not_to() -> None:
    def with_rules() -> None:
        ModelOnCluster("llama-8b", short_form(namespace="team-b-llm"))

    def without() -> None:
        ModelOnCluster("llama-8b", short_form(namespace="team-b-llm", alert_rules=False))

    (rule,) = of_type(run(with_rules), RULE)
    assert rule.inputs["metadata"] == {"name": "gpuscale-llama-8b-alerts", "namespace": "team-b-llm",
                                       "labels": {"app.kubernetes.io/managed-by": "gpuscale"}}
    assert of_type(run(without), RULE) == []
