"""``gpuscale workload``: derive a stack file's ``workload:`` section from a request trace and print it as YAML."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap

from gpuscale.cli.common import fail, positive_finite
from gpuscale.cli.simulate import Replay
from gpuscale.sim import traffic
from gpuscale.sim.traffic import TraceTraffic
from gpuscale.spec.workload import WorkloadSpec
from gpuscale.tune import trace_stats

TraceArg = Annotated[
    Path,
    typer.Option("--trace", help="Request trace: *_norm.csv (arrival_s,input_tokens,output_tokens[,prefix_ids]) or the "
                 "Azure 2023 CSV.", dir_okay=False, show_default=False),
]


def workload_yaml(w: WorkloadSpec, prof: trace_stats.TraceProfile, source: str) -> str:
    """The ``workload:`` block with a comment saying where each figure comes from."""
    def flow(d: dict[str, float]) -> CommentedMap:
        m = CommentedMap(d)
        m.fa.set_flow_style()
        return m

    body = CommentedMap()
    body["base_rps"] = w.base_rps
    body["peak_rps"] = w.peak_rps
    body["peak_hours_per_day"] = w.peak_hours_per_day
    body["prompt_tokens"] = flow({"mean": w.prompt_tokens.mean, "p99": w.prompt_tokens.p99})
    body["output_tokens"] = flow({"mean": w.output_tokens.mean, "p99": w.output_tokens.p99})
    if w.burst.per_hour > 0:
        body["burst"] = flow({"multiplier": w.burst.multiplier, "duration_s": w.burst.duration_s, "per_hour": w.burst.per_hour})
    doc = CommentedMap(workload=body)
    hours = prof.span_s / 3600.0
    doc.yaml_set_start_comment(
        f"derived by gpuscale workload from {source}: {prof.requests:,} requests over {hours:.2f} h"
        + (f" (compressed x{prof.compress:g})" if prof.compress != 1 else "") + "\n"
        "base/peak: 10th percentile and maximum of 5-minute rates; peak hours: share of 5-minute windows above their\n"
        "midpoint x 24" + (" (the trace is shorter than a day)" if hours < 24 else "") + "; bursts: 15 s windows at 1.5x or "
        "more\nthe 5 minutes before them" + ("" if prof.bursts.count else " (none found)") + "; tokens: mean and 99th percentile"
        + ("\ndaily pattern: yes (gpuscale tune derives warm-up windows from it)" if prof.daily_pattern else "")
    )
    y = YAML()
    y.width = 4096
    y.indent(mapping=2, sequence=4, offset=2)
    out = io.StringIO()
    y.dump(doc, out)
    return out.getvalue()


def workload(
    trace: TraceArg,
    compress: Annotated[
        float, typer.Option("--compress", help="Divide arrival times by this factor (> 0) before measuring.",
                            callback=positive_finite)
    ] = 1.0,
    replay: Annotated[
        Replay, typer.Option("--replay", help="Bucketed traces: batch (each bucket at once) or spread (uniform within it, seeded).")
    ] = Replay.spread,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of the spread replay (same seed, same figures).")] = 0,
) -> None:
    """Derive the workload section (base/peak rps, peak hours, prompt and output sizes, bursts) from a trace and print
    it as stack-file YAML, to paste under a model."""
    # a TraceError (an unreadable trace, one without requests) is a Refusal: exit 2 (cli.main.Command)
    spec = TraceTraffic(path=trace, compress=compress, replay=replay.value)
    arrivals = traffic.generate(spec, seed, None)
    prof = trace_stats.profile(arrivals, compress)
    try:
        w = trace_stats.workload_of(prof)
    except ValidationError as exc:  # statistics the workload section cannot hold (it bounds every field)
        fail([str(exc)])
    sys.stdout.write(workload_yaml(w, prof, trace.name))
