"""A trace of our own: long prompts and bucketed arrivals, generated (never committed).

The issue behind ``gpuscale tune`` was a production trace whose prompts were about ten times Azure's and whose arrivals
were logged in buckets: a decode target in output tokens/s and a prefill target sized for short prompts both fail on
it. This generator makes such a trace, seeded, in the ``*_norm.csv`` format:

* one hour; the rate ramps from 1.2 to 2.4 requests/s and back, with six bursts of 45-150 s at 2.5-4x (shorter than a
  cold start);
* prompts lognormal with mean 9,000 and p99 28,000 tokens (Azure conversation: 1,155 / 4,142), outputs mean 250 and
  p99 1,200;
* arrivals recorded in 2 s buckets (every request of a bucket has the bucket's timestamp);
* with ``--prefix-ids``, the same requests carry prefix ids as a chat service's would: every conversation opens with
  one shared 2,000-token system prompt, and about half the requests are the next turn of an earlier conversation
  (asked at least 20 s after it, its prompt holding that turn's prompt and answer), whose prompt blocks they share.
  Block ids name their whole prefix (a fresh id wherever two prompts part), as vLLM's chained block hashes do.

Usage: ``python bench/long_prompt_trace.py OUT.csv [--seed N] [--prefix-ids]``; ``write(path, seed, prefix_ids=)``
from code.
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
BLOCK_TOKENS = 16
"""vLLM's KV block size, the unit of prefix ids."""
SYSTEM_TOKENS = 2_000
FOLLOW_UP = 0.5
"""Share of requests that continue an earlier conversation (when one fits: shorter than the new prompt)."""
THINK_S = 20.0
"""A follow-up is asked at least this long after the turn it continues."""
RECENT = 64
"""A follow-up continues one of this many most recent conversations."""


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


def conversation_prefix_ids(requests: list[tuple[float, int, int]], seed: int = 0) -> list[list[int]]:
    """Each request's prompt block ids (one per full block): the system prompt's, then the continued turn's prompt
    blocks for a follow-up, then fresh ids."""
    rng = np.random.default_rng([seed, 16])
    system = list(range(SYSTEM_TOKENS // BLOCK_TOKENS))
    fresh = iter(range(1_000_000, 1 << 62))
    turns: list[tuple[float, int, list[int]]] = []  # (arrival, prompt + output tokens, prompt block ids) per conversation
    out: list[list[int]] = []
    for arrival, prompt, output in requests:
        blocks = prompt // BLOCK_TOKENS
        fits = [i for i in range(max(0, len(turns) - RECENT), len(turns))
                if turns[i][0] <= arrival - THINK_S and turns[i][1] <= prompt]
        if fits and rng.uniform() < FOLLOW_UP:
            i = fits[int(rng.integers(len(fits)))]
            shared = turns[i][2]
            del turns[i]  # the conversation moves on: its next turn continues this one
        else:
            shared = system
        ids = shared[:blocks] + [next(fresh) for _ in range(blocks - min(blocks, len(shared)))]
        turns.append((arrival, prompt + output, ids))
        out.append(ids)
    return out


def write(path: Path, seed: int = 0, *, prefix_ids: bool = False) -> Path:
    reqs = rows(seed)
    if prefix_ids:
        ids = conversation_prefix_ids(reqs, seed)
        lines = ["arrival_s,input_tokens,output_tokens,prefix_ids"] + [
            f"{a:.1f},{p},{o},{' '.join(map(str, b))}" for (a, p, o), b in zip(reqs, ids, strict=True)]
    else:
        lines = ["arrival_s,input_tokens,output_tokens"] + [f"{a:.1f},{p},{o}" for a, p, o in reqs]
    path.write_text("\n".join(lines) + "\n")
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prefix-ids", action="store_true", help="add a prefix_ids column (conversations, system prompt)")
    args = ap.parse_args()
    print(f"wrote {write(args.out, args.seed, prefix_ids=args.prefix_ids)} ({len(rows(args.seed)):,} requests)")


if __name__ == "__main__":
    main()
