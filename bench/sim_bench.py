"""Simulator speed: simulated requests per second of wall time on the full Azure 2023 conversation trace, per policy.

Usage (from the repository root; needs ../shared/traces):

    .venv/bin/python bench/sim_bench.py [--stack prod] [--model NAME] [--trace PATH] [--compress 1] [--repeat 3]

Prints one row per policy: requests simulated, simulated seconds, wall seconds (best of ``--repeat``),
requests per wall second and simulated seconds per wall second.
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from gpuscale.sim import traffic
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
    table = Table(title=(
        f"{args.trace.name} x{args.compress:g} on {args.stack}/{sc.setup.model} ({sc.setup.mode}), "
        f"{len(arrivals):,} requests, {sc.setup.duration_s:,.0f} simulated s; Python {platform.python_version()}, "
        f"best of {args.repeat}"
    ))
    for col in ("policy", "requests", "completed", "wall s", "requests / wall s", "simulated s / wall s"):
        table.add_column(col, justify="left" if col == "policy" else "right")
    for v in sc.variants:
        best = float("inf")
        completed = 0
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            r = Simulation(sc.setup, v, arrivals, 0).run()
            best = min(best, time.perf_counter() - t0)
            completed = r.completed
        table.add_row(
            v.name, f"{len(arrivals):,}", f"{completed:,}", f"{best:.2f}", f"{len(arrivals) / best:,.0f}",
            f"{sc.setup.duration_s / best:,.0f}",
        )
    Console(width=200).print(table)


if __name__ == "__main__":
    main()
