"""Simulator speed: simulated requests per CPU-second on the full Azure 2023 conversation trace, per policy.

Usage (from the repository root; needs ../shared/traces):

    .venv/bin/python bench/sim_bench.py [--stack prod] [--model NAME] [--trace PATH] [--compress 1] [--repeat 3]

Prints one row per policy: requests simulated, CPU seconds of the process (best of ``--repeat``; CPU time, not wall
time, so other work on the machine does not count), requests per CPU-second and simulated seconds per CPU-second.
The goal (issue 14) is at least 50,000 requests per CPU-second per policy.
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from gpuscale.sim import traffic
from gpuscale.sim.runner import servable_of
from gpuscale.sim.scenarios import build_scenario
from gpuscale.sim.simulation import Simulation
from gpuscale.stackfile import load_stack

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRACE = ROOT.parent / "shared" / "traces" / "azure2023_conv_norm.csv"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stack", default="prod")
    ap.add_argument("--model", default=None)
    ap.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    ap.add_argument("--compress", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    spec = load_stack(args.stack, ROOT / "stacks" / f"Pulumi.{args.stack}.yaml")
    sc = build_scenario("trace", spec, model=args.model, trace=traffic.TraceTraffic(path=args.trace, compress=args.compress))
    arrivals = traffic.generate(sc.traffic, 0, sc.setup.duration_s)
    servable = servable_of(sc.setup, arrivals)
    table = Table(title=(
        f"{args.trace.name} x{args.compress:g} on {args.stack}/{sc.setup.model} ({sc.setup.mode}), "
        f"{len(arrivals):,} requests, {sc.setup.duration_s:,.0f} simulated s; Python {platform.python_version()}, "
        f"best of {args.repeat}"
    ))
    for col in ("policy", "requests", "completed", "CPU s", "requests / CPU s", "simulated s / CPU s"):
        table.add_column(col, justify="left" if col == "policy" else "right")
    for v in sc.variants:
        best = float("inf")
        completed = 0
        for _ in range(args.repeat):
            t0 = time.process_time()
            r = Simulation(sc.setup, v, arrivals, 0, servable).run()
            best = min(best, time.process_time() - t0)
            completed = r.completed
        table.add_row(
            v.name, f"{len(arrivals):,}", f"{completed:,}", f"{best:.2f}", f"{len(arrivals) / best:,.0f}",
            f"{sc.setup.duration_s / best:,.0f}",
        )
    Console(width=200).print(table)


if __name__ == "__main__":
    main()
