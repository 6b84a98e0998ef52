"""``gpuscale perf``: one question about one replica, without a stack file (TTFT, ITL/TPOT, throughput, KV capacity).

The answer is the simulator's: the replica is ``build_replica_model`` over ``gpuscale.perf`` and ``gpuscale.sizing``
(``replica_load.replica_alone``), driven by ``gpuscale.sim.replica_load``'s clients. How far that model is from
published measurements, in and out of the points it was fitted to: ``docs/simulator.md``, "Calibration".
"""

from __future__ import annotations

import enum
import json
import math
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from pydantic import ValidationError

from gpuscale import perf
from gpuscale.cli.common import check_outputs, fail, positive_finite, say, warn, write_text
from gpuscale.problems import Problems
from gpuscale.sim import replica_load
from gpuscale.sim.replica import ReplicaModel
from gpuscale.spec.catalogue import CATALOGUE, GPU_INSTANCE
from gpuscale.spec.model import ModelArchitecture
from gpuscale.spec.model_catalogue import MODELS, from_hf_config
from gpuscale.stackfile import parse_stack_text

MAX_CONCURRENCY = 4096
MAX_RATE_PER_S = 10_000.0
MAX_REQUESTS = 100_000
"""Bounds that keep one answer within seconds to a minute and its requests within memory."""
DEFAULT_OPEN_LOOP_REQUESTS = 500
"""Requests of an open-loop run: the 500 prompts of vLLM's ``benchmark_serving`` runs in its v0.6 blog (perf-model.md
2.1)."""
MAX_ARCHITECTURE_FILE_BYTES = 1_000_000


class Precision(enum.StrEnum):
    bf16 = "bf16"
    fp8 = "fp8"


def _read_mapping(path: Path) -> tuple[dict[str, Any] | None, list[str]]:
    """The file's YAML/JSON document (read strictly: UTF-8, each key once, at most 1 MB), which must be a mapping."""
    try:
        size = path.stat().st_size
        if size > MAX_ARCHITECTURE_FILE_BYTES:
            return None, [f"--model {path}: {size:,} bytes; an architecture file is a few hundred (at most 1 MB)"]
        doc = parse_stack_text(path.read_bytes(), str(path))
    except Problems as exc:
        # the file's own paths (``layers``), not a stack file's ``gpuscale:`` ones
        return None, [f"--model {path}: " + (f"{p.path}: {p.message}" if p.path else p.message) for p in exc.problems]
    except OSError as exc:
        return None, [f"--model {path}: cannot read it ({exc.strerror or exc})"]
    if not isinstance(doc, dict):
        return None, [f"--model {path}: expected a mapping of architecture fields, got {type(doc).__name__}"]
    return doc, []


def _architecture_file(path: Path) -> tuple[ModelArchitecture | None, list[str]]:
    """A ``ModelArchitecture`` from a YAML/JSON file of its fields, or from a Hugging Face config.json."""
    doc, problems = _read_mapping(path)
    if doc is None:
        return None, problems
    if "num_hidden_layers" in doc:  # a Hugging Face config.json
        try:
            doc = from_hf_config(doc)
        except KeyError as exc:
            return None, [f"--model {path}: a config.json needs {exc.args[0]}"]
        except (TypeError, ValueError) as exc:
            return None, [f"--model {path}: {exc}"]
    try:
        return ModelArchitecture.model_validate(doc, strict=True), []
    except ValidationError as exc:
        valid = ", ".join(ModelArchitecture.model_fields)
        return None, [
            f"--model {path}: {'.'.join(str(p) for p in err['loc']) or '(top)'}: "
            + (f"unknown key; valid keys: {valid}" if err["type"] == "extra_forbidden"
               else err["msg"].removeprefix("Value error, "))
            for err in exc.errors(include_url=False)
        ]


def _model(name: str) -> tuple[ModelArchitecture | None, list[str]]:
    if name in MODELS:
        return MODELS[name], []
    path = Path(name)
    if path.is_file():
        return _architecture_file(path)
    return None, [f"--model {name!r}: not a catalogue model or an architecture file; catalogue: {', '.join(MODELS)} "
                  "(or a path to a YAML/JSON file of ModelArchitecture fields, or a Hugging Face config.json)"]


def _replica(arch: ModelArchitecture, gpu: str, tp: int, pp: int) -> tuple[ReplicaModel | None, list[str]]:
    instance = CATALOGUE[GPU_INSTANCE[gpu]]
    problems = []
    if arch.attention_heads % tp:
        problems.append(f"--tp {tp}: must divide the model's {arch.attention_heads} attention heads (vLLM splits heads "
                        "across tensor-parallel ranks)")
    if tp > instance.gpus_per_node:
        problems.append(f"--tp {tp}: a tensor-parallel group stays inside one node; {gpu} nodes have at most "
                        f"{instance.gpus_per_node} GPUs")
    if pp > arch.layers:
        problems.append(f"--pp {pp}: more pipeline stages than the model's {arch.layers} layers")
    if problems:
        return None, problems
    replica = replica_load.replica_alone(arch, instance, tp, pp)
    if replica.kv_capacity_tokens <= replica.block_tokens:
        weights = perf.weight_bytes(arch) / perf.GIB
        return None, [f"--tp {tp} --pp {pp}: {weights:.1f} GiB of weights leave no KV cache on {tp * pp} x {gpu} "
                      f"({instance.gpu.memory_gib:g} GiB each at gpu_memory_utilization 0.9); use more GPUs or "
                      "--precision fp8"]
    return replica, []


def _describe(arch: ModelArchitecture, model: str, gpu: str, tp: int, pp: int, load: str) -> str:
    kv = "" if arch.kv_cache_precision == "bf16" else f", {arch.kv_cache_precision.upper()} KV"
    return f"{model} {arch.weight_precision.upper()}{kv} on {tp * pp} x {gpu} (TP{tp} x PP{pp}), {load}"


def perf_command(
    model: Annotated[str, typer.Option("--model", help=f"Catalogue model ({', '.join(MODELS)}) or an architecture file "
                                       "(YAML/JSON of ModelArchitecture fields, or a Hugging Face config.json).",
                                       show_default=False)],
    gpu: Annotated[str, typer.Option("--gpu", help=f"GPU: {', '.join(GPU_INSTANCE)}.", show_default=False)],
    tp: Annotated[int, typer.Option("--tp", min=1, max=64, help="Tensor-parallel size.", show_default=False)],
    input_tokens: Annotated[int, typer.Option("--input-tokens", min=1, help="Prompt tokens per request (mean).",
                                              show_default=False)],
    output_tokens: Annotated[int, typer.Option("--output-tokens", min=1, help="Output tokens per request (mean).",
                                               show_default=False)],
    pp: Annotated[int, typer.Option("--pp", min=1, max=64, help="Pipeline-parallel size.")] = 1,
    precision: Annotated[
        Precision | None, typer.Option("--precision", help="Weight precision (default: bf16, or the architecture file's).",
                                       show_default=False)
    ] = None,
    kv_cache_precision: Annotated[
        Precision | None, typer.Option("--kv-cache-precision", help="KV-cache precision (default: bf16, or the file's).",
                                       show_default=False)
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option("--concurrency", min=1, max=MAX_CONCURRENCY,
                                 help="Closed loop of C clients (request lengths jittered +-10%).", show_default=False)
    ] = None,
    rate: Annotated[
        float | None, typer.Option("--rate", help=f"Open-loop Poisson arrivals, requests per second (<= {MAX_RATE_PER_S:g}).",
                                   callback=positive_finite, show_default=False)
    ] = None,
    offline: Annotated[bool, typer.Option("--offline", help="Every request at once: maximum throughput.")] = False,
    requests: Annotated[
        int | None, typer.Option("--requests", min=1, max=MAX_REQUESTS,
                                 help=f"Requests of an open-loop or offline run (default {DEFAULT_OPEN_LOOP_REQUESTS} "
                                 "open loop; offline three KV-fulls, 64-1,000).", show_default=False)
    ] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Random seed (same seed, same answer).")] = 0,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Also write the figures as JSON (seconds and per second).",
                                  dir_okay=False, show_default=False)
    ] = None,
) -> None:
    """Simulate one replica of MODEL on GPU under one load (a closed loop of C clients, Poisson arrivals at R per
    second, or everything at once) and print TTFT (mean, p50, p99), ITL and TPOT, throughput and KV capacity."""
    problems = _load_problems(concurrency, rate, offline, requests)
    if gpu not in GPU_INSTANCE:
        problems.append(f"--gpu {gpu!r}: unknown GPU; valid: {', '.join(GPU_INSTANCE)}")
    arch, found = _model(model)
    problems += found
    if problems or arch is None:
        fail(problems)
    updates = {k: v.value for k, v in (("weight_precision", precision), ("kv_cache_precision", kv_cache_precision))
               if v is not None}
    arch = arch.model_copy(update=updates)
    replica, problems = _replica(arch, gpu, tp, pp)
    if replica is None:
        fail(problems)
    jitter = 1 + replica_load.LENGTH_JITTER
    longest = math.ceil(input_tokens * jitter) + math.ceil(output_tokens * jitter)
    if longest > replica.max_request_tokens:
        fail([f"--input-tokens {input_tokens} --output-tokens {output_tokens}: with the +-10% jitter a request reaches "
              f"{longest:,} tokens; this replica accepts at most {replica.max_request_tokens:,} (the model's context "
              f"{arch.max_context_tokens:,} and its KV cache {replica.kv_capacity_tokens:,}, whichever is smaller)"])
    check_outputs((json_out, "--json", False))
    load, result = _run(replica, input_tokens, output_tokens, concurrency, rate, requests, seed)
    fig = result.as_json()
    say(_describe(arch, model, gpu, tp, pp, f"{input_tokens} in / {output_tokens} out (+-10%), {load}"))
    _print(fig, input_tokens + output_tokens)
    if rate is not None and fig["requests_per_s"] < 0.9 * rate:
        warn(f"the replica serves {fig['requests_per_s']:.3g} requests/s, below the offered {rate:g}/s: it is saturated "
             "and TTFT grows with --requests")
    if json_out is not None:
        write_text(json_out, json.dumps(fig, indent=2) + "\n", "--json")


def _load_problems(concurrency: int | None, rate: float | None, offline: bool, requests: int | None) -> list[str]:
    problems = []
    if sum((concurrency is not None, rate is not None, offline)) != 1:
        problems.append("pass exactly one of --concurrency C, --rate R, --offline")
    if rate is not None and rate > MAX_RATE_PER_S:
        problems.append(f"--rate {rate:g}: at most {MAX_RATE_PER_S:g} requests per second")
    if requests is not None and concurrency is not None:
        problems.append("--requests: a closed loop runs 6 requests per client (2 warm-up, 4 measured); not with --concurrency")
    return problems


def _run(replica: ReplicaModel, input_tokens: int, output_tokens: int, concurrency: int | None, rate: float | None,
         requests: int | None, seed: int) -> tuple[str, replica_load.LoadResult]:
    """The load the options ask for, described, and what it measured."""
    if concurrency is not None:
        return (f"closed loop of {concurrency} clients",
                replica_load.closed_loop(replica, concurrency, input_tokens, output_tokens, seed=seed))
    n = requests or (DEFAULT_OPEN_LOOP_REQUESTS if rate is not None else
                     replica_load.offline_requests(replica, input_tokens, output_tokens))
    rng = np.random.default_rng([seed, 2])
    prompts = replica_load.jittered(rng, input_tokens, n).tolist()
    outputs = replica_load.jittered(rng, output_tokens, n).tolist()
    if rate is not None:
        return (f"Poisson arrivals at {rate:g}/s ({n} requests)",
                replica_load.open_loop(replica, rate, prompts, outputs, seed=seed))
    return f"offline ({n} requests at once)", replica_load.offline(replica, prompts, outputs)


def _print(fig: dict[str, float | int], per_request_tokens: int) -> None:
    kv = int(fig["kv_capacity_tokens"])
    say(f"  KV capacity   {kv:,} tokens ({kv // per_request_tokens:,} requests of this size)")
    say(f"  TTFT          mean {fig['ttft_mean_s'] * 1e3:,.1f} ms, p50 {fig['ttft_p50_s'] * 1e3:,.1f} ms, "
        f"p99 {fig['ttft_p99_s'] * 1e3:,.1f} ms")
    say(f"  ITL           mean {fig['itl_mean_s'] * 1e3:,.2f} ms, p50 {fig['itl_p50_s'] * 1e3:,.2f} ms, "
        f"p99 {fig['itl_p99_s'] * 1e3:,.2f} ms; TPOT mean {fig['tpot_mean_s'] * 1e3:,.2f} ms")
    say(f"  throughput    {fig['requests_per_s']:,.3f} requests/s, {fig['output_tokens_per_s']:,.1f} output tokens/s")
