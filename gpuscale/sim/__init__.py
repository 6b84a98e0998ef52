"""Discrete-event simulator of the three autoscaling layers (nodes, scheduling, replicas).

Entry points: ``simulate(spec, "peak-hour")`` or ``Runner(build_scenario(...), seed=...).run()`` return a
``ScenarioResult`` (frozen; ``model_dump(mode="json")`` for documents). ``docs/simulator.md`` describes the model.
"""

from gpuscale.sim.metrics import SCORE_FORMULA, PolicyResult, ScenarioResult
from gpuscale.sim.runner import Runner, simulate
from gpuscale.sim.scenarios import Scenario, ScenarioError, build_scenario, plan_scenarios, scenario_names

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
