"""Simulator speed: simulated requests per CPU-second, per policy, on the plain path and the prefix-cache path.

Usage (from the repository root; needs ../shared/traces for the Azure workload):

    .venv/bin/python bench/sim_bench.py [--workloads conv,long,long-prefix] [--repeat 3] [--json bench/results/sim_bench.json]

Workloads, each on prod's disaggregated 70B (the shipped P/D router: cache-aware prefill picks, power-of-two decode):

* ``conv``: the full Azure 2023 conversation trace at native rate (19,366 requests, 3,502 s);
* ``long``: the long-prompt trace of ``bench/long_prompt_trace.py`` (seed 0, 8,441 requests, prompts ~9,000 tokens);
* ``long-prefix``: the same requests carrying conversation prefix ids (the prefix cache and the cache-aware pick run).

For each policy: CPU seconds of the process (``time.process_time``, best of ``--repeat`` rounds, each round running
every workload and policy once; CPU time, not wall time, so other work on the machine counts less, though a loaded
machine still slows it through shared caches and hyper-threads), requests per
CPU-second, and for ``long-prefix`` its CPU time over ``long``'s (the prefix path's cost). The load average at start
and end is recorded: compare speeds within one run, not across runs. The JSON's ``native`` lists the modules that ran
compiled (``gpuscale.sim.native``, ``make native``; empty: all interpreted, as with ``GPUSCALE_SIM_NATIVE=0``). The
goal (issue 27 item 6) is at least 50,000 requests per CPU-second per policy and the prefix path within 2x of the plain
one.

Before/after in one session: run this script from a checkout of the earlier code with ``--json BEFORE.json``, then
from this one with ``--baseline BEFORE.json``: the table gains the speed-up per row and the JSON keeps both.
``--docs`` writes the table of the JSON into ``docs/simulator.md`` (between its ``sim-bench`` markers);
``--markdown-only`` renders ``--json`` without simulating.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import long_prompt_trace  # noqa: E402
from bench.docs_block import render_only, write_block  # noqa: E402
from gpuscale.sim import native, traffic  # noqa: E402
from gpuscale.sim.runner import servable_of  # noqa: E402
from gpuscale.sim.scenarios import build_scenario  # noqa: E402
from gpuscale.sim.simulation import Simulation  # noqa: E402
from gpuscale.stackfile import load_stack  # noqa: E402

AZURE_CONV = ROOT.parent / "shared" / "traces" / "azure2023_conv_norm.csv"
BEGIN, END = "<!-- sim-bench:begin (bench/sim_bench.py --docs) -->", "<!-- sim-bench:end -->"
WORKLOADS = ("conv", "long", "long-prefix")
GOAL_REQUESTS_PER_CPU_S = 50_000
GOAL_PREFIX_SLOWDOWN = 2.0


def trace_of(workload: str, workdir: Path) -> Path:
    if workload == "conv":
        return AZURE_CONV
    path = workdir / f"{workload}.csv"
    if not path.exists():
        long_prompt_trace.write(path, seed=0, prefix_ids=workload == "long-prefix")
    return path


def prepare(workload: str, workdir: Path, stack: str) -> dict[str, Any]:
    spec = load_stack(stack, ROOT / "stacks" / f"Pulumi.{stack}.yaml")
    path = trace_of(workload, workdir)
    sc = build_scenario("trace", spec, trace=traffic.TraceTraffic(path=path))
    arrivals = traffic.generate(sc.traffic, 0, sc.setup.duration_s)
    return {"workload": workload, "path": path, "scenario": sc, "arrivals": arrivals,
            "servable": servable_of(sc.setup, arrivals)}


def bench(workloads: list[dict[str, Any]], repeat: int) -> list[dict[str, Any]]:
    """Best of ``repeat`` CPU times per workload and policy; the repeats go round every workload and policy in turn,
    so a change in the machine's load reaches all of them alike (the prefix path's ratio to the plain one above all)."""
    best: dict[tuple[str, str], float] = {}
    last: dict[tuple[str, str], Any] = {}
    events: dict[tuple[str, str], int] = {}
    for _ in range(repeat):
        for w in workloads:
            sc = w["scenario"]
            for v in sc.variants:
                t0 = time.process_time()
                sim = Simulation(sc.setup, v, w["arrivals"], 0, w["servable"])
                r = sim.run()
                key = (w["workload"], v.name)
                best[key] = min(best.get(key, float("inf")), time.process_time() - t0)
                last[key] = r
                events[key] = sim.env.events_run
    out = []
    for w in workloads:
        sc, n = w["scenario"], len(w["arrivals"])
        rows = []
        for v in sc.variants:
            cpu, r = best[(w["workload"], v.name)], last[(w["workload"], v.name)]
            rows.append({
                "policy": v.name, "cpu_s": round(cpu, 3), "requests_per_cpu_s": round(n / cpu),
                "events_per_request": round(events[(w["workload"], v.name)] / n, 2),
                "simulated_s_per_cpu_s": round(sc.setup.duration_s / cpu), "completed": r.completed,
                "misses": r.misses.total, "slo_attainment_servable": r.slo_attainment_servable,
                "gpu_hours": r.gpu_hours, "prefix_hit_rate": r.prefix_hit_rate,
            })
        out.append({
            "workload": w["workload"], "trace": w["path"].name, "stack": w["stack"],
            "model": sc.setup.model, "mode": sc.setup.mode, "requests": n, "simulated_s": sc.setup.duration_s,
            "policies": rows,
        })
    return out


def render(doc: dict[str, Any]) -> Table:
    table = Table(title=(
        f"simulated requests per CPU-second, best of {doc['repeat']}; Python {doc['python']}, "
        f"load average {doc['load_average_start']:.1f} -> {doc['load_average_end']:.1f}"
    ))
    cols = ["workload", "policy", "requests", "CPU s", "requests / CPU s", "x plain", "misses", "hit rate"]
    before = cpu_by_row(doc["baseline"]) if "baseline" in doc else None
    if before is not None:
        cols += ["CPU s before", "speed-up"]
    for col in cols:
        table.add_column(col, justify="left" if col in ("workload", "policy") else "right")
    for w in doc["workloads"]:
        for p in w["policies"]:
            ratio = prefix_slowdown(doc, p["policy"]) if w["workload"] == "long-prefix" else None
            row = [
                w["workload"], p["policy"], f"{w['requests']:,}", f"{p['cpu_s']:.2f}", f"{p['requests_per_cpu_s']:,}",
                f"{ratio:.2f}" if ratio is not None else "", str(p["misses"]),
                f"{p['prefix_hit_rate']:.3f}" if p["prefix_hit_rate"] is not None else "",
            ]
            if before is not None:
                b = before.get((w["workload"], p["policy"]))
                row += [f"{b:.2f}", f"{b / p['cpu_s']:.2f}"] if b is not None else ["", ""]
            table.add_row(*row)
    return table


def cpu_by_row(doc: dict[str, Any]) -> dict[tuple[str, str], float]:
    return {(w["workload"], p["policy"]): p["cpu_s"] for w in doc["workloads"] for p in w["policies"]}


def prefix_slowdown(doc: dict[str, Any], policy: str) -> float | None:
    """The prefix path's CPU time over the plain path's, same requests and policy."""
    cpu = cpu_by_row(doc)
    plain, prefix = cpu.get(("long", policy)), cpu.get(("long-prefix", policy))
    return prefix / plain if plain and prefix else None


def markdown(doc: dict[str, Any]) -> str:
    """The run as the docs show it: a row per workload and policy, the goals' verdicts under it."""
    before = cpu_by_row(doc["baseline"]) if "baseline" in doc else None
    head = ["workload", "policy", "requests", "CPU s", "requests / CPU s", "x plain", "events / request", "misses",
            "hit rate"]
    if before is not None:
        head += ["CPU s before", "requests / CPU s before", "speed-up"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" if i < 2 else "---:" for i in range(len(head))) + "|"]
    goal, slow_goal = doc["goal_requests_per_cpu_s"], doc["goal_prefix_slowdown"]
    plain_rows = met = 0
    for w in doc["workloads"]:
        for p in w["policies"]:
            ratio = prefix_slowdown(doc, p["policy"]) if w["workload"] == "long-prefix" else None
            hit = p["prefix_hit_rate"]
            per = p.get("events_per_request")
            row = [w["workload"], p["policy"], f"{w['requests']:,}", f"{p['cpu_s']:.3f}", f"{p['requests_per_cpu_s']:,}",
                   f"{ratio:.2f}" if ratio is not None else "", f"{per:.2f}" if per is not None else "", str(p["misses"]),
                   f"{hit:.3f}" if hit is not None else ""]
            if before is not None:
                b = before.get((w["workload"], p["policy"]))
                row += [f"{b:.3f}", f"{round(w['requests'] / b):,}", f"{b / p['cpu_s']:.2f}"] if b else ["", "", ""]
            lines.append("| " + " | ".join(row) + " |")
            if w["workload"] != "long-prefix":
                plain_rows += 1
                met += p["requests_per_cpu_s"] >= goal
    ratios = [r for r in (prefix_slowdown(doc, p["policy"]) for w in doc["workloads"] if w["workload"] == "long"
                          for p in w["policies"]) if r is not None]
    lines.append("")
    lines.append(f"Python {doc['python']}, {doc['cpus']} CPUs, best of {doc['repeat']} rounds, load average "
                 f"{doc['load_average_start']:.1f} at the start and {doc['load_average_end']:.1f} at the end; "
                 f"{compiled_of(doc)}" + (f" (before: {compiled_of(doc['baseline'])})" if before is not None else "")
                 + ".")
    lines.append(f"Goal of at least {goal:,} requests per CPU-second on the plain path (`conv`, `long`): met in {met} "
                 f"of {plain_rows} rows.")
    if ratios:
        within = sum(r <= slow_goal for r in ratios)
        lines.append(f"Prefix path within {slow_goal:g}x of the plain one: {within} of {len(ratios)} policies "
                     f"({min(ratios):.2f}-{max(ratios):.2f}x){before_ratios(doc)}.")
    return "\n".join(lines) + "\n"


def before_ratios(doc: dict[str, Any]) -> str:
    """The baseline's prefix-path ratios, when it has both paths: how the change moved them."""
    base = doc.get("baseline")
    if base is None:
        return ""
    ratios = [r for r in (prefix_slowdown(base, p["policy"]) for w in base["workloads"] if w["workload"] == "long"
                          for p in w["policies"]) if r is not None]
    return f"; before: {min(ratios):.2f}-{max(ratios):.2f}x" if ratios else ""


def compiled_of(doc: dict[str, Any]) -> str:
    """Which of the simulator's modules ran compiled (``gpuscale.sim.native``); a JSON from before the key existed ran
    them all interpreted."""
    mods = doc.get("native") or []
    if not mods:
        return "every module interpreted"
    return "compiled by mypyc: " + ", ".join(f"`{m.rsplit('.', 1)[-1]}`" for m in mods)


def write_docs(doc: dict[str, Any]) -> None:
    """Replace the table between the markers of ``docs/simulator.md``."""
    write_block(BEGIN, END, markdown(doc))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stack", default="prod")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None, help="write the results here (bench/results/sim_bench.json)")
    ap.add_argument("--baseline", type=Path, default=None, help="an earlier run's JSON, to compare with")
    ap.add_argument("--docs", action="store_true", help="write the table into docs/simulator.md")
    ap.add_argument("--markdown-only", action="store_true", help="render --json; simulate nothing")
    args = ap.parse_args()
    if args.markdown_only:
        render_only(args.json, markdown, BEGIN, END, args.docs)
        return
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        prepared = [prepare(w, Path(tmp), args.stack) | {"stack": args.stack} for w in args.workloads.split(",")]
        results = bench(prepared, args.repeat)
    doc = {
        "python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count(),
        "repeat": args.repeat, "load_average_start": load0, "load_average_end": os.getloadavg()[0],
        "goal_requests_per_cpu_s": GOAL_REQUESTS_PER_CPU_S, "goal_prefix_slowdown": GOAL_PREFIX_SLOWDOWN,
        "native": list(native.active()), "workloads": results,
    }
    if args.baseline is not None:
        doc["baseline"] = json.loads(args.baseline.read_text())
    Console(width=200).print(render(doc))
    if args.json is not None:
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    if args.docs:
        write_docs(doc)


if __name__ == "__main__":
    main()
