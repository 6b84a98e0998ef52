"""``gpuscale plan``: write the plan document (and its images) for one stack, with progress for every long step."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from gpuscale.cli.common import (
    StackFileOpt,
    StackOpt,
    check_outputs,
    checked_sizing,
    fail,
    positive_finite,
    say,
    source_of,
    spec_from_options,
    step,
    write_text,
)
from gpuscale.plan.context import build_context
from gpuscale.plan.evidence import (
    Evidence,
    ScheduleEvidence,
    manifests_from_synth_dir,
    node_manifests,
    run_simulations,
    schedule_evidence,
)
from gpuscale.plan.goal_table import load_goal_table
from gpuscale.plan.render import DEFAULT_OUT, render_plan
from gpuscale.sim import ScenarioResult
from gpuscale.sim.scenarios import plan_runs, plan_scenarios

COMMITTED_PLAN_STACK = "dev"
"""The stack whose plan is committed at ``outputs/skill-gpu-autoscaler-plan.md``."""


def default_out(stack: str | None, name: str) -> Path:
    """``outputs/skill-gpu-autoscaler-plan.md`` for ``--stack dev`` (the committed plan); every other stack gets its
    own folder, ``outputs/<stack>/skill-gpu-autoscaler-plan.md`` (git-ignored), so no run overwrites the dev plan."""
    if stack == COMMITTED_PLAN_STACK:
        return DEFAULT_OUT
    return DEFAULT_OUT.parent / name / DEFAULT_OUT.name


def plan(
    stack: StackOpt = None,
    stack_file: StackFileOpt = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Plan document to write; images go beside it in <name>-images/. Default "
                     "outputs/skill-gpu-autoscaler-plan.md for --stack dev, else outputs/<stack>/skill-gpu-autoscaler-plan.md.",
                     dir_okay=False, show_default=False),
    ] = None,
    synth_dir: Annotated[
        Path | None,
        typer.Option("--synth", help="Reuse this earlier `gpuscale synth --out DIR` output instead of synthesizing "
                     "again (saves a few seconds).", file_okay=False, show_default=False),
    ] = None,
    sim_dir: Annotated[
        Path | None,
        typer.Option("--sim-dir", help="Reuse earlier `gpuscale simulate --json DIR/<scenario>.json` results for "
                     f"{', '.join(plan_scenarios())} (each simulation otherwise takes up to minutes); a missing one, or "
                     "one of another model, is simulated.", file_okay=False, show_default=False),
    ] = None,
    sim_duration_s: Annotated[
        float | None,
        typer.Option("--sim-duration-s", help="Shorter simulations (default per scenario).", callback=positive_finite,
                     show_default=False),
    ] = None,
    schedule: Annotated[
        bool,
        typer.Option("--schedule/--no-schedule", help="Quote what the real KAI Scheduler leaves Pending at peak "
                     "(`gpuscale schedule`; needs Go, builds it on first use)."),
    ] = True,
    goal_table: Annotated[
        Path | None,
        typer.Option("--goal-table", help="Quote this `bench/goal_table.py` result (the autoscaling goal measured on real "
                     "traces) for the stack; without it the plan says the table was not given.", dir_okay=False,
                     show_default=False),
    ] = None,
) -> None:
    """Design the three-layer autoscaling setup for a stack: inputs, sizing, layers, cold start, simulation, checklist.

    Synthesizes the stack and runs the plan's simulations unless --synth/--sim-dir hand it earlier results; progress goes
    to stderr. The document is written whole at the end, or not at all.
    """
    spec = spec_from_options(stack, stack_file)
    name = stack or spec.environment.name
    target = out if out is not None else default_out(stack, name)
    image_prefix = f"{target.stem}-images"
    check_outputs((target, "--out", False), (target.parent / image_prefix, "--out (its images)", True))
    if synth_dir is not None and not (synth_dir / "manifests").is_dir():
        fail([f"--synth {synth_dir}: not a `gpuscale synth` output (no manifests/ folder)"])
    sizing = checked_sizing(spec, source_of(stack, stack_file))
    goals = load_goal_table(goal_table) if goal_table is not None else None  # a GoalTableError is a Refusal: exit 2
    try:
        objects, charts = _manifests(spec, name, synth_dir)
        simulate = _Simulations()
        simulations = run_simulations(
            spec, stack=name, image_dir=target.parent / image_prefix, image_prefix=image_prefix, sim_dir=sim_dir,
            duration_s=sim_duration_s, simulate=simulate,
        )
        for scenario in plan_scenarios():
            for model, stem in plan_runs(spec, scenario):
                if (scenario, model) not in simulate.ran and sim_dir is not None:
                    say(f"reused {sim_dir / f'{stem}.json'}", stderr=True)
    except OSError as exc:
        fail([f"--out {target}: cannot write the plan's images ({exc.strerror or exc})"])
    scheduled = ScheduleEvidence()
    if schedule:
        with step("asking the KAI Scheduler what stays Pending at peak (gpuscale schedule)", "scheduled"):
            scheduled = schedule_evidence(spec, sizing, objects, charts)
    evidence = Evidence(node_manifests=node_manifests(objects), simulations=simulations, schedule=scheduled,
                        goal_table=goals)
    text = render_plan(build_context(name, spec, sizing), evidence)
    write_text(target, text, "--out")
    say(f"wrote {target} ({len(text.splitlines())} lines) and {target.parent / image_prefix}/")


def _manifests(
    spec: Any, name: str, synth_dir: Path | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | Path]:
    """The synth's Kubernetes objects, and its Helm charts (or ``synth_dir``, read only if KAI is asked)."""
    if synth_dir is not None:
        objects = manifests_from_synth_dir(synth_dir)
        say(f"reused the synth in {synth_dir}", stderr=True)
        return objects, synth_dir
    from gpuscale.cli.synth import print_warnings
    from gpuscale.synth.render import synth_spec

    with step(f"synthesizing {name} (Pulumi program under mocks)", f"synthesized {name}"):
        result = synth_spec(spec, stack=name)
    print_warnings(result)
    return [obj for _, obj in result.kubernetes_objects()], result.charts()


class _Simulations:
    """The simulator behind a progress step per scenario; remembers which scenarios ran (the rest were reused)."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, str | None]] = []

    def __call__(self, spec: Any, scenario: str, **kw: Any) -> ScenarioResult:
        from gpuscale.sim import simulate

        self.ran.append((scenario, kw.get("model")))
        what = f"{scenario} on {kw['model']}" if kw.get("model") else scenario
        with step(f"simulating {what} ({len(self.ran)} of up to {len(plan_scenarios())})", f"simulated {what}"):
            return simulate(spec, scenario, **kw)
