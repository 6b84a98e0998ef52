"""Alerts as prometheus-operator ``PrometheusRule`` objects, every threshold from the spec and the sizing.

The rules themselves are built (pure, unit-tested with promtool) in ``gpuscale.alerts``; this component only creates
them. Needs prometheus-operator's ``PrometheusRule`` CRD (kube-prometheus-stack: ``PrometheusStack``) and a Prometheus
that selects the rules (the stack gpuscale installs selects every PrometheusRule).
"""

from __future__ import annotations

import pulumi
from pulumi_kubernetes.apiextensions import CustomResource

from gpuscale.alerts.prometheus_rule import API_VERSION, KIND, PrometheusRuleObject, model_rule, rule_objects
from gpuscale.components.children import child_opts, claim, object_name
from gpuscale.components.inputs import Namespace, StrInput
from gpuscale.sizing import PlatformSizing
from gpuscale.spec.base import Spec
from gpuscale.spec.platform import PlatformSpec

__all__ = ["AlertRules", "AlertRulesArgs"]


class AlertRulesArgs(Spec):
    """The PrometheusRules to create, and where the per-model ones live."""

    rules: list[PrometheusRuleObject]
    """Built by ``from_platform`` (the platform's and every model's) or ``for_model`` (one model's)."""
    model_namespace: Namespace | None = None
    """Namespace of the per-model rules (e.g. ``ns.metadata.name``); default each model's ``serving.namespace``."""

    @classmethod
    def from_platform(cls, spec: PlatformSpec, sizing: PlatformSizing) -> AlertRulesArgs:
        return cls(rules=rule_objects(spec, sizing))

    @classmethod
    def for_model(cls, spec: PlatformSpec, sizing: PlatformSizing, model_name: str, *,
                  namespace: StrInput | None = None) -> AlertRulesArgs:
        """One model's rules only (a model added to a cluster whose platform alerts another stack owns)."""
        return cls(rules=[model_rule(spec, sizing, model_name)], model_namespace=namespace)


class AlertRules(pulumi.ComponentResource):
    """Creates ``<name>-<rule name>`` (``monitoring.coreos.com/v1`` PrometheusRule) per rule object. The kubernetes
    provider is inherited from ``opts``; put prometheus-operator's CRDs (``PrometheusStack.chart``) in
    ``opts.depends_on``."""

    rule_names: pulumi.Output[list[str]]
    """Names of the PrometheusRules created."""

    def __init__(self, name: str, args: AlertRulesArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuscale:index:AlertRules", name, None, opts)
        created: list[CustomResource] = []
        for rule in args.rules:
            namespace = args.model_namespace if rule.scope == "model" and args.model_namespace is not None else rule.namespace
            claim(self, f"AlertRules {name!r}", "kubernetes", KIND, rule.name, scope=namespace,
                  fix="create each model's alerts once (InferencePlatform already creates them for its models)")
            created.append(CustomResource(
                f"{name}-{rule.name}", api_version=API_VERSION, kind=KIND,
                metadata=rule.metadata(namespace), spec=rule.spec_body(), opts=child_opts(self, opts),
            ))
        self.rule_names = pulumi.Output.all(*[object_name(r) for r in created]).apply(list)
        self.register_outputs({"rule_names": self.rule_names})
