"""The goal of issue 15, measured: every shipped stack x {Azure code, Azure conversation, long prompts} x compression.

For each cell (the stack's plan model, i.e. its first critical model or else its first):

* **untuned**: the stack with its ``workload:`` section derived from the trace (``gpuscale workload``; a p99 longer
  than the model's context is cut to it, and a peak beyond what the limits carry at the target utilisation is cut to
  what they carry, as ``gpuscale validate`` demands) and every autoscaling value ``gpuscale tune`` would set left to
  sizing's defaults (the stack's own ``min_replicas``/``max_replicas``, backend and schedules kept);
* **tuned**: ``gpuscale tune`` on that stack (the search runs even where the limits cannot carry the trace; the cell
  says so);
* **ceiling** (every role at the most replicas the limits allow, ready all the time) and the **duty-cycle HPA**;
* the **lower bound** on GPU-hours at each policy's own attainment.

Goals (per cell, for untuned and tuned): servable attainment within 1 point of the ceiling's; GPU-hours at most 1.15x
the lower bound; misses above the ceiling's at most a tenth of the duty-cycle HPA's.

Usage (from the repository root; needs ../shared/traces):

    .venv/bin/python bench/goal_table.py [--stacks dev,staging,prod] [--traces code,conv,long] [--compress 1,2,3,4,5]
        [--max-evals 40] [--jobs 2] [--json bench/results/goal_table.json]

Writes the JSON after every cell (one record per cell; ``gpuscale plan --goal-table`` renders the plan stack's rows)
and prints the table as Markdown (``docs/simulator.md`` quotes it); ``--markdown-only`` prints the table of an existing
JSON without simulating (``--docs`` writes it between the markers of ``docs/simulator.md``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import long_prompt_trace  # noqa: E402
from gpuscale.plan.goal_table import load_goal_table  # noqa: E402
from gpuscale.plan.render import goal_table_markdown  # noqa: E402
from gpuscale.sim.best_fixed import ATTAINMENT_GOAL_POINTS  # noqa: E402
from gpuscale.sim.metrics import PolicyResult  # noqa: E402
from gpuscale.sim.scenarios import primary_model  # noqa: E402
from gpuscale.sim.traffic import TraceTraffic, generate  # noqa: E402
from gpuscale.sizing import size_model  # noqa: E402
from gpuscale.spec.platform import PlatformSpec  # noqa: E402
from gpuscale.stackfile import load_stack_file  # noqa: E402
from gpuscale.tune import trace_stats  # noqa: E402
from gpuscale.tune.evaluate import TraceBench  # noqa: E402
from gpuscale.tune.tuner import tune  # noqa: E402

TRACES = ROOT.parent / "shared" / "traces"
TUNED_KEYS = ("target_utilisation", "burst_mode", "slo_guard", "scale_down_stabilization_s", "warm_schedule", "metric", "target")
ATTAINMENT_POINTS = ATTAINMENT_GOAL_POINTS
"""The attainment goal is the one the best fixed allocation is searched against (one rule, one place)."""
GPU_HOURS_FACTOR = 1.15
MISSES_SHARE = 0.1


def trace_path(name: str, workdir: Path) -> Path:
    if name == "long":
        path = workdir / "long_prompts.csv"
        if not path.exists():
            long_prompt_trace.write(path, seed=0)
        return path
    return TRACES / f"azure2023_{name}_norm.csv"


def untuned_spec(spec: PlatformSpec, model_name: str, trace: TraceTraffic) -> PlatformSpec:
    """The stack with the trace's workload and sizing's defaults for everything ``gpuscale tune`` sets."""
    prof = trace_stats.profile(generate(trace, 0, None), trace.compress)
    w = trace_stats.workload_of(prof)
    raw = spec.model_dump(mode="json", exclude_unset=True)
    i = [m.name for m in spec.models].index(model_name)
    ctx = spec.models[i].architecture.max_context_tokens
    wl = w.model_dump(mode="json", exclude={"trace"})
    for key in ("prompt_tokens", "output_tokens"):
        wl[key]["p99"] = min(wl[key]["p99"], ctx - 1)
        wl[key]["mean"] = min(wl[key]["mean"], wl[key]["p99"])
    if wl["prompt_tokens"]["mean"] + wl["output_tokens"]["mean"] > ctx:
        wl["prompt_tokens"]["mean"] = ctx - wl["output_tokens"]["mean"]
    raw["models"][i]["workload"] = wl
    auto = raw["models"][i].get("autoscaling", {})
    for role in ("aggregated", "prefill", "decode"):
        if role in auto:
            auto[role] = {k: v for k, v in auto[role].items() if k not in TUNED_KEYS}
    auto.pop("tuned_on", None)
    # a peak beyond what the limits carry at the target utilisation is refused by validate: state the most they carry
    for _ in range(8):
        candidate = PlatformSpec.model_validate(raw)
        ms = size_model(candidate, candidate.models[i])
        over = max(r.replicas_at_peak / max(r.max_replicas, 1) for r in ms.roles)
        if over <= 1.0:
            return candidate
        wl["peak_rps"] = trace_stats._sig(wl["peak_rps"] / over * 0.98)
        wl["base_rps"] = min(wl["base_rps"], wl["peak_rps"])
    raise ValueError(f"{model_name}: no peak the limits carry")


def summary(r: PolicyResult) -> dict[str, Any]:
    lb = r.lower_bound_gpu_hours
    return {
        "attainment": r.slo_attainment, "attainment_servable": r.slo_attainment_servable,
        "misses": r.misses.model_dump(), "gpu_hours": r.gpu_hours, "lower_bound_gpu_hours": lb,
        "gpu_hours_vs_lower_bound": round(r.gpu_hours / lb, 3) if lb else None, "cost_usd": r.cost_usd,
        "replicas_max": r.replicas_max, "replicas_mean": r.replicas_mean,
    }


def goals(r: dict[str, Any], ceiling: dict[str, Any], duty: dict[str, Any]) -> dict[str, Any]:
    gap = ceiling["attainment_servable"] - r["attainment_servable"]
    excess = r["misses"]["total"] - ceiling["misses"]["total"]
    duty_excess = duty["misses"]["total"] - ceiling["misses"]["total"]
    ratio = r["gpu_hours_vs_lower_bound"]
    return {
        "attainment_gap_points": round(gap * 100, 2), "attainment_met": gap <= ATTAINMENT_POINTS + 1e-9,
        "gpu_hours_met": ratio is not None and ratio <= GPU_HOURS_FACTOR,
        "excess_misses": excess, "duty_excess_misses": duty_excess,
        "misses_met": excess <= MISSES_SHARE * max(duty_excess, 0) + 1e-9,
    }


def cell(args: tuple[str, str, float, int, str]) -> dict[str, Any]:
    stack, trace_name, k, max_evals, workdir = args
    t0 = time.monotonic()
    shipped = load_stack_file(ROOT / "stacks" / f"Pulumi.{stack}.yaml")
    model = primary_model(shipped)
    trace = TraceTraffic(path=trace_path(trace_name, Path(workdir)), compress=k)
    spec = untuned_spec(shipped, model, trace)
    bench = TraceBench(spec, model, trace, seed=0)
    ceiling, duty = bench.run_ceiling(spec), bench.run_duty_cycle(spec)
    out = tune(spec, model, trace, seed=0, max_evals=max_evals, search_when_limited=True, bench=bench, ceiling=ceiling,
               duty=duty, tuned_on=f"gpuscale tune --trace {trace.path.name} --compress {k:g} --seed 0")
    assert out.after is not None and out.search is not None
    rec: dict[str, Any] = {
        "stack": stack, "model": model, "trace": trace_name, "compress": k, "requests": len(bench.arrivals),
        "servable": int(bench.servable.sum()), "limits_carry": out.limits.carries,
        "limits_message": None if out.limits.carries else out.limits.message(model),
        "ceiling": summary(ceiling), "duty_cycle": summary(duty), "untuned": summary(out.before),
        "tuned": summary(out.after), "tuned_values": out.search.best.model_dump(mode="json"),
        "search_evaluations": out.search.evaluations, "seconds": round(time.monotonic() - t0, 1),
    }
    for name in ("untuned", "tuned"):
        rec[name]["goals"] = goals(rec[name], rec["ceiling"], rec["duty_cycle"])
    return rec


DOCS = ROOT / "docs" / "simulator.md"
BEGIN, END = "<!-- goal-table:begin (bench/goal_table.py --docs) -->", "<!-- goal-table:end -->"


def markdown(path: Path) -> str:
    """The table as the plan shows it (one template, ``plan_goal_table.md.j2``)."""
    return goal_table_markdown(load_goal_table(path))


def write_docs(path: Path) -> None:
    """Replace the generated table between the markers of ``docs/simulator.md``."""
    text = DOCS.read_text()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    DOCS.write_text(f"{head}{BEGIN}\n{markdown(path)}{END}{tail}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stacks", default="dev,staging,prod")
    ap.add_argument("--traces", default="code,conv,long")
    ap.add_argument("--compress", default="1,2,3,4,5")
    ap.add_argument("--max-evals", type=int, default=40)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", type=Path, default=ROOT / "bench" / "results" / "goal_table.json")
    ap.add_argument("--markdown-only", action="store_true", help="print the table of --json; simulate nothing")
    ap.add_argument("--docs", action="store_true", help="with --markdown-only: write the table into docs/simulator.md")
    args = ap.parse_args()
    if args.markdown_only:
        if args.docs:
            write_docs(args.json)
        print(markdown(args.json))
        return
    if not TRACES.is_dir():
        sys.exit(f"{TRACES} not found: the Azure traces live in ../shared/traces")
    with tempfile.TemporaryDirectory() as workdir:
        jobs = [
            (s, t, float(k), args.max_evals, workdir)
            for s in args.stacks.split(",") for t in args.traces.split(",") for k in args.compress.split(",")
        ]
        trace_path("long", Path(workdir))  # written once, before the workers read it
        t0 = time.monotonic()
        args.json.parent.mkdir(parents=True, exist_ok=True)
        records: list[dict[str, Any]] = []
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            for rec in pool.map(cell, jobs):
                records.append(rec)
                # written after every cell, so an interrupted run keeps what it measured (the file says how many)
                args.json.write_text(json.dumps({
                    "cells": records, "planned_cells": len(jobs), "max_evals": args.max_evals,
                    "seconds": round(time.monotonic() - t0, 1),
                }, indent=1) + "\n")
                print(f"{rec['stack']} {rec['trace']} x{rec['compress']:g}: {rec['seconds']:.0f} s", file=sys.stderr, flush=True)
    print(markdown(args.json))
    print(f"{len(records)} cells in {time.monotonic() - t0:.0f} s; wrote {args.json}")


if __name__ == "__main__":
    main()
