"""The PrometheusRules ``gpuscale synth`` emits for every shipped stack: valid to the pinned CRD, accepted by
``promtool check rules``, one per model plus the platform's, and every alert carrying a runbook."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuscale.alerts.prometheus_rule import PLATFORM_RULE_NAME, model_rule_name
from gpuscale.spec.platform import PlatformSpec
from gpuscale.synth.render import SynthResult
from tests.alerts.promtool import check_rules, requires_promtool, write_rules
from tests.conftest import STACKS, requires_shared
from tests.k8s_schema import validate_object


def prometheus_rules(synth: SynthResult) -> list[dict[str, Any]]:
    return [o for _, o in synth.kubernetes_objects() if o["kind"] == "PrometheusRule"]


@pytest.mark.parametrize("stack", STACKS)
def test_synth_emits_one_rule_per_model_and_the_platform(
    stack_specs: dict[str, PlatformSpec], stack_synths: dict[str, SynthResult], stack: str,
) -> None:
    spec = stack_specs[stack]
    got = {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in prometheus_rules(stack_synths[stack])}
    want = {("monitoring", PLATFORM_RULE_NAME)} | {(m.serving.namespace, model_rule_name(m.name)) for m in spec.models}
    assert got == want


@requires_shared
@pytest.mark.parametrize("stack", STACKS)
def test_emitted_rules_are_valid_to_the_pinned_crd(stack_synths: dict[str, SynthResult], stack: str) -> None:
    problems = {o["metadata"]["name"]: p for o in prometheus_rules(stack_synths[stack]) if (p := validate_object(o))}
    assert problems == {}


@requires_promtool
@pytest.mark.parametrize("stack", STACKS)
def test_promtool_check_rules_passes_on_every_stack(tmp_path: Path, stack_synths: dict[str, SynthResult], stack: str) -> None:
    for obj in prometheus_rules(stack_synths[stack]):
        path = write_rules(tmp_path / f"{obj['metadata']['name']}.yaml", obj["spec"]["groups"])
        result = check_rules(path)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "SUCCESS" in result.stdout


@pytest.mark.parametrize("stack", STACKS)
def test_every_alert_is_named_once_and_has_a_runbook(stack_synths: dict[str, SynthResult], stack: str) -> None:
    rules = [r for o in prometheus_rules(stack_synths[stack]) for g in o["spec"]["groups"] for r in g["rules"]]
    names = [r["alert"] for r in rules]
    assert len(names) == len(set(names))
    for r in rules:
        assert r["annotations"]["runbook"].startswith("outputs/skill-gpu-autoscaler-plan.md, section "), r["alert"]
        assert r["labels"]["severity"] in ("critical", "warning")


def test_no_rules_without_the_prometheus_stack(stack_specs: dict[str, PlatformSpec]) -> None:
    from gpuscale.synth.render import synth_spec

    raw = stack_specs["dev"].model_dump(exclude_unset=True)
    raw["observability"] = {"install_prometheus_stack": False, "prometheus_url": "http://prometheus.example:9090"}
    spec = PlatformSpec.model_validate(raw)
    assert prometheus_rules(synth_spec(spec, stack="dev")) == []
