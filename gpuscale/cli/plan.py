"""``gpuscale plan``: write outputs/skill-gpu-autoscaler-plan.md (and its images) for one stack."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from gpuscale.cli.common import StackFileOpt, StackOpt, checked_sizing, console, fail, spec_from_options
from gpuscale.plan.context import build_context
from gpuscale.plan.evidence import Evidence, manifests_from_synth_dir, node_manifests, run_simulations
from gpuscale.plan.render import DEFAULT_OUT, render_plan
from gpuscale.sim import ScenarioError


def plan(
    stack: StackOpt = None,
    stack_file: StackFileOpt = None,
    out: Annotated[Path, typer.Option("--out", help="Plan document to write; images go beside it.", dir_okay=False)] = DEFAULT_OUT,
    synth_dir: Annotated[Path | None, typer.Option("--synth", help="Use this `gpuscale synth` output instead of synthesizing.", file_okay=False)] = None,
    sim_dir: Annotated[Path | None, typer.Option("--sim-dir", help="Reuse <scenario>.json files from `gpuscale simulate --json`.", file_okay=False)] = None,
    sim_duration_s: Annotated[float | None, typer.Option("--sim-duration-s", help="Shorter simulations (default per scenario).")] = None,
) -> None:
    """Design the three-layer autoscaling setup for a stack: inputs, sizing, layers, cold start, simulation, checklist."""
    spec = spec_from_options(stack, stack_file)
    name = stack or spec.environment.name
    sizing = checked_sizing(spec)
    if synth_dir is not None:
        if not (synth_dir / "manifests").is_dir():
            fail([f"{synth_dir} is not a `gpuscale synth` output (no manifests/ folder)"])
        objects = manifests_from_synth_dir(synth_dir)
    else:
        from gpuscale.synth.render import synth_spec

        objects = [obj for _, obj in synth_spec(spec, stack=name).kubernetes_objects()]
    image_prefix = f"{out.stem}-images"
    try:
        simulations = run_simulations(
            spec, stack=name, image_dir=out.parent / image_prefix, image_prefix=image_prefix, sim_dir=sim_dir,
            duration_s=sim_duration_s,
        )
    except ScenarioError as exc:
        fail([str(exc)])
    text = render_plan(build_context(name, spec, sizing), Evidence(node_manifests=node_manifests(objects), simulations=simulations))
    out.parent.mkdir(parents=True, exist_ok=True)
    # write-then-rename: a failed run never leaves a half-written plan
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, out)
    console.print(f"wrote {out} ({len(text.splitlines())} lines) and {out.parent / image_prefix}/")
