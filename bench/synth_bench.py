#!/usr/bin/env python3
"""Synth benchmark: how long ``gpuscale synth`` takes, against the floor of the Pulumi mock engine itself.

For a stack (default prod) and a generated stress spec (20 disaggregated models = 40 roles, 30 KAI queues), it
reports the wall time of a full synth (run the platform program under mocks, render, write the files) and the time
the mock engine needs to register the same number of resources with the same inputs and nothing else (the floor),
and their ratio: how much our components, builders and rendering add on top of Pulumi.

    .venv/bin/python bench/synth_bench.py                  # prod + stress, median of 3
    .venv/bin/python bench/synth_bench.py --stack dev --repeat 5
    .venv/bin/python bench/synth_bench.py --stack-file my-stack.yaml --no-stress

It runs the real platform program (``gpuscale.program.deploy``) and says so when that is missing.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STRESS_MODELS = 20
STRESS_DEPARTMENTS = 3
STRESS_TEAMS_PER_DEPARTMENT = 9  # 3 departments + 27 teams = 30 queues
GPUS_PER_TEAM = 8


@dataclass(frozen=True)
class Row:
    name: str
    resources: int
    kubernetes_objects: int
    synth_s: float
    floor_s: float

    @property
    def ratio(self) -> float:
        return self.synth_s / self.floor_s if self.floor_s > 0 else float("inf")


def stress_spec(base: object) -> object:
    """20 models x 2 roles (disaggregated) over 30 queues, built with the spec models from a base spec's pool."""
    from gpuscale.spec import ModelDeployment, PlatformSpec, QueueSpec, TopologySpec

    assert isinstance(base, PlatformSpec)
    template = max(base.models, key=lambda m: m.architecture.params_b)  # the heaviest model, on its own pool
    pool = base.topology.pool(template.node_pool)
    teams = [
        QueueSpec(
            name=f"dept-{d}",
            gpu_quota=STRESS_TEAMS_PER_DEPARTMENT * GPUS_PER_TEAM,
            priority=100 + d,
            children=[
                QueueSpec(name=f"team-{d}-{t}", gpu_quota=GPUS_PER_TEAM, priority=100)
                for t in range(STRESS_TEAMS_PER_DEPARTMENT)
            ],
        )
        for d in range(STRESS_DEPARTMENTS)
    ]
    leaves = [c.name for q in teams for c in q.children]
    total_gpus = STRESS_DEPARTMENTS * STRESS_TEAMS_PER_DEPARTMENT * GPUS_PER_TEAM
    big_pool = pool.model_validate({**pool.model_dump(), "gpu_limit": total_gpus})
    models = []
    for i in range(STRESS_MODELS):
        raw = template.model_dump()
        raw.update(name=f"model-{i:02d}", queue=leaves[i % len(leaves)], node_pool=big_pool.name)
        raw["serving"] = {**raw["serving"], "mode": "disaggregated"}
        raw["autoscaling"] = {**raw["autoscaling"], "scope": "per_role"}
        models.append(ModelDeployment.model_validate(raw))
    topology = TopologySpec.model_validate({**base.topology.model_dump(), "gpu_pools": [big_pool.model_dump()]})
    env = base.environment.model_validate({**base.environment.model_dump(), "name": "stress"})
    return PlatformSpec(environment=env, topology=topology, teams=teams, models=models,
                        observability=base.observability)


def timed(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(name: str, spec: object, repeat: int) -> Row:
    import pulumi

    from gpuscale.program import deploy  # type: ignore[import-not-found, unused-ignore]
    from gpuscale.synth.mocks import run_program
    from gpuscale.synth.render import synth_spec

    result = synth_spec(spec)

    def full_synth() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            synth_spec(spec).write(Path(tmp))

    records = run_program(lambda: deploy(spec))

    def floor_program() -> None:
        # the same registrations, flat and without any of our code: the engine's own cost per resource
        for i, r in enumerate(records):
            if r.custom:
                pulumi.CustomResource(r.type, f"floor-{i}", dict(r.inputs))
            else:
                pulumi.ComponentResource(r.type, f"floor-{i}")

    synth_s = timed(full_synth, repeat)
    floor_s = timed(lambda: run_program(floor_program), repeat)
    return Row(name, len(result.resources), len(result.kubernetes_objects()), synth_s, floor_s)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--stack", default=None, help="stack name: stacks/Pulumi.NAME.yaml (default prod)")
    src.add_argument("--stack-file", type=Path, default=None, help="any stack file")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement; the median is reported")
    ap.add_argument("--no-stress", action="store_true", help="skip the generated stress spec")
    args = ap.parse_args(argv)

    from gpuscale.stackfile import StackConfigError, load_stack_file

    if importlib.util.find_spec("gpuscale.program") is None:
        print("synth_bench: gpuscale.program (the platform program with deploy(spec)) is not in this checkout yet; "
              "the benchmark measures the real program and runs unchanged once it exists.", file=sys.stderr)
        return 2
    path = args.stack_file or REPO / "stacks" / f"Pulumi.{args.stack or 'prod'}.yaml"
    try:
        spec = load_stack_file(path)
    except StackConfigError as exc:
        print(f"synth_bench: {exc}", file=sys.stderr)
        return 2

    rows = [measure(spec.environment.name, spec, args.repeat)]
    if not args.no_stress:
        stress = stress_spec(spec)
        rows.append(measure(f"stress ({STRESS_MODELS} models x 2 roles, "
                            f"{STRESS_DEPARTMENTS * (STRESS_TEAMS_PER_DEPARTMENT + 1)} queues)", stress, args.repeat))

    print(f"{'spec':<42} {'resources':>9} {'k8s objs':>8} {'synth s':>8} {'floor s':>8} {'ratio':>6}")
    for r in rows:
        print(f"{r.name:<42} {r.resources:>9} {r.kubernetes_objects:>8} {r.synth_s:>8.2f} {r.floor_s:>8.2f} "
              f"{r.ratio:>6.1f}")
    print(f"(median of {args.repeat}; synth = program under mocks + render + write; floor = the same registrations "
          "with no component code)")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
