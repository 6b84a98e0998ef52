"""Synthetic arrivals (rate, bursts, token sizes, huge prompts) and trace replay in both file formats."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpuscale.sim.traffic import (
    HugePrompt,
    RatePoint,
    SyntheticTraffic,
    TraceError,
    TraceTraffic,
    arrival_granularity_s,
    diurnal_profile,
    generate,
    load_trace,
    lognormal_params,
    sample_tokens,
    trace_span_s,
)
from gpuscale.spec.workload import BurstSpec, TokenDistribution
from tests.conftest import SHARED, requires_shared

TOK = TokenDistribution(mean=1000, p99=4000)


def traffic(rps: float = 5.0, **kw: object) -> SyntheticTraffic:
    return SyntheticTraffic.model_validate({"profile": [{"t_s": 0, "rps": rps}], "prompt_tokens": TOK, "output_tokens": TOK, **kw})


def test_lognormal_hits_mean_and_p99() -> None:
    mu, sigma = lognormal_params(TOK)
    x = sample_tokens(np.random.default_rng(1), TOK, 400_000, None)
    assert x.mean() == pytest.approx(1000, rel=0.02)
    assert np.percentile(x, 99) == pytest.approx(4000, rel=0.03)
    assert sigma > 0 and mu < np.log(1000)


def test_constant_mean_is_a_point_mass() -> None:
    x = sample_tokens(np.random.default_rng(0), TokenDistribution(mean=7, p99=7), 10, None)
    assert set(x.tolist()) == {7}


def test_poisson_rate_and_determinism() -> None:
    a = generate(traffic(5.0), seed=3, duration_s=2000)
    b = generate(traffic(5.0), seed=3, duration_s=2000)
    c = generate(traffic(5.0), seed=4, duration_s=2000)
    assert len(a) == pytest.approx(10_000, rel=0.04)
    assert np.array_equal(a.arrival_s, b.arrival_s) and np.array_equal(a.prompt_tokens, b.prompt_tokens)
    assert not np.array_equal(a.arrival_s[:100], c.arrival_s[:100])
    assert np.all(np.diff(a.arrival_s) >= 0) and a.arrival_s.max() < 2000


def test_ramp_profile_follows_the_rate() -> None:
    spec = traffic(0.0).model_copy(update={"profile": [RatePoint(t_s=0, rps=1), RatePoint(t_s=1000, rps=9)]})
    a = generate(spec, seed=1, duration_s=2000)
    first, second = np.count_nonzero(a.arrival_s < 1000), np.count_nonzero(a.arrival_s >= 1000)
    assert first == pytest.approx(5000, rel=0.05) and second == pytest.approx(9000, rel=0.05)


def test_bursts_add_arrivals() -> None:
    calm = generate(traffic(2.0), seed=5, duration_s=36_000)
    bursty = generate(traffic(2.0, burst=BurstSpec(multiplier=4.0, duration_s=60, per_hour=6)), seed=5, duration_s=36_000)
    # about 60 bursts x 60 s x 6 extra req/s
    assert len(bursty) - len(calm) == pytest.approx(60 * 60 * 6, rel=0.3)


def test_huge_prompt_is_inserted_labelled_and_timed() -> None:
    spec = traffic(1.0, huge_prompts=[HugePrompt(at_s=50.5, prompt_tokens=1_000_000, timeout_s=900)])
    a = generate(spec, seed=0, duration_s=100)
    [(i, label)] = a.labels.items()
    assert label == "huge-prompt" and a.prompt_tokens[i] == 1_000_000 and a.arrival_s[i] == 50.5
    assert a.timeouts_s == {i: 900}
    assert np.all(np.diff(a.arrival_s) >= 0)


def test_diurnal_profile_has_the_peak_hours() -> None:
    prof = diurnal_profile(10, 40, 86_400, 8)
    t = np.arange(0, 86_400, 60.0)
    rate = np.interp(t, [p.t_s for p in prof], [p.rps for p in prof])
    assert (rate == 40).sum() * 60 == pytest.approx(8 * 3600, abs=120)
    assert rate.min() == 10


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_both_trace_formats_read_the_same(tmp_path: Path) -> None:
    norm = write(tmp_path / "n.csv", "arrival_s,input_tokens,output_tokens\n0.0000000,374,44\n4.3145790,396,109\n4.5418770,879,0\n")
    azure = write(tmp_path / "a.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n"
                  "2023-11-16 18:15:50.9951690,396,109\n2023-11-16 18:15:51.2224670,879,0\n")
    a, b = load_trace(norm), load_trace(azure)
    assert np.allclose(a.arrival_s, b.arrival_s, atol=1e-7)
    assert a.prompt_tokens.tolist() == b.prompt_tokens.tolist() == [374, 396, 879]
    assert a.output_tokens.tolist() == [44, 109, 1]  # a request yields at least one token


def test_compress_and_cut(tmp_path: Path) -> None:
    path = write(tmp_path / "n.csv", "arrival_s,input_tokens,output_tokens\n" + "".join(f"{i * 10.5},100,10\n" for i in range(10)))
    a = generate(TraceTraffic(path=path, compress=5), seed=0, duration_s=None)
    assert a.arrival_s.tolist() == pytest.approx([2.1 * i for i in range(10)])
    b = generate(TraceTraffic(path=path, compress=5, start_s=31.5), seed=0, duration_s=6.3)
    assert b.arrival_s.tolist() == pytest.approx([0.0, 2.1, 4.2, 6.3])  # the request at the end is kept


def test_every_request_of_a_trace_is_replayed(tmp_path: Path) -> None:
    path = write(tmp_path / "n.csv", "arrival_s,input_tokens,output_tokens\n0.0,10,5\n1.5,10,5\n4.25,10,5\n")
    spec = TraceTraffic(path=path)
    assert len(generate(spec, seed=0, duration_s=trace_span_s(spec))) == 3


def bucketed(tmp_path: Path) -> Path:
    """A synthetic trace recorded in 3 s buckets, with prefix block ids (the Azure traces have none)."""
    rows = ["arrival_s,input_tokens,output_tokens,prefix_ids"]
    for k in range(40):
        for j in range(5):
            group = (k + j) % 3
            ids = " ".join(str(1000 * group + b) for b in range(20))  # 320 shared tokens per group
            rows.append(f"{3 * k}.0,{400 + 10 * j},20,{ids}")
    return write(tmp_path / "bucketed.csv", "\n".join(rows) + "\n")


def test_prefix_ids_column_is_read(tmp_path: Path) -> None:
    a = load_trace(bucketed(tmp_path))
    assert a.prefixes is not None and len(a.prefixes) == 200
    assert a.prefixes[0] == tuple(range(20))
    assert load_trace(write(tmp_path / "plain.csv", "arrival_s,input_tokens,output_tokens\n0,1,1\n")).prefixes is None


def test_bucket_granularity_is_detected(tmp_path: Path) -> None:
    assert arrival_granularity_s(load_trace(bucketed(tmp_path)).arrival_s) == pytest.approx(3.0)
    assert arrival_granularity_s(np.array([0.0, 0.31, 0.77, 1.9])) is None  # exact timestamps
    assert arrival_granularity_s(np.array([0.0, 1.0, 2.0, 3.0])) is None  # a grid but nothing shares a timestamp


def test_batch_replays_buckets_at_once_spread_spreads_them_seeded(tmp_path: Path) -> None:
    path = bucketed(tmp_path)
    batch = generate(TraceTraffic(path=path, replay="batch"), seed=0, duration_s=None)
    spread = generate(TraceTraffic(path=path, replay="spread"), seed=0, duration_s=None)
    again = generate(TraceTraffic(path=path, replay="spread"), seed=0, duration_s=None)
    other = generate(TraceTraffic(path=path, replay="spread"), seed=1, duration_s=None)
    assert len(np.unique(batch.arrival_s)) == 40
    assert len(np.unique(spread.arrival_s)) == 200
    assert np.all(np.diff(spread.arrival_s) >= 0) and spread.arrival_s.max() < 120.0
    assert np.array_equal(spread.arrival_s, again.arrival_s) and not np.array_equal(spread.arrival_s, other.arrival_s)
    # each request stays within its bucket
    assert np.all(np.floor(spread.arrival_s / 3.0) * 3.0 <= spread.arrival_s)
    assert spread.prefixes is not None and sorted(map(len, spread.prefixes)) == [20] * 200  # type: ignore[arg-type]


def test_bad_prefix_ids_name_the_line(tmp_path: Path) -> None:
    path = write(tmp_path / "p.csv", "arrival_s,input_tokens,output_tokens,prefix_ids\n0,10,5,1 2 x\n")
    with pytest.raises(TraceError, match="line 2"):
        load_trace(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty file"),
        ("time,in,out\n1,2,3\n", "unknown header 'time,in,out'"),
        ("arrival_s,input_tokens,output_tokens\n", "no requests after the header"),
        ("arrival_s,input_tokens,output_tokens\n0,10,5\nsoon,10,5\n", "line 3: cannot parse 'soon,10,5'"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,1,2\n", "line 2"),
    ],
)
def test_bad_traces_name_the_problem(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(TraceError, match=message):
        load_trace(write(tmp_path / "t.csv", text))


def test_missing_trace(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="cannot read the trace"):
        load_trace(tmp_path / "absent.csv")


@requires_shared
def test_shared_conv_trace_upstream_equals_norm() -> None:
    norm = load_trace(SHARED / "traces" / "azure2023_conv_norm.csv")
    up = load_trace(SHARED / "traces" / "AzureLLMInferenceTrace_conv.csv")
    assert len(norm) == len(up) == 19_366
    assert np.allclose(norm.arrival_s, up.arrival_s, atol=1e-6)
    assert np.array_equal(norm.prompt_tokens, up.prompt_tokens)
    assert norm.span_s == pytest.approx(3501.7, abs=0.1)
