"""The ``PrometheusRule`` objects (prometheus-operator ``monitoring.coreos.com/v1``) of a platform: one per model in
its namespace (a group per role, and the front door's), and one for the platform (pools, queues, drains, GPU health)
in the monitoring namespace. The kube-prometheus-stack gpuscale installs selects every PrometheusRule
(``ruleSelectorNilUsesHelmValues: false``, ``autoscaling.prometheus_stack_values``)."""

from __future__ import annotations

from typing import Any, Literal

from gpuscale import labels
from gpuscale.alerts.front_door_alerts import front_door_rules
from gpuscale.alerts.platform_alerts import platform_rules
from gpuscale.alerts.role_alerts import role_rules
from gpuscale.alerts.rule import AlertRule, RuleGroup
from gpuscale.manifests.namespaces import PROMETHEUS_STACK_NAMESPACE
from gpuscale.sizing import PlatformSizing
from gpuscale.spec.base import Spec
from gpuscale.spec.platform import PlatformSpec

API_VERSION = "monitoring.coreos.com/v1"
KIND = "PrometheusRule"
PLATFORM_RULE_NAME = "gpuscale-platform-alerts"


def model_rule_name(model: str) -> str:
    return f"gpuscale-{model}-alerts"


def model_groups(spec: PlatformSpec, sizing: PlatformSizing, model_name: str) -> list[RuleGroup]:
    model = next(x for x in spec.models if x.name == model_name)
    groups = [RuleGroup(name=f"gpuscale.{model.name}.{role}", rules=role_rules(spec, sizing, model.name, role))
              for role in model.serving.roles]
    door = front_door_rules(spec, sizing, model.name)
    if door:
        groups.append(RuleGroup(name=f"gpuscale.{model.name}.front-door", rules=door))
    return groups


def platform_groups(spec: PlatformSpec, sizing: PlatformSizing) -> list[RuleGroup]:
    return [RuleGroup(name="gpuscale.platform", rules=platform_rules(spec, sizing))]


class PrometheusRuleObject(Spec):
    """One PrometheusRule: its name, namespace and rule groups."""

    name: str
    namespace: str
    scope: Literal["platform", "model"]
    """``model``: lives with the model's workloads (a program may put them in another namespace)."""
    groups: list[RuleGroup]

    def metadata(self, namespace: object = None) -> dict[str, Any]:
        return {"name": self.name, "namespace": namespace if namespace is not None else self.namespace,
                "labels": {labels.MANAGED_BY_LABEL: labels.MANAGED_BY}}

    def spec_body(self) -> dict[str, Any]:
        return {"groups": [g.body() for g in self.groups]}

    def body(self) -> dict[str, Any]:
        return {"apiVersion": API_VERSION, "kind": KIND, "metadata": self.metadata(), "spec": self.spec_body()}

    def rules(self) -> list[AlertRule]:
        return [r for g in self.groups for r in g.rules]


def model_rule(spec: PlatformSpec, sizing: PlatformSizing, model_name: str) -> PrometheusRuleObject:
    model = next(x for x in spec.models if x.name == model_name)
    return PrometheusRuleObject(name=model_rule_name(model.name), namespace=model.serving.namespace, scope="model",
                                groups=model_groups(spec, sizing, model.name))


def platform_rule(spec: PlatformSpec, sizing: PlatformSizing) -> PrometheusRuleObject:
    return PrometheusRuleObject(name=PLATFORM_RULE_NAME, namespace=PROMETHEUS_STACK_NAMESPACE, scope="platform",
                                groups=platform_groups(spec, sizing))


def rule_objects(spec: PlatformSpec, sizing: PlatformSizing) -> list[PrometheusRuleObject]:
    """Every PrometheusRule of the platform: the platform's, then one per model."""
    return [platform_rule(spec, sizing), *(model_rule(spec, sizing, m.name) for m in spec.models)]
