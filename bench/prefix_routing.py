"""Prefix-aware routing, measured: the ceiling's misses on the long-prompt trace with prefix ids, per prefill routing.

Usage (from the repository root): ``.venv/bin/python bench/prefix_routing.py [--compress 1,1.5,2,2.5] [--json PATH]``.

The trace is ``bench/long_prompt_trace.py`` (seed 0): the same requests without prefix ids, and with the ids of chat
conversations over one system prompt. Each runs on prod's disaggregated 70B under the ceiling (every role at its
maximum, so what is left is the routing and the replicas' own work), with the prefill pick:

* ``cache-aware`` (what the simulator runs for the emitted P/D router): vLLM Router's ``cache_aware`` rule as its
  source computes it (request counts; the longest cached prefix when more than half the prompt matches, unless the
  loads are more than 32 requests and 1.1x apart; ``gpuscale.sim.router``);
* ``cache-aware-work``: the named alternative the router does not offer, the fewest scheduler steps to the replica's
  prefill backlog plus the request's uncached tokens there (the simulator's pick before the router's rule was modelled);
* ``least-load``: fewest outstanding requests, no cache awareness.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import long_prompt_trace  # noqa: E402
from bench.docs_block import render_only, write_block  # noqa: E402
from gpuscale.sim import traffic  # noqa: E402
from gpuscale.sim.runner import servable_of  # noqa: E402
from gpuscale.sim.scenarios import build_scenario  # noqa: E402
from gpuscale.sim.simulation import Simulation  # noqa: E402
from gpuscale.stackfile import load_stack  # noqa: E402

ROUTINGS = ("cache-aware", "cache-aware-work", "least-load")
BEGIN, END = "<!-- prefix-routing:begin (bench/prefix_routing.py --docs) -->", "<!-- prefix-routing:end -->"


def markdown(doc: dict[str, Any]) -> str:
    """Misses of the ceiling per compression and prefill pick (hit rate, TTFT p99), and the work pick's difference."""
    lines = ["| compress | no prefix ids | " + " | ".join(ROUTINGS) + " | work pick - router's pick |",
             "|---|---:|" + "---:|" * (len(ROUTINGS) + 1)]
    for row in doc["rows"]:
        cells = [f"x{row['compress']:g}", str(row["no_prefix_ids"]["misses"])]
        for r in ROUTINGS:
            c = row[r]
            cells.append(f"{c['misses']} (hit {c['prefix_hit_rate']:.3f}, TTFT p99 {c['ttft_p99_s']:.2f} s)")
        cells.append(f"{row['cache-aware-work']['misses'] - row['cache-aware']['misses']:+d}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_docs(doc: dict[str, Any]) -> None:
    """Replace the table between the markers of ``docs/simulator.md``."""
    write_block(BEGIN, END, markdown(doc))


def ceiling(path: Path, compress: float, routing: str | None) -> dict[str, Any]:
    spec = load_stack("prod", ROOT / "stacks" / "Pulumi.prod.yaml")
    sc = build_scenario("trace", spec, trace=traffic.TraceTraffic(path=path, compress=compress))
    setup = sc.setup if routing is None else sc.setup.model_copy(update={"prefill_routing": routing})
    arrivals = traffic.generate(sc.traffic, 0, setup.duration_s)
    v = next(v for v in sc.variants if v.name == "ceiling")
    r = Simulation(setup, v, arrivals, 0, servable_of(setup, arrivals)).run()
    return {"misses": r.misses.total, "queueing_misses": r.misses.queueing, "slo_attainment_servable": r.slo_attainment_servable,
            "ttft_p99_s": r.ttft_p99_s, "prefix_hit_rate": r.prefix_hit_rate, "requests": len(arrivals)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compress", default="1,1.5,2,2.5")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--docs", action="store_true", help="write the table into docs/simulator.md")
    ap.add_argument("--markdown-only", action="store_true", help="render --json; simulate nothing")
    args = ap.parse_args()
    if args.markdown_only:
        render_only(args.json, markdown, BEGIN, END, args.docs)
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        plain = long_prompt_trace.write(Path(tmp) / "long.csv", seed=0)
        ids = long_prompt_trace.write(Path(tmp) / "long_prefix.csv", seed=0, prefix_ids=True)
        for k in (float(x) for x in args.compress.split(",")):
            row: dict[str, Any] = {"compress": k, "no_prefix_ids": ceiling(plain, k, None)}
            for routing in ROUTINGS:
                row[routing] = ceiling(ids, k, routing)
            rows.append(row)
            print(f"x{k:g}: misses without ids {row['no_prefix_ids']['misses']}, with ids "
                  + ", ".join(f"{r} {row[r]['misses']} (hit {row[r]['prefix_hit_rate']:.3f})" for r in ROUTINGS), flush=True)
    doc = {"stack": "prod", "policy": "ceiling", "trace": "long_prompt_trace seed 0", "rows": rows}
    if args.json is not None:
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    if args.docs:
        write_docs(doc)


if __name__ == "__main__":
    main()
