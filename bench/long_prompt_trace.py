"""A trace of our own: long prompts and bucketed arrivals, generated (never committed).

The issue behind ``gpuscale tune`` was a production trace whose prompts were about ten times Azure's and whose arrivals
were logged in buckets: a decode target in output tokens/s and a prefill target sized for short prompts both fail on
it. This generator makes such a trace, seeded, in the ``*_norm.csv`` format:

* one hour; the rate ramps from 1.2 to 2.4 requests/s and back, with six bursts of 45-150 s at 2.5-4x (shorter than a
  cold start);
* prompts lognormal with mean 9,000 and p99 28,000 tokens (Azure conversation: 1,155 / 4,142), outputs mean 250 and
  p99 1,200;
* arrivals recorded in 2 s buckets (every request of a bucket has the bucket's timestamp).

Usage: ``python bench/long_prompt_trace.py OUT.csv [--seed N]``; ``write(path, seed)`` from code.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from gpuscale.sim.traffic import RatePoint, rate_at, sample_tokens
from gpuscale.spec.workload import TokenDistribution

SPAN_S = 3600.0
BUCKET_S = 2.0
PROFILE = [RatePoint(t_s=0, rps=1.2), RatePoint(t_s=900, rps=1.2), RatePoint(t_s=1500, rps=2.4),
           RatePoint(t_s=2700, rps=2.4), RatePoint(t_s=3300, rps=1.2)]
BURSTS = ((300.0, 60.0, 3.0), (1000.0, 120.0, 2.5), (1650.0, 45.0, 4.0), (2100.0, 150.0, 2.5), (2600.0, 90.0, 3.0),
          (3150.0, 60.0, 4.0))
"""(start, duration, multiplier) of each burst."""
PROMPT = TokenDistribution(mean=9000, p99=28000)
OUTPUT = TokenDistribution(mean=250, p99=1200)
MAX_PROMPT, MAX_OUTPUT = 30_000, 2_000


def rows(seed: int = 0) -> list[tuple[float, int, int]]:
    rng = np.random.default_rng([seed, 15])
    peak = max(p.rps for p in PROFILE) * max(m for _, _, m in BURSTS)
    n = int(rng.poisson(peak * SPAN_S))
    t = np.sort(rng.uniform(0.0, SPAN_S, n))
    rate = rate_at(PROFILE, t)
    for start, dur, mult in BURSTS:
        rate[(t >= start) & (t < start + dur)] *= mult
    t = t[rng.uniform(0.0, peak, n) < rate]
    t = np.floor(t / BUCKET_S) * BUCKET_S
    prompts = sample_tokens(rng, PROMPT, t.size, MAX_PROMPT)
    outputs = sample_tokens(rng, OUTPUT, t.size, MAX_OUTPUT)
    return [(float(a), int(p), int(o)) for a, p, o in zip(t, prompts, outputs, strict=True)]


def write(path: Path, seed: int = 0) -> Path:
    lines = ["arrival_s,input_tokens,output_tokens"] + [f"{a:.1f},{p},{o}" for a, p, o in rows(seed)]
    path.write_text("\n".join(lines) + "\n")
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(f"wrote {write(args.out, args.seed)} ({len(rows(args.seed)):,} requests)")


if __name__ == "__main__":
    main()
