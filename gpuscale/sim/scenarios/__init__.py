"""Named scenarios, one module each; importing the package registers them all (``base.REGISTRY``).

``build_scenario(name, spec, ...)`` builds one; ``scenario_names()`` lists them; ``plan_scenarios()`` lists the ones
the plan quotes, in the order ``make plan`` simulates them.
"""

from __future__ import annotations

import importlib
import pkgutil

from gpuscale.sim.metrics import ScenarioResult
from gpuscale.sim.scenarios.base import (
    CEILING,
    REGISTRY,
    Scenario,
    ScenarioDef,
    ScenarioError,
    ScenarioParams,
    pick_model,
)
from gpuscale.sim.traffic import TraceTraffic
from gpuscale.spec.platform import PlatformSpec

for _mod in pkgutil.iter_modules(__path__):
    if _mod.name != "base":
        importlib.import_module(f"{__name__}.{_mod.name}")


def scenario_names() -> list[str]:
    """Every scenario, presets first (``trace`` needs a file)."""
    return sorted(REGISTRY, key=lambda n: (n == "trace", REGISTRY[n].plan_order or 99, n))


def plan_scenarios() -> list[str]:
    """The scenarios the plan quotes, in simulation order."""
    return [d.name for d in sorted(REGISTRY.values(), key=lambda d: d.plan_order) if d.plan_section is not None]


def definition(name: str) -> ScenarioDef:
    try:
        return REGISTRY[name]
    except KeyError:
        raise ScenarioError(f"unknown scenario {name!r}; choose one of: {', '.join(scenario_names())}") from None


def build_scenario(
    name: str, spec: PlatformSpec, *, model: str | None = None, duration_s: float | None = None,
    trace: TraceTraffic | None = None, spot_interruptions_per_node_hour: float | None = None,
) -> Scenario:
    """Build a registered scenario (``trace`` with a file). Raises ``ScenarioError`` naming the valid choices."""
    if trace is not None:
        name = "trace"
    d = definition(name)
    m = pick_model(spec, model) if model is not None or d.pick_model is None else d.pick_model(spec)
    fields: dict[str, object] = {"duration_s": duration_s, "spot_interruptions_per_node_hour": spot_interruptions_per_node_hour}
    if trace is not None:
        fields["trace"] = trace
    return d.build(spec, m, d.params.model_validate(fields))


def primary_model(spec: PlatformSpec) -> str:
    """The model the plan simulates by default: the first critical one, else the first."""
    critical = [m.name for m in spec.models if m.slo.criticality == "critical"]
    return critical[0] if critical else spec.models[0].name


def plan_runs(spec: PlatformSpec, scenario: str) -> list[tuple[str, str]]:
    """``(model, file stem)`` of each run the plan quotes of ``scenario``: one, of the scenario's model or the primary
    model (stem: the scenario's name); or one per model of ``plan_models`` (stem ``<scenario>--<model>``), none when no
    model qualifies."""
    d = definition(scenario)
    if d.plan_models is not None:
        return [(m.name, f"{scenario}--{m.name}") for m in d.plan_models(spec)]
    return [(d.pick_model(spec).name if d.pick_model is not None else primary_model(spec), scenario)]


def findings(scenario: Scenario, result: ScenarioResult) -> list[str]:
    return definition(scenario.name).findings(scenario, result)


__all__ = [
    "CEILING", "REGISTRY", "Scenario", "ScenarioDef", "ScenarioError", "ScenarioParams", "build_scenario", "definition",
    "findings", "plan_runs", "plan_scenarios", "primary_model", "scenario_names",
]
