"""Calibration: simulated TTFT / ITL / throughput of one replica against published measurements (perf-model.md).

Usage (from the repository root): ``.venv/bin/python bench/calibration.py [--splitwise PATH]``

Prints a Markdown table (pasted into docs/simulator.md) and the median absolute error per source. The replica is
the simulator's ``ReplicaModel`` built by ``build_replica_model`` from ``gpuscale.perf`` and ``gpuscale.sizing``
(no constant is fitted here); the engine is ``gpuscale.sim.replica.Engine`` driven by open- or closed-loop clients.

Sources (perf-model.md section 2.1):
* NVIDIA NIM 1.8.0 benchmark, Llama-3.3-70B-Instruct FP8 on 2x H100 (TP2), 5,000 in / 500 out, concurrency 1-250.
* vLLM nightly CI (buildkite "vllm/performance-benchmark"): latency test 32 in / 128 out at batch 8, BF16,
  70B TP4 and 8B TP1 on H100, H200, A100; serving test 70B TP4 on H200, ShareGPT at 1 QPS.
* Splitwise ``perf_model.csv`` (Llama-2-70B FP16 on DGX-H100, 2023 stack): prompt time and per-token time.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import statistics
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np

from gpuscale.sim.events import Environment
from gpuscale.sim.replica import ReplicaModel, build_replica_model
from gpuscale.sim.traffic import sample_tokens
from gpuscale.sim.vllm_engine import Engine, ItlHistogram, Request
from gpuscale.spec.catalogue import CATALOGUE
from gpuscale.spec.model import ModelDeployment
from gpuscale.spec.workload import TokenDistribution

ROOT = Path(__file__).resolve().parents[1]
SPLITWISE = ROOT.parent / "shared" / "research" / "data" / "splitwise_perf_model.csv"

LLAMA3_70B = {"params_b": 70.55, "layers": 80, "attention_heads": 64, "kv_heads": 8, "head_dim": 128, "hidden_size": 8192,
              "vocab_size": 128256, "max_context_tokens": 32768}
LLAMA3_8B = {"params_b": 8.03, "layers": 32, "attention_heads": 32, "kv_heads": 8, "head_dim": 128, "hidden_size": 4096,
             "vocab_size": 128256, "max_context_tokens": 16384}
LLAMA2_70B = {"params_b": 68.98, "layers": 80, "attention_heads": 64, "kv_heads": 8, "head_dim": 128, "hidden_size": 8192,
              "vocab_size": 32000, "max_context_tokens": 4096}


def deployment(arch: dict[str, object], **precision: str) -> ModelDeployment:
    """A minimal deployment around an architecture (only the architecture and serving defaults matter here)."""
    return ModelDeployment.model_validate({
        "name": "calibration", "architecture": {**arch, **precision}, "weights": {"uri": "s3://bucket/model"},
        "slo": {"ttft_p99_s": 10, "itl_p99_s": 1, "request_timeout_s": 1e6},
        "workload": {"base_rps": 1, "peak_rps": 1, "prompt_tokens": {"mean": 1, "p99": 1}, "output_tokens": {"mean": 1, "p99": 1}},
        "queue": "q", "node_pool": "p",
    })


def replica(arch: dict[str, object], instance: str, tp: int, **precision: str) -> ReplicaModel:
    return build_replica_model(deployment(arch, **precision), CATALOGUE[instance], tp, 1)


class Recorder:
    """Engine sink that keeps per-request timings and can re-submit on completion (closed loop)."""

    def __init__(self, env: Environment, on_complete: Callable[[float], None] | None = None) -> None:
        self.env = env
        self.arrival: dict[int, float] = {}
        self.first: dict[int, float] = {}
        self.done: dict[int, float] = {}
        self.output: dict[int, int] = {}
        self.on_complete = on_complete

    def on_first_token(self, req: Request, t: float) -> None:
        self.first[req.rid] = t

    def on_done(self, req: Request, t: float) -> None:
        self.done[req.rid] = t
        if self.on_complete is not None:
            self.env.at(t, self.on_complete, t)  # defer: never re-enter the engine from its own callback

    def on_prefill_done(self, req: Request, t: float) -> None:
        raise AssertionError("aggregated engine")

    def on_timeout(self, req: Request, t: float) -> None:
        raise AssertionError("no timeout in calibration")

    def on_drained(self, engine: Engine) -> None:
        pass

    def stats(self, rids: list[int]) -> tuple[float, float]:
        """Mean TTFT and mean per-request inter-token latency over ``rids``."""
        ttft = statistics.mean(self.first[i] - self.arrival[i] for i in rids)
        itl = statistics.mean((self.done[i] - self.first[i]) / (self.output[i] - 1) for i in rids if self.output[i] > 1)
        return ttft, itl


def closed_loop(model: ReplicaModel, concurrency: int, prompt: int, output: int, rounds: int = 4) -> tuple[float, float, float]:
    """``concurrency`` clients, each sending the next request when its previous one completes (NIM / genai-perf).

    Returns mean TTFT, mean ITL and output tokens/s over every round but the first (warm-up).
    """
    env = Environment()
    ids = itertools.count()
    rec = Recorder(env)

    def send(t: float) -> None:
        r = Request(next(ids), t, prompt, output, 1e18)
        rec.arrival[r.rid], rec.output[r.rid] = t, output
        eng.submit(r)

    rec.on_complete = send
    eng = Engine(env, model, rec, ItlHistogram())
    for _ in range(concurrency):
        send(0.0)
    horizon = 60.0
    while len(rec.done) < concurrency * rounds:
        env.run(env.now + horizon)
    measured = sorted(rec.done, key=rec.done.get)[concurrency : concurrency * rounds]  # type: ignore[arg-type]
    t0 = rec.done[measured[0]]
    t1 = rec.done[measured[-1]]
    ttft, itl = rec.stats(measured)
    return ttft, itl, output * (len(measured) - 1) / (t1 - t0)


def batch_latency(model: ReplicaModel, batch: int, prompt: int, output: int) -> float:
    """vLLM ``benchmark_latency``: one batch of ``batch`` requests, prompt to last token."""
    env = Environment()
    rec = Recorder(env)
    eng = Engine(env, model, rec, ItlHistogram())
    for i in range(batch):
        rec.arrival[i], rec.output[i] = 0.0, output
        eng.submit(Request(i, 0.0, prompt, output, 1e18))
    env.run(1e6)
    return max(rec.done.values())


def sharegpt_sizes(rng: np.random.Generator, n: int) -> tuple[list[int], list[int]]:
    """ShareGPT-like sizes (mean 202 in / 179 out, the vLLM v0.6 blog's figures; perf-model.md 2.1), pruned as vLLM's
    benchmark ``sample_requests`` prunes ShareGPT: both at least 4 tokens, prompt <= 1024, prompt + output <= 2048."""
    prompts = sample_tokens(rng, TokenDistribution(mean=202, p99=1400), 4 * n, 4000)
    outputs = sample_tokens(rng, TokenDistribution(mean=179, p99=1000), 4 * n, 2000)
    keep = (prompts >= 4) & (outputs >= 4) & (prompts <= 1024) & (prompts + outputs <= 2048)
    return prompts[keep][:n].tolist(), outputs[keep][:n].tolist()


def open_loop_sharegpt(model: ReplicaModel, qps: float, n: int, seed: int = 0) -> tuple[float, float]:
    """vLLM ``benchmark_serving`` at a Poisson request rate with ShareGPT-like sizes."""
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1.0 / qps, n))
    prompts, outputs = sharegpt_sizes(rng, n)
    env = Environment()
    rec = Recorder(env)
    eng = Engine(env, model, rec, ItlHistogram())
    for i, (t, p, o) in enumerate(zip(arrivals.tolist(), prompts, outputs, strict=True)):
        rec.arrival[i], rec.output[i] = t, o
        env.at(t, eng.submit, Request(i, t, p, o, 1e18))
    env.run(1e6)
    return rec.stats(list(range(n)))


def offline(model: ReplicaModel, prompts: list[int], outputs: list[int]) -> tuple[float, float]:
    """Every request submitted at t = 0 (``benchmark_throughput``, ``trtllm-bench``): (requests/s, output tokens/s)."""
    env = Environment()
    rec = Recorder(env)
    eng = Engine(env, model, rec, ItlHistogram())
    for i, (p, o) in enumerate(zip(prompts, outputs, strict=True)):
        rec.arrival[i], rec.output[i] = 0.0, o
        eng.submit(Request(i, 0.0, p, o, 1e18))
    env.run(1e7)
    end = max(rec.done.values())
    return len(prompts) / end, sum(outputs) / end


Row = tuple[str, str, str, float, float]


def nim_rows() -> list[Row]:
    m = replica(LLAMA3_70B, "p5.48xlarge", 2, weight_precision="fp8", kv_cache_precision="fp8")
    measured = {1: (407, 18.6, 52), 5: (547, 21.8, 218), 25: (689, 38.8, 623), 50: (835, 59.7, 814),
                100: (7996, 92.9, 917), 150: (34794, 92.9, 921), 250: (88605, 93.2, 920)}
    rows: list[Row] = []
    for c, (ttft, itl, tps) in measured.items():
        s_ttft, s_itl, s_tps = closed_loop(m, c, 5000, 500)
        setup = f"c={c}"
        rows += [("NIM 70B FP8 TP2 H100 5000/500", setup, "TTFT ms", ttft, s_ttft * 1e3),
                 ("NIM 70B FP8 TP2 H100 5000/500", setup, "ITL ms", itl, s_itl * 1e3),
                 ("NIM 70B FP8 TP2 H100 5000/500", setup, "output tok/s", tps, s_tps)]
    return rows


def vllm_ci_rows() -> list[Row]:
    rows: list[Row] = []
    gpu = {"p5.48xlarge": "H100", "p5en.48xlarge": "H200", "p4de.24xlarge": "A100-80"}
    latency = [("70B BF16 TP4", LLAMA3_70B, 4, {"p5.48xlarge": 19.1, "p5en.48xlarge": 16.2, "p4de.24xlarge": 31.2}),
               ("8B BF16 TP1", LLAMA3_8B, 1, {"p5.48xlarge": 7.8, "p5en.48xlarge": 6.5, "p4de.24xlarge": 12.3})]
    for label, arch, tp, per_gpu in latency:
        for inst, ms in per_gpu.items():
            lat = batch_latency(replica(arch, inst, tp), 8, 32, 128)
            rows.append(("vLLM CI latency, bs 8, 32/128", f"{label} {gpu[inst]}", "ms per token", ms, lat / 128 * 1e3))
    # throughput test: 200 ShareGPT prompts at once; measured req/s (H200: the mean of builds 9513/9515)
    throughput = [("70B BF16 TP4", LLAMA3_70B, 4, {"p5.48xlarge": 8.86, "p5en.48xlarge": 9.80, "p4de.24xlarge": 4.79}),
                  ("8B BF16 TP1", LLAMA3_8B, 1, {"p5.48xlarge": 19.5, "p5en.48xlarge": 22.2, "p4de.24xlarge": 11.06})]
    prompts, outputs = sharegpt_sizes(np.random.default_rng(1), 200)
    for label, arch, tp, per_gpu in throughput:
        for inst, rps in per_gpu.items():
            sim, _ = offline(replica(arch, inst, tp), prompts, outputs)
            rows.append(("vLLM CI throughput, 200 ShareGPT", f"{label} {gpu[inst]}", "requests/s", rps, sim))
    ttft, itl = open_loop_sharegpt(replica(LLAMA3_70B, "p5en.48xlarge", 4), 1.0, 500)
    rows += [("vLLM CI serving, ShareGPT 1 QPS", "70B BF16 TP4 H200", "TTFT mean ms", 65.9, ttft * 1e3),
             ("vLLM CI serving, ShareGPT 1 QPS", "70B BF16 TP4 H200", "ITL mean ms", 16.6, itl * 1e3)]
    return rows


def trtllm_rows() -> list[Row]:
    """TensorRT-LLM perf overview (trtllm-bench, FP8, saturation): total output tokens/s per TP group."""
    rows: list[Row] = []
    cases = [
        ("70B FP8 TP2 H100", LLAMA3_70B, 2,
         {(128, 2048): 6651, (1000, 1000): 4205, (2048, 128): 762, (5000, 500): 898, (20000, 2000): 437}),
        ("8B FP8 TP1 H100", LLAMA3_8B, 1,
         {(128, 2048): 22714, (1000, 1000): 15220, (2048, 128): 3450, (5000, 500): 3459, (20000, 2000): 1351}),
    ]
    for label, arch, tp, points in cases:
        m = replica({**arch, "max_context_tokens": 32768}, "p5.48xlarge", tp, weight_precision="fp8", kv_cache_precision="fp8")
        for (isl, osl), tps in points.items():
            n = max(64, min(1000, int(3 * m.kv_capacity_tokens / (isl + osl))))
            _, sim = offline(m, [isl] * n, [osl] * n)
            rows.append(("TensorRT-LLM trtllm-bench FP8", f"{label} {isl}/{osl}", "output tok/s", tps, sim))
    return rows


def splitwise_rows(path: Path) -> list[Row]:
    groups: dict[tuple[str, int, int, int], list[tuple[float, float]]] = defaultdict(list)
    with path.open() as fh:
        for r in csv.DictReader(fh):
            if r["model"] == "llama2-70b" and r["hardware"] == "h100-80gb":
                key = (r["tensor_parallel"], int(r["prompt_size"]), int(r["batch_size"]), int(r["token_size"]))
                groups[key].append((float(r["prompt_time"]), float(r["token_time"])))  # type: ignore[index]
    rows: list[Row] = []
    for tp in (4, 8):
        m = replica(LLAMA2_70B, "p5.48xlarge", tp, weight_precision="fp16", kv_cache_precision="fp16")
        for prompt in (2048, 8192):
            ms = statistics.median(p for p, _ in groups[(str(tp), prompt, 1, 128)])  # type: ignore[index]
            sim = (m.cost.step_s(0, 0.0) + m.cost.step_s(0, 0.0, prompt, prompt * prompt / 2.0)) * 1e3
            rows.append(("Splitwise 70B FP16 H100", f"TP{tp} prefill 1x{prompt}", "prompt ms", ms, sim))
        for bs in (1, 8, 32, 64):
            ms = statistics.median(t for _, t in groups[(str(tp), 512, bs, 128)])  # type: ignore[index]
            sim = m.cost.step_s(bs, bs * (512 + 64)) * 1e3
            rows.append(("Splitwise 70B FP16 H100", f"TP{tp} decode bs {bs}", "ms per token", ms, sim))
    return rows


REFERENCE_ONLY = ("Splitwise 70B FP16 H100",)
"""Sources shown for shape but not held to: Splitwise measured a 2023 research stack that perf-model.md 2.1 puts
35-45% slower at small batch than current vLLM (CUDA graphs, FlashAttention-3)."""


def main() -> None:
    ap = argparse.ArgumentParser(description="Simulated vs published replica timings")
    ap.add_argument("--splitwise", type=Path, default=SPLITWISE)
    args = ap.parse_args()
    rows = nim_rows() + vllm_ci_rows() + trtllm_rows() + (splitwise_rows(args.splitwise) if args.splitwise.is_file() else [])
    print("| source | setup | metric | measured | simulated | error |")
    print("|---|---|---|---:|---:|---:|")
    errors: dict[str, list[float]] = defaultdict(list)
    held: list[float] = []
    for source, setup, metric, measured, sim in rows:
        err = (sim - measured) / measured
        errors[f"{source} ({metric})"].append(abs(err))
        if source not in REFERENCE_ONLY:
            held.append(abs(err))
        print(f"| {source} | {setup} | {metric} | {measured:,.1f} | {sim:,.1f} | {err:+.0%} |")
    print()
    print("| source (metric) | rows | median abs error | max abs error |")
    print("|---|---:|---:|---:|")
    for key, errs in errors.items():
        note = " (2023 stack, not held to)" if key.startswith(REFERENCE_ONLY) else ""
        print(f"| {key}{note} | {len(errs)} | {statistics.median(errs):.0%} | {max(errs):.0%} |")
    print()
    print(f"Held to {len(held)} published points: median absolute error {statistics.median(held):.1%}, "
          f"{sum(e <= 0.15 for e in held)} within 15%, {sum(e <= 0.30 for e in held)} within 30%.")


if __name__ == "__main__":
    main()
