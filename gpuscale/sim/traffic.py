"""Request arrivals: synthetic (Poisson base, ramps, bursts, huge prompts) and replay of real traces.

Synthetic arrivals are a non-homogeneous Poisson process drawn by thinning: candidates at the highest rate,
each kept with probability ``rate(t) / max rate``. Token counts are lognormal fitted to the spec's mean and p99.
Traces are read in place in either of the two formats of ``../shared/traces`` (README there):
``arrival_s,input_tokens,output_tokens`` (``*_norm.csv``, optionally with a fourth column ``prefix_ids``: the KV
block ids of the prompt's leading blocks, space-separated, for prefix caching) or the upstream Azure 2023
``TIMESTAMP,ContextTokens,GeneratedTokens``. ``compress`` divides arrival times, turning a light one-hour trace
into a scale-out test (Splitwise replays the same traces; record the factor with the results). Every request of a
trace is replayed. A trace whose arrivals sit on a coarse grid (e.g. 3 s buckets) is replayed either as recorded
(``batch``: each bucket at once) or ``spread`` uniformly within its bucket (seeded); the result says which.
"""

from __future__ import annotations

import array
import csv
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import Field, model_validator

from gpuscale.input_files import MIB, InputFileError, open_bounded
from gpuscale.problems import Refusal
from gpuscale.spec.base import INT32_MAX, Spec
from gpuscale.spec.workload import BurstSpec, TokenDistribution

Z99 = 2.3263478740408408
"""Standard-normal 99th percentile."""
NORM_HEADER = ("arrival_s", "input_tokens", "output_tokens")
PREFIX_HEADER = (*NORM_HEADER, "prefix_ids")
BUCKET_MIN_S = 0.1
"""Arrivals on a grid of at least this many seconds, with timestamps shared by several requests, are bucketed."""
BUCKET_JITTER_S = 0.02
"""Timestamps within this of each other (and of their grid point) belong to one bucket: a logger's few ms of jitter."""
BUCKET_GRID_PER_JITTER = 10
"""A grid is at least this many jitters wide (else dense exact arrivals chained within the jitter look like buckets)."""
AZURE_HEADER = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


class TraceError(Refusal):
    """A trace file that cannot be read; the message names the file, the line and the expected format."""


@dataclass(frozen=True)
class Arrivals:
    """Every request of a run, sorted by arrival: three aligned arrays plus a few labelled requests."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    labels: dict[int, str] = field(default_factory=dict)
    """Index -> label of requests whose fate is reported one by one (e.g. the 2 a.m. huge prompt)."""
    timeouts_s: dict[int, float] = field(default_factory=dict)
    """Index -> client timeout overriding the SLO's ``request_timeout_s`` for that request."""
    prefixes: tuple[tuple[int, ...] | None, ...] | None = None
    """Per request, the KV block ids of its prompt's leading blocks (prefix-cache keys); None when the traffic has none."""

    def __len__(self) -> int:
        return int(self.arrival_s.shape[0])

    @property
    def span_s(self) -> float:
        return float(self.arrival_s[-1]) if len(self) else 0.0


class RatePoint(Spec):
    """One corner of a piecewise-linear request rate."""

    t_s: float = Field(ge=0)
    """Seconds after the start of the run."""
    rps: float = Field(ge=0)
    """Requests per second at ``t_s``; linear in between, constant beyond the first and last points."""


class HugePrompt(Spec):
    """One request of a given size at a given time (the 2 a.m. 1M-token prompt)."""

    at_s: float = Field(ge=0)
    """Arrival time, seconds after the start."""
    prompt_tokens: int = Field(gt=0)
    """Prompt length."""
    output_tokens: int = Field(default=64, gt=0)
    """Tokens generated."""
    timeout_s: float | None = Field(default=None, gt=0)
    """This client's timeout to the first token; default the SLO's ``request_timeout_s``."""
    label: str = "huge-prompt"
    """Name the result reports this request under."""


class SyntheticTraffic(Spec):
    """Poisson arrivals at a piecewise-linear rate, with random bursts and optional huge prompts."""

    kind: Literal["synthetic"] = "synthetic"
    profile: list[RatePoint] = Field(min_length=1)
    """Request rate over time."""
    burst: BurstSpec = BurstSpec(per_hour=0.0)
    """Bursts multiply the rate for ``duration_s`` (Poisson, ``per_hour``)."""
    prompt_tokens: TokenDistribution
    """Prompt length distribution (lognormal through mean and p99)."""
    output_tokens: TokenDistribution
    """Output length distribution."""
    max_prompt_tokens: int | None = Field(default=None, gt=0)
    """Clip the lognormal tail (the model's context length)."""
    max_output_tokens: int | None = Field(default=None, gt=0)
    """Clip the output tail."""
    huge_prompts: list[HugePrompt] = Field(default_factory=list)
    """Extra single requests."""

    @model_validator(mode="after")
    def _sorted(self) -> SyntheticTraffic:
        ts = [p.t_s for p in self.profile]
        if ts != sorted(ts):
            raise ValueError(f"profile points must be in time order, got t_s {ts}")
        return self


class TraceTraffic(Spec):
    """Replay of a request trace file."""

    kind: Literal["trace"] = "trace"
    path: Path
    """``*_norm.csv`` or the upstream Azure 2023 CSV."""
    compress: float = Field(default=1.0, gt=0)
    """Divide arrival times by this factor (k = 5-20 turns the 1-hour Azure traces into a scale-out test)."""
    start_s: float = Field(default=0.0, ge=0)
    """Skip the trace before this offset (trace seconds, before compression)."""
    replay: Literal["batch", "spread"] = "spread"
    """Bucketed traces only: ``batch`` replays each bucket's requests at its timestamp, ``spread`` draws them uniformly
    within the bucket (seeded). Traces with exact timestamps replay exactly either way."""


TrafficSpec = Annotated[SyntheticTraffic | TraceTraffic, Field(discriminator="kind")]


def lognormal_params(dist: TokenDistribution) -> tuple[float, float]:
    """(mu, sigma) of the lognormal whose mean and 99th percentile are the distribution's.

    Solves ``ln(p99/mean) = z*sigma - sigma^2/2`` (smaller root); a p99 beyond ~15x the mean has no lognormal
    with that mean, so sigma is capped at z.
    """
    ratio = math.log(dist.p99 / dist.mean)
    disc = Z99 * Z99 - 2.0 * ratio
    sigma = Z99 - math.sqrt(disc) if disc > 0 else Z99
    return math.log(dist.mean) - sigma * sigma / 2.0, sigma


def sample_tokens(rng: np.random.Generator, dist: TokenDistribution, n: int, cap: int | None) -> np.ndarray:
    mu, sigma = lognormal_params(dist)
    x = np.rint(rng.lognormal(mu, sigma, n)) if sigma > 0 else np.full(n, round(dist.mean), dtype=float)
    return np.clip(x, 1, cap if cap is not None else None).astype(np.int64)


def rate_at(profile: list[RatePoint], t: np.ndarray) -> np.ndarray:
    rate: np.ndarray = np.interp(t, [p.t_s for p in profile], [p.rps for p in profile])
    return rate


def burst_windows(rng: np.random.Generator, burst: BurstSpec, duration_s: float) -> list[tuple[float, float]]:
    """Start and end of each burst: a Poisson number of bursts, uniformly placed."""
    if burst.per_hour <= 0 or burst.multiplier <= 1:
        return []
    n = int(rng.poisson(burst.per_hour * duration_s / 3600.0))
    starts = np.sort(rng.uniform(0.0, duration_s, n))
    return [(float(s), float(s) + burst.duration_s) for s in starts]


def _synthetic(spec: SyntheticTraffic, seed: int, duration_s: float) -> Arrivals:
    rng_t = np.random.default_rng([seed, 1])
    rng_tok = np.random.default_rng([seed, 2])
    windows = burst_windows(rng_t, spec.burst, duration_s)
    peak = max(p.rps for p in spec.profile) * (spec.burst.multiplier if windows else 1.0)
    if peak > 0:
        n = int(rng_t.poisson(peak * duration_s))
        t = np.sort(rng_t.uniform(0.0, duration_s, n))
        rate = rate_at(spec.profile, t)
        for s, e in windows:
            lo, hi = np.searchsorted(t, [s, e])
            rate[lo:hi] *= spec.burst.multiplier
        t = t[rng_t.uniform(0.0, peak, n) < rate]
    else:
        t = np.zeros(0)
    prompts = sample_tokens(rng_tok, spec.prompt_tokens, len(t), spec.max_prompt_tokens)
    outputs = sample_tokens(rng_tok, spec.output_tokens, len(t), spec.max_output_tokens)
    if not spec.huge_prompts:
        return Arrivals(t, prompts, outputs)
    extra = [h for h in spec.huge_prompts if h.at_s < duration_s]
    t_all = np.concatenate([t, [h.at_s for h in extra]])
    p_all = np.concatenate([prompts, np.array([h.prompt_tokens for h in extra], dtype=np.int64)])
    o_all = np.concatenate([outputs, np.array([h.output_tokens for h in extra], dtype=np.int64)])
    order = np.argsort(t_all, kind="stable")
    where = {int(old): new for new, old in enumerate(order)}
    labels = {where[len(t) + i]: h.label for i, h in enumerate(extra)}
    timeouts = {where[len(t) + i]: h.timeout_s for i, h in enumerate(extra) if h.timeout_s is not None}
    return Arrivals(t_all[order], p_all[order], o_all[order], labels, timeouts)


def _parse_timestamp(value: str) -> np.datetime64:
    return np.datetime64(value.strip().replace(" ", "T"), "ns")


TRACE_MAX_BYTES = 256 * MIB
"""Largest trace file read (about 10^7 requests; the shared Azure traces are under 1 MiB)."""
TRACE_MAX_SPAN_S = 366 * 86_400.0
"""Longest trace, first to last arrival (as recorded and as replayed): a year."""
TRACE_MAX_TOKENS = INT32_MAX
"""Largest prompt or output token count of a request: the largest ``max_context_tokens`` a stack accepts."""
TRACE_MAX_CELL_CHARS = 131_072
"""Longest cell of a trace row (Python's csv default field limit; a prefix_ids cell of 10^4 block ids fits)."""
REPLAY_MIN_SPAN_S = 10.0
"""Least replayed span ``--compress`` may leave of a longer trace (a few scrape intervals)."""


def load_trace(path: Path) -> Arrivals:
    """Read a trace in either supported format; arrival times start at 0. Raises ``TraceError``.

    Bounded in time and memory by the file (a regular file of at most ``TRACE_MAX_BYTES``, read in one pass into
    compact arrays) and in every value by what is physical: token counts within ``TRACE_MAX_TOKENS``, cells within
    ``TRACE_MAX_CELL_CHARS``, arrivals finite and within ``TRACE_MAX_SPAN_S`` of the first."""
    try:
        raw = open_bounded(path, TRACE_MAX_BYTES, "a trace")
    except InputFileError as exc:
        raise TraceError(f"{path}: cannot read the trace ({exc})") from None
    expected = (
        f"expected the header {','.join(NORM_HEADER)} (optionally ,prefix_ids: space-separated KV block ids) "
        f"or {','.join(AZURE_HEADER)}"
    )
    times, prompts, outputs = array.array("d"), array.array("q"), array.array("q")
    prefixes: list[tuple[int, ...] | None] | None = None
    header: tuple[str, ...] | None = None
    first: np.datetime64 | None = None
    line = 1
    with io.TextIOWrapper(io.BufferedReader(raw), encoding="utf-8", newline="") as fh:
        rows = csv.reader(fh)
        try:
            for row in rows:
                line = rows.line_num
                if header is None:
                    header = tuple(c.strip() for c in row)
                    if header not in (NORM_HEADER, PREFIX_HEADER, AZURE_HEADER):
                        raise TraceError(f"{path}: unknown header {','.join(header)[:200]!r}; {expected}")
                    prefixes = [] if header == PREFIX_HEADER else None
                    continue
                if not row:
                    continue
                try:
                    first = _append_row(row, header, first, times, prompts, outputs, prefixes)
                except (ValueError, OverflowError) as exc:
                    cells = ",".join(row)
                    shown = cells if len(cells) <= 120 else cells[:120] + "..."
                    raise TraceError(f"{path}: line {line}: cannot parse {shown!r} ({exc}); {expected}") from None
        except csv.Error as exc:
            raise TraceError(
                f"{path}: line {rows.line_num}: not a trace row ({exc}; a cell holds at most "
                f"{TRACE_MAX_CELL_CHARS:,} characters)"
            ) from None
        except UnicodeDecodeError:
            raise TraceError(f"{path}: not a text CSV file (not UTF-8 after line {line})") from None
        except InputFileError as exc:
            raise TraceError(f"{path}: cannot read the trace ({exc})") from None
        except OSError as exc:
            raise TraceError(f"{path}: cannot read the trace ({exc.strerror or exc})") from None
    if header is None:
        raise TraceError(f"{path}: empty file; {expected}")
    if not times:
        raise TraceError(f"{path}: no requests after the header")
    t, order = _checked_times(path, np.frombuffer(times, dtype=float), header == NORM_HEADER)
    pre = tuple(prefixes[int(j)] for j in order) if prefixes is not None else None
    p, o = np.frombuffer(prompts, dtype=np.int64)[order], np.frombuffer(outputs, dtype=np.int64)[order]
    # a request always has a prompt and yields at least one token (vLLM's minimum)
    return Arrivals(t, np.maximum(p, 1), np.maximum(o, 1), prefixes=pre)


def _checked_times(path: Path, t: np.ndarray, relative: bool) -> tuple[np.ndarray, np.ndarray]:
    """Arrival times from 0 in arrival order, and that order; finite, in order and within ``TRACE_MAX_SPAN_S``."""
    if not np.all(np.isfinite(t)):
        i = int(np.argmin(np.isfinite(t)))
        raise TraceError(f"{path}: line {i + 2}: arrival time {t[i]:g} is not a finite number")
    _check_arrival_order(path, t, relative)
    order = np.argsort(t, kind="stable")
    t = t[order] - t[order][0]
    if t[-1] > TRACE_MAX_SPAN_S:
        raise TraceError(
            f"{path}: the arrivals span {t[-1]:,.0f} s, more than {TRACE_MAX_SPAN_S / 86_400:.0f} days (the longest trace "
            "gpuscale replays); split the trace or check its time column"
        )
    return t, order


def _append_row(
    row: list[str], header: tuple[str, ...], first: np.datetime64 | None, times: array.array[float],
    prompts: array.array[int], outputs: array.array[int], prefixes: list[tuple[int, ...] | None] | None,
) -> np.datetime64 | None:
    """Append one request; returns the first Azure timestamp (the zero of the arrival times)."""
    if len(row) != len(header):
        raise ValueError(f"{len(row)} columns, the header has {len(header)}")
    if header == AZURE_HEADER:
        ts = _parse_timestamp(row[0])
        first = ts if first is None else first
        times.append((ts - first) / np.timedelta64(1, "ns") / 1e9)
    else:
        times.append(float(row[0]))
    prompts.append(_tokens(row[1], header[1]))
    outputs.append(_tokens(row[2], header[2]))
    if prefixes is not None:
        ids = tuple(int(x) for x in row[3].split())
        if any(not 0 <= b < 2**63 for b in ids):
            raise ValueError("prefix ids must be integers from 0 to 2^63 - 1")
        prefixes.append(ids or None)
    return first


def _tokens(cell: str, column: str) -> int:
    n = int(cell)
    if not 0 <= n <= TRACE_MAX_TOKENS:
        raise ValueError(f"{column} {cell.strip()[:40]} is not a token count from 0 to {TRACE_MAX_TOKENS:,}")
    return n


def check_compress(path: Path, span_s: float, compress: float) -> None:
    """Refuse a ``compress`` that squeezes a trace below ``REPLAY_MIN_SPAN_S`` (or the trace's own span, if shorter)
    or stretches it beyond ``TRACE_MAX_SPAN_S``: every statistic and the simulation then work on a physical span."""
    if span_s <= 0:
        return
    replayed = span_s / compress
    least = min(span_s, REPLAY_MIN_SPAN_S)
    if not least <= replayed <= TRACE_MAX_SPAN_S:
        raise TraceError(
            f"{path}: --compress {compress:g} replays the trace's {span_s:,.1f} s in {replayed:.3g} s; use --compress from "
            f"{span_s / TRACE_MAX_SPAN_S:.3g} to {span_s / least:.3g} (a replay between {least:g} s and "
            f"{TRACE_MAX_SPAN_S / 86_400:.0f} days)"
        )


def _check_arrival_order(path: Path, times: np.ndarray, relative: bool) -> None:
    """Refuse negative arrival times (``*_norm.csv`` counts seconds from 0) and rows out of arrival order, naming the
    line: a replay must not silently reorder or shift the requests it was given."""
    if relative and np.any(times < 0):
        i = int(np.argmax(times < 0))
        raise TraceError(f"{path}: line {i + 2}: arrival_s {times[i]:g} is negative; arrival times count seconds from 0")
    back = np.flatnonzero(np.diff(times) < 0)
    if back.size:
        i = int(back[0]) + 1
        raise TraceError(
            f"{path}: line {i + 2}: arrives at {times[i]:g} s, before line {i + 1} ({times[i - 1]:g} s); sort the rows "
            "by arrival time (keep the header first)"
        )


def arrival_granularity_s(times: np.ndarray) -> float | None:
    """The grid a trace's timestamps were recorded on (seconds), or None when they are exact.

    Bucketed means: requests fall in groups whose timestamps lie within ``BUCKET_JITTER_S`` of each other (a logger's
    few milliseconds of jitter), fewer groups than requests (several requests share a bucket), and every group's first
    timestamp sits within ``BUCKET_JITTER_S`` of a whole multiple of one grid step of at least ``BUCKET_MIN_S`` (and at
    least ``BUCKET_GRID_PER_JITTER`` jitters, so dense exact arrivals are not taken for a grid). The step is fitted to
    every group (each gap a whole number of steps: empty buckets allowed) and rounded to the millisecond, not read off
    the smallest gap, which jitter shortens. Sorted input; O(n).
    """
    if times.size < 2:
        return None
    gaps = np.diff(times)
    starts = np.concatenate(([0], np.flatnonzero(gaps > BUCKET_JITTER_S) + 1))
    if starts.size == times.size or starts.size < 2:
        return None
    anchors = times[starts]
    between = np.diff(anchors)
    g0 = float(between.min())
    if g0 < max(BUCKET_MIN_S, BUCKET_GRID_PER_JITTER * BUCKET_JITTER_S) - 2 * BUCKET_JITTER_S:
        return None
    steps = np.rint(between / g0)
    if np.any(steps < 1) or np.any(np.abs(between - steps * g0) > 0.5 * g0):
        return None
    # least-squares grid through every group's first timestamp (its index counted in whole steps), then each one's
    # residual from it; the step is a logger's setting, kept to the millisecond
    k = np.concatenate(([0.0], np.cumsum(steps)))
    kc = k - k.mean()
    g = round(float(np.dot(kc, anchors - anchors.mean()) / np.dot(kc, kc)), 3)
    resid = anchors - anchors[0] - k * g
    resid -= np.median(resid)
    if g < BUCKET_MIN_S or float(np.max(np.abs(resid))) > BUCKET_JITTER_S:
        return None
    # a group wider than the jitter (arrivals chained within it) is not one bucket
    ends = np.append(starts[1:] - 1, times.size - 1)
    if float(np.max(times[ends] - anchors)) > BUCKET_JITTER_S:
        return None
    return g


def bucket_starts_s(times: np.ndarray, grid_s: float) -> np.ndarray:
    """Each arrival's bucket on the fitted grid (its nearest grid point at or below, jitter removed)."""
    g0 = float(times[0]) if times.size else 0.0
    return g0 + np.floor((times - g0) / grid_s + BUCKET_JITTER_S / grid_s) * grid_s


def _trace(spec: TraceTraffic, seed: int, duration_s: float | None) -> Arrivals:
    a = load_trace(spec.path)
    check_compress(spec.path, a.span_s, spec.compress)
    t = a.arrival_s - spec.start_s
    grid = arrival_granularity_s(a.arrival_s)
    if grid is not None and spec.replay == "spread":
        # each request drawn uniformly within its bucket: from the bucket's grid point, its recorded jitter removed
        start = bucket_starts_s(a.arrival_s, grid) - spec.start_s
        t = start + np.random.default_rng([seed, 3]).uniform(0.0, grid, t.size)
    t = t / spec.compress
    keep = t >= 0
    if duration_s is not None:
        keep &= t <= duration_s
    order = np.argsort(t[keep], kind="stable")
    idx = np.flatnonzero(keep)[order]
    pre = tuple(a.prefixes[int(i)] for i in idx) if a.prefixes is not None else None
    return Arrivals(t[idx], a.prompt_tokens[idx], a.output_tokens[idx], prefixes=pre)


def generate(spec: SyntheticTraffic | TraceTraffic, seed: int, duration_s: float | None) -> Arrivals:
    """All arrivals of a run. Synthetic traffic needs ``duration_s``; a trace keeps every request up to it."""
    if isinstance(spec, TraceTraffic):
        return _trace(spec, seed, duration_s)
    if duration_s is None:
        raise ValueError("synthetic traffic needs a duration")
    return _synthetic(spec, seed, duration_s)


def trace_span_s(spec: TraceTraffic) -> float:
    """Compressed length of a trace, its last bucket included (reads the file)."""
    a = load_trace(spec.path)
    check_compress(spec.path, a.span_s, spec.compress)
    grid = arrival_granularity_s(a.arrival_s) or 0.0
    return max(a.span_s + grid - spec.start_s, 0.0) / spec.compress


def trace_granularity_s(spec: TraceTraffic) -> float | None:
    """The trace's arrival grid in trace seconds (reads the file); None when timestamps are exact."""
    return arrival_granularity_s(load_trace(spec.path).arrival_s)


def plateau_profile(
    base_rps: float, peak_rps: float, duration_s: float, *, rise_at: float, peak_from: float, peak_until: float,
    back_at: float,
) -> list[RatePoint]:
    """Base, linear ramp, plateau at peak, ramp back: corners given as fractions of ``duration_s``."""
    corners = [(0.0, base_rps), (rise_at, base_rps), (peak_from, peak_rps), (peak_until, peak_rps), (back_at, base_rps)]
    return [RatePoint(t_s=f * duration_s, rps=r) for f, r in corners]


def diurnal_profile(base_rps: float, peak_rps: float, day_s: float, peak_hours: float) -> list[RatePoint]:
    """One day (possibly compressed into ``day_s``): base at night, a ramp of 1/24 day, ``peak_hours`` at peak."""
    peak = min(max(peak_hours / 24.0, 0.0), 22.0 / 24.0)
    ramp = 1.0 / 24.0
    mid = 14.0 / 24.0  # peak centred on early afternoon
    start, end = mid - peak / 2, mid + peak / 2
    return plateau_profile(base_rps, peak_rps, day_s, rise_at=start - ramp, peak_from=start, peak_until=end, back_at=end + ramp)


def with_warmup(arrivals: Arrivals, warmup_s: float) -> tuple[Arrivals, int]:
    """The same traffic's first ``warmup_s`` seconds replayed before it, and how many requests that prepends.

    The run starts with the warm-up and the scored traffic follows it unchanged, ``warmup_s`` later: the policy enters
    the scored window in the state that traffic leads to (the steady state), not cold. Warm-up requests carry no labels
    or client-timeout overrides (nothing of theirs is reported); their prefix ids are the traffic's own."""
    if warmup_s <= 0:
        return arrivals, 0
    w = int(np.searchsorted(arrivals.arrival_s, warmup_s, side="left"))
    cat = np.concatenate
    pre = None if arrivals.prefixes is None else (*arrivals.prefixes[:w], *arrivals.prefixes)
    return Arrivals(
        cat([arrivals.arrival_s[:w], arrivals.arrival_s + warmup_s]), cat([arrivals.prompt_tokens[:w], arrivals.prompt_tokens]),
        cat([arrivals.output_tokens[:w], arrivals.output_tokens]), {i + w: v for i, v in arrivals.labels.items()},
        {i + w: v for i, v in arrivals.timeouts_s.items()}, pre,
    ), w


def scored_part(arrivals: Arrivals, warm: int, warmup_s: float) -> Arrivals:
    """The scored requests of a warm-started run, on the scored window's clock (inverse of ``with_warmup``)."""
    if warm == 0 and warmup_s <= 0:
        return arrivals
    return Arrivals(
        arrivals.arrival_s[warm:] - warmup_s, arrivals.prompt_tokens[warm:], arrivals.output_tokens[warm:],
        {i - warm: v for i, v in arrivals.labels.items()}, {i - warm: v for i, v in arrivals.timeouts_s.items()},
        None if arrivals.prefixes is None else arrivals.prefixes[warm:],
    )
