"""The goals of issue 27, measured: every shipped stack x {Azure code, Azure conversation, long prompts} x compression
x replay (bucketed traces under ``batch`` and ``spread``; exact timestamps once, as ``exact``), warm-started.

For each cell (the stack's plan model, i.e. its first critical model or else its first):

* the stack with its ``workload:`` section derived from the trace (``gpuscale workload``; a p99 longer than the model's
  context is cut to it, and a peak beyond what the limits carry is cut to what they carry, as ``gpuscale validate``
  demands) and every autoscaling value ``gpuscale tune`` would set left to sizing's defaults (the stack's own
  ``min_replicas``/``max_replicas``, backend and schedules kept);
* when even the ceiling of those limits misses the SLO's goodput target, the cell is **re-run with the limits ``gpuscale
  tune`` recommends** (``limits.with_raised_limits``: the quotas, pool limit and maxima its message names), so every
  cell compares policies rather than limits; the cell records what was raised;
* **whole trace**, warm-started (``--warmup-s``, default 600 s of the trace's own start replayed unscored): the ceiling,
  the best fixed allocation in hindsight, the duty-cycle and queue-depth HPAs, and gpuscale **untuned**;
* **held out** (``--holdout``, default 0.5): ``gpuscale tune --holdout`` fits on the first part and both the untuned
  and the tuned policy are scored on the rest, warm-started with the traffic before it, beside the same references on
  that part;
* the goals of ``gpuscale.tune.goals`` (A attainment, G GPU-hours vs best fixed, P Pareto vs both HPAs, M misses) for
  the untuned run on the whole trace and the tuned run on the held-out part, and each run's scaling decisions (a run
  with none is a fixed allocation, and says so).

Both best fixed allocations are recorded: ``best_fixed`` within the spec's limits (no role below its warm minimum; the
G goal's reference) and ``best_fixed_unconstrained`` (from one replica per role), with their counts.

Usage (from the repository root; needs ../shared/traces):

    .venv/bin/python bench/goal_table.py [--stacks dev,staging,prod] [--traces code,conv,long] [--compress 1,2]
        [--replays batch,spread] [--warmup-s 600] [--holdout 0.5] [--max-evals 12] [--jobs 2] [--fresh]
        [--json bench/results/goal_table.json]

Writes the JSON after every cell (one record per cell, in the planned order; ``gpuscale plan --goal-table`` renders
the plan stack's rows) and prints the table as Markdown. **Resumable**: each cell carries a key (a hash of every
``gpuscale/`` source, the stack files, this bench and its trace generator, plus the cell's arguments); a cell the
``--json`` file already holds under the same key is kept, not run again (``--fresh`` runs them all), so an interrupted
run continues where it stopped and a run at unchanged code finishes at once. Progress goes to stderr: each step of a
cell, and per finished cell its seconds, its simulations and an estimate of the time left; ``--markdown-only`` prints the table of an existing JSON without simulating
(``--docs`` writes it, and why each goal is missed per cell, between the markers of ``docs/simulator.md``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import long_prompt_trace  # noqa: E402
from gpuscale.plan.goal_table import load_goal_table  # noqa: E402
from gpuscale.plan.render import goal_table_docs, goal_table_markdown  # noqa: E402
from gpuscale.sim.metrics import PolicyResult  # noqa: E402
from gpuscale.sim.scenarios import primary_model  # noqa: E402
from gpuscale.sim.traffic import TraceTraffic, generate, trace_granularity_s  # noqa: E402
from gpuscale.sizing import size_model  # noqa: E402
from gpuscale.spec.platform import PlatformSpec  # noqa: E402
from gpuscale.stackfile import load_stack_file  # noqa: E402
from gpuscale.tune import trace_stats  # noqa: E402
from gpuscale.tune.evaluate import TraceBench  # noqa: E402
from gpuscale.tune.goals import check as goal_checks  # noqa: E402
from gpuscale.tune.limits import check_limits, raises_for, with_raised_limits  # noqa: E402
from gpuscale.tune.tuner import decisions, is_fixed_allocation, tune  # noqa: E402

TRACES = ROOT.parent / "shared" / "traces"
TUNED_KEYS = ("target_utilisation", "burst_mode", "slo_guard", "scale_down_stabilization_s", "warm_schedule", "metric", "target")


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
        "replicas_max": r.replicas_max, "replicas_mean": r.replicas_mean, "decisions": decisions(r),
        "fixed_allocation": is_fixed_allocation(r),
    }


def references(
    bench: TraceBench, spec: PlatformSpec, ceiling: PolicyResult | None = None, duty: PolicyResult | None = None,
) -> tuple[dict[str, PolicyResult], dict[str, dict[str, int]]]:
    """The ceiling, both best fixed allocations (within the spec's limits and unconstrained), and both HPAs on the
    bench's part; ``ceiling`` and ``duty`` reuse runs the caller already has. Returns the runs and the fixed counts."""
    ceiling = ceiling or bench.run_ceiling(spec)
    fixed = bench.run_best_fixed(spec, ceiling)
    runs = {"ceiling": ceiling, "best_fixed": fixed.result, "best_fixed_unconstrained": fixed.unconstrained,
            "duty_cycle": duty or bench.run_duty_cycle(spec), "queue_depth": bench.run_queue_depth(spec)}
    return runs, {"best_fixed_counts": fixed.counts, "best_fixed_unconstrained_counts": fixed.unconstrained_counts}


def scored(runs: dict[str, PolicyResult], policy: str) -> dict[str, Any]:
    out = summary(runs[policy])
    out["goals"] = goal_checks(runs[policy], ceiling=runs["ceiling"], best_fixed=runs["best_fixed"],
                               duty=runs["duty_cycle"], queue_depth=runs["queue_depth"],
                               best_fixed_unconstrained=runs["best_fixed_unconstrained"]).model_dump()
    return out


def carried_spec(
    shipped: PlatformSpec, model: str, trace: TraceTraffic, warmup_s: float,
) -> tuple[PlatformSpec, bool, str | None, list[str], PolicyResult | None, int]:
    """The untuned stack whose limits carry the trace: as shipped when they do, else with what ``tune`` recommends
    raised (and the workload derived again within the new limits). Returns (spec, carried as shipped, tune's message,
    the raises applied, the whole trace's ceiling run when it is the returned spec's, for reuse, and the simulations
    the check ran)."""
    spec = untuned_spec(shipped, model, trace)
    bench = TraceBench(spec, model, trace, seed=0, warmup_s=warmup_s)
    ceiling = bench.run_ceiling(spec)
    verdict = check_limits(bench, spec, ceiling)
    if verdict.carries or verdict.needed is None:
        return spec, verdict.carries, None if verdict.carries else verdict.message(model), [], ceiling, bench.runs
    raised = with_raised_limits(shipped, model, verdict.needed)
    lines = [r.line for r in raises_for(shipped, model, verdict.needed)]
    return untuned_spec(raised, model, trace), False, verdict.message(model), lines, None, bench.runs


Cell = tuple[str, str, float, str, int, str, float, float]
"""(stack, trace, compression, replay, tune's evaluations, work directory, warm-up seconds, held-out share)."""


def cell(args: Cell) -> dict[str, Any]:
    stack, trace_name, k, replay, max_evals, workdir, warmup_s, holdout = args
    t0 = time.monotonic()
    name = f"{stack} {trace_name} x{k:g} {replay}"

    def say(what: str) -> None:
        print(f"  {name}: {what} ({time.monotonic() - t0:.0f} s)", file=sys.stderr, flush=True)

    shipped = load_stack_file(ROOT / "stacks" / f"Pulumi.{stack}.yaml")
    model = primary_model(shipped)
    trace = TraceTraffic(path=trace_path(trace_name, Path(workdir)), compress=k,
                         replay="batch" if replay == "batch" else "spread")
    spec, carried, message, raised, ceiling, checked = carried_spec(shipped, model, trace, warmup_s)
    say("limits " + ("carry the trace" if carried else "raised") + "; references on the whole trace")
    whole = TraceBench(spec, model, trace, seed=0, warmup_s=warmup_s)
    runs, fixed_counts = references(whole, spec, ceiling)
    runs["untuned"] = whole.run_gpuscale(spec)
    say(f"tuning on the fit part (at most {max_evals} simulations)")
    out = tune(spec, model, trace, seed=0, max_evals=max_evals, search_when_limited=True, holdout=holdout,
               warmup_s=warmup_s, tuned_on=f"gpuscale tune --trace {trace.path.name} --compress {k:g} --holdout {holdout:g}")
    assert out.after is not None and out.search is not None and out.held_out is not None
    h = out.held_out
    say("references on the held-out part")
    test = TraceBench(spec, model, trace, seed=0, warmup_s=warmup_s, part=(h.start_s, whole.duration_s))
    held, held_counts = references(test, spec, h.ceiling, h.duty)
    held |= {"untuned": h.before, "tuned": h.after}
    rec: dict[str, Any] = {
        "stack": stack, "model": model, "trace": trace_name, "compress": k, "replay": replay, "warmup_s": warmup_s,
        "requests": len(whole.arrivals), "servable": whole.scored_servable, "limits_carry": carried,
        "limits_message": message, "limits_raised": raised,
        "whole": {
            **{n: summary(r) for n, r in runs.items() if n != "untuned"}, "untuned": scored(runs, "untuned"),
            **fixed_counts,
        },
        "held_out": {
            "fraction": holdout, "start_s": round(h.start_s, 1), "requests": len(test.arrivals),
            **{n: summary(r) for n, r in held.items() if n not in ("untuned", "tuned")},
            "untuned": scored(held, "untuned"), "tuned": scored(held, "tuned"), **held_counts,
        },
        "tuned_values": out.search.best.model_dump(mode="json"), "search_evaluations": out.search.evaluations,
        "search_moves": [
            {"coordinate": c, "value": v if isinstance(v, int | float | str | bool) or v is None else str(v),
             "met": sc.met, "gpu_hours": round(sc.gpu_hours, 3)}
            for c, v, sc in out.search.history
        ],
        "simulations": checked + whole.runs + test.runs + out.simulations,
        "seconds": round(time.monotonic() - t0, 1),
    }
    return rec


def code_hash() -> str:
    """What the cells measure: every gpuscale/ source but the plan's (``gpuscale/plan/`` renders a table, never
    measures one), this bench and its trace generator, and the stack files; a change to any of them makes every cell
    stale."""
    h = hashlib.sha256()
    plan = ROOT / "gpuscale" / "plan"
    sources = [f for f in (ROOT / "gpuscale").rglob("*.py") if plan not in f.parents]
    files = sorted([*sources, *(ROOT / "stacks").glob("Pulumi.*.yaml"),
                    ROOT / "bench" / "goal_table.py", ROOT / "bench" / "long_prompt_trace.py"])
    for f in files:
        h.update(str(f.relative_to(ROOT)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def cell_key(code: str, job: Cell) -> str:
    """A cell's identity: the code's hash and every argument but the work directory, and the trace file's size (the
    shared traces are read in place)."""
    stack, trace_name, k, replay, max_evals, _, warmup_s, holdout = job
    src = TRACES / f"azure2023_{trace_name}_norm.csv"
    size = src.stat().st_size if src.is_file() else 0
    return f"{code}:{stack}:{trace_name}:{size}:{k:g}:{replay}:{max_evals}:{warmup_s:g}:{holdout:g}"


def _cells_of(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    cells = data.get("cells", []) if isinstance(data, dict) else []
    return [c for c in cells if isinstance(c, dict)]


def earlier_cells(path: Path) -> dict[str, dict[str, Any]]:
    """Cells of an earlier run at ``path`` by key (none when there is no such file or it is not a goal table)."""
    return {c["key"]: c for c in _cells_of(path) if isinstance(c.get("key"), str)}


def longest_first(todo: list[tuple[str, Cell]], path: Path) -> list[tuple[str, Cell]]:
    """``todo`` with the cells that took longest in the earlier run at ``path`` (at any code) first, so the pool's
    last minutes are not one long cell alone; cells it does not hold keep their order, after them."""
    took = {(c.get("stack"), c.get("trace"), c.get("compress"), c.get("replay")): float(c.get("seconds", 0.0))
            for c in _cells_of(path)}
    return sorted(todo, key=lambda kj: -took.get((kj[1][0], kj[1][1], kj[1][2], kj[1][3]), 0.0))


DOCS = ROOT / "docs" / "simulator.md"
BEGIN, END = "<!-- goal-table:begin (bench/goal_table.py --docs) -->", "<!-- goal-table:end -->"


def markdown(path: Path) -> str:
    """The table as the plan shows it (one template, ``plan_goal_table.md.j2``)."""
    return goal_table_markdown(load_goal_table(path))


def write_docs(path: Path) -> None:
    """Replace what is between the markers of ``docs/simulator.md``: the table and why each goal is missed, both
    rendered from the JSON (``goal_table_docs``)."""
    text = DOCS.read_text()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    DOCS.write_text(f"{head}{BEGIN}\n{goal_table_docs(load_goal_table(path))}{END}{tail}")


def bucketed(name: str, workdir: Path) -> bool:
    """Whether the trace's arrivals sit on a grid (then batch and spread replays differ)."""
    return trace_granularity_s(TraceTraffic(path=trace_path(name, workdir))) is not None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stacks", default="dev,staging,prod")
    ap.add_argument("--traces", default="code,conv,long")
    ap.add_argument("--compress", default="1,2")
    ap.add_argument("--replays", default="batch,spread", help="replays of bucketed traces (exact ones run once)")
    ap.add_argument("--warmup-s", type=float, default=600.0)
    ap.add_argument("--holdout", type=float, default=0.5)
    ap.add_argument("--max-evals", type=int, default=12, help="simulations tune's search may run per cell")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", type=Path, default=ROOT / "bench" / "results" / "goal_table.json")
    ap.add_argument("--fresh", action="store_true", help="run every cell, even those --json holds at the same code")
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
    code = code_hash()
    earlier = {} if args.fresh else earlier_cells(args.json)
    with tempfile.TemporaryDirectory() as workdir:
        trace_path("long", Path(workdir))  # written once, before the workers read it
        traces = args.traces.split(",")
        replays = {t: args.replays.split(",") if bucketed(t, Path(workdir)) else ["exact"] for t in traces}
        jobs: list[Cell] = [
            (s, t, float(k), r, args.max_evals, workdir, args.warmup_s, args.holdout)
            for s in args.stacks.split(",") for t in traces for k in args.compress.split(",") for r in replays[t]
        ]
        table = Table(args.json, code, jobs, {"max_evals": args.max_evals, "warmup_s": args.warmup_s, "holdout": args.holdout})
        table.done = {key: earlier[key] for key in table.keys if key in earlier}
        todo = longest_first([(key, j) for key, j in zip(table.keys, jobs, strict=True) if key not in table.done], args.json)
        print(f"{len(jobs)} cells planned at code {code}: {len(table.done)} already measured in {args.json}, {len(todo)} "
              f"to run with {args.jobs} job{'s' if args.jobs != 1 else ''}", file=sys.stderr, flush=True)
        args.json.parent.mkdir(parents=True, exist_ok=True)
        failed = run_cells(table, todo, args.jobs)
    print(markdown(args.json))
    print(f"{len(table.done)} of {len(jobs)} cells ({len(todo) - len(failed)} run now) in "
          f"{time.monotonic() - table.t0:.0f} s; wrote {args.json}")
    if failed:
        sys.exit(f"{len(failed)} cell(s) failed (a rerun retries them):\n" + "\n".join(failed))


class Table:
    """The JSON being written: the planned cells' keys, the cells measured so far, and the run's settings."""

    def __init__(self, path: Path, code: str, jobs: list[Cell], settings: dict[str, Any]) -> None:
        self.path, self.code, self.settings = path, code, settings
        self.keys = [cell_key(code, j) for j in jobs]
        self.done: dict[str, dict[str, Any]] = {}
        self.t0 = time.monotonic()

    def write(self) -> None:
        """The cells measured so far in the planned order, written whole (a temporary file renamed over the JSON), so
        an interrupted run keeps what it measured and a rerun resumes from it."""
        records = [self.done[key] for key in self.keys if key in self.done]
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        tmp.write_text(json.dumps({
            "cells": records, "planned_cells": len(self.keys), **self.settings, "code": self.code,
            "seconds": round(sum(float(c["seconds"]) for c in records), 1),
            "wall_seconds_last_run": round(time.monotonic() - self.t0, 1),
        }, indent=1) + "\n")
        tmp.replace(self.path)


def run_cells(table: Table, todo: list[tuple[str, Cell]], jobs: int) -> list[str]:
    """Run ``todo`` in a pool of ``jobs`` processes, writing the table after each cell; returns the cells that failed
    (each named on stderr as it fails; the others still run)."""
    failed: list[str] = []
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures: dict[Future[dict[str, Any]], str] = {pool.submit(cell, j): key for key, j in todo}
        for n, fut in enumerate(as_completed(futures), 1):
            try:
                rec = fut.result()
            except Exception as exc:  # a cell's bug must not lose the others: named here, and the run exits 1
                failed.append(f"{futures[fut]}: {type(exc).__name__}: {exc}")
                print(f"cell {futures[fut]} failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
                continue
            rec["key"] = futures[fut]
            table.done[rec["key"]] = rec
            table.write()
            eta = (time.monotonic() - table.t0) / n * (len(todo) - n)  # cells finish at about this rate, pool full
            print(f"[{len(table.done)}/{len(table.keys)}] {rec['stack']} {rec['trace']} x{rec['compress']:g} "
                  f"{rec['replay']}: {rec['seconds']:.0f} s, {rec['simulations']} simulations; about {eta:.0f} s left",
                  file=sys.stderr, flush=True)
    if not todo:
        table.write()
    return failed


if __name__ == "__main__":
    main()
