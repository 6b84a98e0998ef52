"""Discrete-event simulator of the three autoscaling layers (nodes, scheduling, replicas).

Entry points: ``simulate(spec, "peak-hour")`` or ``Runner(build_scenario(...), seed=...).run()`` return a
``ScenarioResult`` (frozen; ``model_dump(mode="json")`` for documents). ``docs/simulator.md`` describes the model.
"""

from gpuscale.sim import native

native.activate()  # before any module of the request path is imported: the compiled build of this source, if built

from gpuscale.sim.metrics import SCORE_FORMULA, PolicyResult, ScenarioResult  # noqa: E402
from gpuscale.sim.runner import Runner, simulate  # noqa: E402
from gpuscale.sim.scenarios import Scenario, ScenarioError, build_scenario, plan_scenarios, scenario_names  # noqa: E402

__all__ = [
    "SCORE_FORMULA",
    "PolicyResult",
    "Runner",
    "Scenario",
    "ScenarioError",
    "ScenarioResult",
    "build_scenario",
    "plan_scenarios",
    "scenario_names",
    "simulate",
]
