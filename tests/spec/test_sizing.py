"""Sizing against hand calculations; figures cited from research/perf-model.md section 3."""

from __future__ import annotations

import math

import pytest

from gpuscale import perf, sizing
from gpuscale.signals import slo_target, vllm_metrics
from gpuscale.signals.load_slo import LoadSlo
from gpuscale.signals.prefill_slo import PrefillSlo
from gpuscale.spec.catalogue import CATALOGUE
from gpuscale.spec.model import ModelArchitecture, ModelDeployment
from gpuscale.spec.topology import GpuNodePoolSpec

GIB = 1024**3


def llama70b(precision: str = "bf16", kv: str = "bf16", ctx: int = 8192) -> ModelArchitecture:
    return ModelArchitecture(
        params_b=70.55, weight_precision=precision, kv_cache_precision=kv, layers=80, attention_heads=64, kv_heads=8,
        head_dim=128, hidden_size=8192, vocab_size=128256, max_context_tokens=ctx,
    )


def llama8b(ctx: int = 8192) -> ModelArchitecture:
    return ModelArchitecture(
        params_b=8.03, layers=32, attention_heads=32, kv_heads=8, head_dim=128, hidden_size=4096, vocab_size=128256,
        max_context_tokens=ctx,
    )


def deployment(arch: ModelArchitecture, tp: int | None = None, pp: int | None = None) -> ModelDeployment:
    return ModelDeployment.model_validate({
        "name": "m", "architecture": arch.model_dump(), "weights": {"uri": "s3://bucket/m"},
        "parallelism": {"tensor_parallel_size": tp, "pipeline_parallel_size": pp},
        "slo": {"ttft_p99_s": 2, "itl_p99_s": 0.05, "request_timeout_s": 60},
        "workload": {"base_rps": 1, "peak_rps": 4, "prompt_tokens": {"mean": 1000, "p99": 4000},
                     "output_tokens": {"mean": 200, "p99": 800}},
        "queue": "q", "node_pool": "p",
    })


def pool(*types: str) -> GpuNodePoolSpec:
    return GpuNodePoolSpec(name="p", instance_types=list(types), gpu_limit=64)


def test_kv_bytes_per_token_by_hand() -> None:
    # 2 x 80 layers x 8 KV heads x 128 dims x 2 bytes = 327,680 B = 320 KiB (perf-model.md section 3)
    assert perf.kv_bytes_per_token(llama70b()) == 2 * 80 * 8 * 128 * 2 == 320 * 1024
    assert perf.kv_bytes_per_token(llama70b(kv="fp8")) == 160 * 1024
    assert perf.kv_bytes_per_token(llama8b()) == 128 * 1024


@pytest.mark.parametrize(
    ("arch", "expected_gib"),
    [(llama70b(), 131.4), (llama70b("fp8"), 67.7), (llama8b(), 15.0)],
    ids=["70b-bf16", "70b-fp8", "8b-bf16"],
)
def test_weight_gib_matches_perf_model(arch: ModelArchitecture, expected_gib: float) -> None:
    # 70B BF16 131.4 GiB; FP8 ~67.7 GiB with embeddings and LM head in BF16; 8B BF16 15.0 GiB
    assert perf.weight_bytes(arch) / GIB == pytest.approx(expected_gib, abs=0.1)


@pytest.mark.parametrize(
    ("arch", "instance", "tp", "expected_tokens"),
    [
        (llama70b(), "p5.48xlarge", 4, 469_000),  # 70B BF16 TP4 H100: ~469k
        (llama70b(), "p5.48xlarge", 8, 1_370_000),  # TP8: ~1.37M
        (llama70b("fp8"), "p5.48xlarge", 4, 678_000),  # FP8 weights, BF16 KV: ~678k
        (llama70b("fp8", "fp8"), "p5.48xlarge", 4, 1_360_000),  # FP8 KV: ~1.36M
        (llama70b("fp8"), "p5.48xlarge", 2, 228_000),  # FP8 TP2: ~228k
        (llama70b(), "p4d.24xlarge", 8, 420_000),  # A100 40 GB TP8: ~420k
        (llama70b(), "p4de.24xlarge", 4, 464_000),  # A100 80 GB TP4: ~464k
        (llama8b(), "p5.48xlarge", 1, 448_000),  # 8B BF16 on one H100: ~448k
        (llama8b(), "g6e.xlarge", 1, 188_000),  # 8B on one L40S: ~188k
    ],
)
def test_kv_capacity_matches_perf_model_table(arch: ModelArchitecture, instance: str, tp: int, expected_tokens: int) -> None:
    got = sizing.kv_capacity_tokens(deployment(arch), CATALOGUE[instance], tp, 1)
    assert got == pytest.approx(expected_tokens, rel=0.03)


def test_hand_calculation_70b_bf16_tp4_h100() -> None:
    # 0.9 x 80 GiB - 131.4/4 GiB weights - 3.35 GiB overhead = 35.8 GiB per GPU; x4 GPUs / 320 KiB
    per_gpu = 0.9 * 80 - perf.weight_bytes(llama70b()) / GIB / 4 - (sizing.ACTIVATION_OVERHEAD_GIB + sizing.NCCL_OVERHEAD_GIB)
    assert per_gpu == pytest.approx(35.8, abs=0.1)
    assert sizing.kv_capacity_tokens(deployment(llama70b()), CATALOGUE["p5.48xlarge"], 4, 1) == int(4 * per_gpu * GIB / 327680)


@pytest.mark.parametrize(
    ("arch", "types", "tp", "pp", "gpus", "nodes"),
    [
        (llama70b(ctx=32768), ("p5.48xlarge",), 4, 1, 4, 1),  # BF16: TP2 leaves 3 GiB of KV < one 32k sequence
        (llama70b("fp8", ctx=32768), ("p5.48xlarge",), 2, 1, 2, 1),
        (llama70b(ctx=32768), ("p4d.24xlarge",), 8, 1, 8, 1),  # A100 40 GB needs all 8
        (llama8b(), ("g5.xlarge",), 1, 1, 1, 1),  # 8B BF16 fits one A10G (27k tokens of KV)
        (llama70b("fp8", ctx=8192), ("g6e.12xlarge",), 1, 2, 2, 1),  # PCIe: no TP; 2 pipeline stages hold 20k tokens
    ],
)
def test_smallest_parallelism_that_fits(arch: ModelArchitecture, types: tuple[str, ...], tp: int, pp: int, gpus: int, nodes: int) -> None:
    shape = sizing.replica_shape(deployment(arch), pool(*types))
    assert (shape.tensor_parallel_size, shape.pipeline_parallel_size, shape.gpus, shape.nodes) == (tp, pp, gpus, nodes)
    assert shape.fits_nvlink_domain


def test_multi_node_replica_is_split_per_node() -> None:
    # 70B BF16 with TP4 x PP2 on 4-GPU L40S nodes: two pods of four GPUs, one per node
    shape = sizing.replica_shape(deployment(llama70b(ctx=4096), tp=4, pp=2), pool("g6e.12xlarge"))
    assert (shape.gpus, shape.pods, shape.gpus_per_pod, shape.nodes) == (8, 2, 4, 2)
    assert shape.multi_node and not shape.fits_nvlink_domain


def test_model_that_cannot_fit_names_the_numbers() -> None:
    # even 8 single-GPU A10G stages leave ~22k tokens of KV, short of one 128k-token sequence
    with pytest.raises(sizing.SizingError, match=r"131\.\d GiB of weights.*131072-token.*g5\.xlarge"):
        sizing.replica_shape(deployment(llama70b(ctx=131072)), pool("g5.xlarge"))


def test_prefill_rate_agrees_with_current_engines() -> None:
    # perf-model.md 2.2: TensorRT-LLM 70B FP8 on 2 x H100 prefills >= 12.2k tok/s (a lower bound: decode time included);
    # Splitwise's 2023 vLLM BF16 stack reached 10.2k on 4 x H100, which current kernels exceed
    h100 = CATALOGUE["p5.48xlarge"].gpu
    fp8 = perf.prefill_tokens_per_s(llama70b(precision="fp8"), h100, 2)
    assert 12_200 <= fp8 <= 1.2 * 12_200
    assert perf.prefill_tokens_per_s(llama70b(), h100, 4) > 10_193


def test_decode_step_agrees_with_vllm_ci() -> None:
    # perf-model.md 2.1: vLLM CI 70B TP4 H100 bs 8 -> 19.1 ms/token; 8B TP1 -> 7.8 ms
    h100 = CATALOGUE["p5.48xlarge"].gpu
    assert perf.decode_step_s(llama70b(), h100, 4, 1, 8, 8 * 160) == pytest.approx(0.0191, rel=0.15)
    assert perf.decode_step_s(llama8b(), h100, 1, 1, 8, 8 * 160) == pytest.approx(0.0078, rel=0.15)


def steady_queueing_headroom(sig: PrefillSlo | LoadSlo, work: float, prompt: float) -> float:
    """The Erlang-C term of slo_target by hand, on steady traffic of ``prompt``-token prompts: Allen-Cunneen factor x
    mean prefill service / the TTFT left after the p99 prompt's prefill (at least half of it) x ln(min(work, 1) / 1 %)."""
    c = sig.coefficients
    assert c is not None
    tail = prompt * sig.tail_ratio
    slack = max(sig.ttft_s - tail * c.prefill_s(tail), 0.5 * sig.ttft_s)
    return sig.queue_factor * prompt * c.prefill_s(prompt) / slack * max(math.log(min(work, 1.0) / 0.01), 0.0)


def test_prod_sizing_is_consistent(prod_spec) -> None:  # type: ignore[no-untyped-def]
    s = sizing.size_platform(prod_spec)
    m = s.model("llama-70b-fp8")
    assert m.shape.tensor_parallel_size == 4 and m.shape.gpus == 4
    assert [r.role for r in m.roles] == ["prefill", "decode"]
    prefill, decode = m.role("prefill"), m.role("decode")
    assert prefill.metric == "vllm:prompt_tokens_total" and decode.metric == "vllm:generation_tokens_total"
    # prod's bursts (x2 for 120 s) end before a 349 s cold start: warm headroom, 0.9 / 2 = 0.45 of a replica
    assert m.cold_start.total_s > 120
    assert prefill.target_utilisation == decode.target_utilisation == 0.45
    # the derived targets (slo_target): peak replicas are what the load signal reads on steady peak traffic, over its
    # one-replica target. Peak prefill: 40 rps x 1500 tokens x (per token + attention over 750 tokens) = 3.0 replicas
    # of work, + 0.25 of Erlang-C queueing headroom = 3.3, / 0.9091 = 3.6 -> 4 replicas (no burst headroom: no past)
    load = prefill.signals[0]
    assert prefill.derived_target and isinstance(load, PrefillSlo)
    coef = load.coefficients
    assert coef is not None
    work = 40 * 1500 * coef.prefill_s(1500)
    need = work + steady_queueing_headroom(load, work, 1500)
    assert prefill.replicas_at_peak == math.ceil(need / load.target - 1e-9) == 4
    # each prompt token: its GEMMs plus its TP4 all-reduce traffic over NVLink; attention adds a few percent
    comm = perf.step_cost(prod_spec.models[0].architecture, CATALOGUE["p5.48xlarge"].gpu, 4, 1).comm_s_per_token
    assert comm > 0
    assert coef.prefill_s(1500) == pytest.approx(1 / m.prefill_tokens_per_s + comm, rel=0.05)
    # the batch at the ITL target over its step, which includes the batch's TP4 all-reduce traffic
    b, ctx = m.decode_batch_at_slo, sizing.mean_decode_context(prod_spec.models[0])
    step = perf.decode_step_s(prod_spec.models[0].architecture, CATALOGUE["p5.48xlarge"].gpu, 4, 1, b, b * ctx)
    assert m.decode_tokens_per_s == pytest.approx(b / step, abs=0.1) == pytest.approx(8621, abs=1)
    # peak decode: 40 rps x 250 tokens x (per token + KV share of its context) = 40 x 250 / 8,621 tok/s = 1.16
    # replicas of work, / 0.9091 = 1.3 -> 2 replicas; base 10 rps -> 0.3 -> 1
    c = decode.signals[0].coefficients
    assert c is not None and decode.derived_target and decode.signals[0].target == slo_target.TARGET_REPLICAS
    per_request = 250 * (c.decode_s_per_token + c.decode_s_per_kv_share * ctx / m.kv_capacity_tokens)
    assert per_request == pytest.approx(250 / m.decode_tokens_per_s, rel=1e-3)
    assert decode.replicas_at_base == math.ceil(10 * per_request / slo_target.TARGET_REPLICAS - 1e-9) == 1
    assert decode.replicas_at_peak == math.ceil(40 * per_request / slo_target.TARGET_REPLICAS - 1e-9) == 2
    assert prefill.min_replicas >= 1 and decode.min_replicas >= 1
    # non-preemptible queues: the two roles share the inference queue's 52-GPU quota with the search model (8 GPUs at
    # its peak) in proportion to peak demand (16 and 8 GPUs of the 32), a tighter share than the chat queue's 40, and
    # the ceilings use every GPU of chat's quota (whole-replica rounding leftovers go to the largest remainder), each
    # covering its role's peak
    assert (prefill.max_replicas + decode.max_replicas) * 4 == 40
    assert prefill.max_replicas >= prefill.replicas_at_peak and decode.max_replicas >= decode.replicas_at_peak
    assert "queue inference gpu_quota 52" in prefill.max_replicas_why and "queue inference gpu_quota 52" in decode.max_replicas_why
    assert prefill.scale_down_stabilization_s > m.cold_start.total_s
    # off-peak the warm minimum (2 per role) runs even where base traffic needs fewer replicas; 4 GPUs each
    base = max(prefill.replicas_at_base + decode.replicas_at_base, prefill.min_replicas + decode.min_replicas)
    assert base == 4
    peak_h = prod_spec.models[0].workload.peak_hours_per_day
    assert m.gpu_hours_per_day == (base * (24 - peak_h) + (prefill.replicas_at_peak + decode.replicas_at_peak) * peak_h) * 4


def test_prod_signals_by_hand(prod_spec) -> None:  # type: ignore[no-untyped-def]
    m = sizing.size_platform(prod_spec).model("llama-70b-fp8")
    prefill, decode = m.role("prefill"), m.role("decode")
    assert [(x.kind, x.purpose, x.metric_type) for x in prefill.signals] == [
        ("prefill_slo", "load", "AverageValue"), ("prompt_backlog", "burst", "AverageValue"),
        ("queue_time", "guard", "Value"),
    ]
    assert [(x.kind, x.purpose, x.metric_type) for x in decode.signals] == [
        ("decode_slo", "load", "AverageValue"), ("gauge", "saturation", "AverageValue"), ("itl", "guard", "Value"),
    ]
    load, backlog, queue_time = prefill.signals
    # prompt tokens/s per replica: 4 x 1,979 TFLOPS x MFU_GEMM / (2 x 70.55 GFLOP)
    assert m.prefill_tokens_per_s == pytest.approx(4 * 1979e12 * perf.MFU_GEMM / (2 * 70.55e9), abs=0.1)
    # derived target: one replica within the HPA's 10 % tolerance, 1 / 1.1
    assert load.target == slo_target.TARGET_REPLICAS == round(1 / 1.1, 4)
    coef = load.coefficients
    comm = perf.step_cost(prod_spec.models[0].architecture, CATALOGUE["p5.48xlarge"].gpu, 4, 1).comm_s_per_token
    assert coef is not None and coef.prefill_s_per_token == pytest.approx(1 / m.prefill_tokens_per_s + comm)
    # burst mode: queued prefill seconds, half the 2 s TTFT p99 per replica; guard: mean queue time at 1 s
    assert backlog.target == 0.5 * 2.0 and queue_time.target == 0.5 * 2.0
    load_d, kv, itl = decode.signals
    # the batch that meets ITL runs out of KV first: 333 sequences x (1,500 + 250 / 2) tokens = 80% of 678,094
    assert (m.decode_batch_at_slo, m.kv_capacity_tokens) == (333, 678_094)
    assert kv.target == min(sizing.KV_TARGET_UTILISATION, round(333 * (1500 + 250 / 2) / 678_094, 2)) == 0.8
    assert itl.target == pytest.approx(0.8 * 0.05)
    # one replica at the ITL batch reads exactly 1.0 of decode load: 9,801 tok/s x (per token + KV of its context)
    c = load_d.coefficients
    assert c is not None
    ctx_share = (1500 + 250 / 2) / 678_094
    assert m.decode_tokens_per_s * (c.decode_s_per_token + c.decode_s_per_kv_share * ctx_share) == pytest.approx(1.0, rel=1e-3)
    assert all(x.why and "\n" not in x.why for x in (*prefill.signals, *decode.signals))
    assert prefill.target == load.target and prefill.metric == load.metric  # the primary signal, for short reads


def test_decode_load_weighs_long_contexts_where_an_output_rate_target_does_not(prod_spec) -> None:  # type: ignore[no-untyped-def]
    # the same output tokens/s at 10x the context: the load signal asks for several times the replicas
    m = sizing.size_platform(prod_spec).model("llama-70b-fp8")
    c = m.role("decode").signals[0].coefficients
    assert c is not None
    rate = 5000.0
    short = rate * (c.decode_s_per_token + c.decode_s_per_kv_share * 1_625 / 678_094)
    long = rate * (c.decode_s_per_token + c.decode_s_per_kv_share * 16_250 / 678_094)
    assert long > 3 * short
    # and prefill: a 20k-token prompt costs more per token (attention) than a 1.5k one
    assert c.prefill_s(20_000) > 1.2 * c.prefill_s(1_500)


def test_aggregated_keda_signals_sum_prefill_and_decode_work(prod_spec) -> None:  # type: ignore[no-untyped-def]
    m = sizing.size_platform(prod_spec).model("search-8b")
    agg = m.role("aggregated")
    assert [x.kind for x in agg.signals] == ["load_slo", "prompt_backlog", "gauge", "queue_time", "itl"]
    load, _backlog, kv, _qt, _itl = agg.signals
    assert kv.metric == vllm_metrics.KV_CACHE
    c = load.coefficients
    assert c is not None
    # peak replicas: 20 rps of (800-token prompts + 150-token outputs at their KV share), plus the queueing headroom of
    # prompts behind the whole step, over the derived one-replica target
    assert agg.derived_target and isinstance(load, LoadSlo)
    ctx_share = (800 + 150 / 2) / m.kv_capacity_tokens
    # the prefill weighed by the decode steps it holds (sizing.prefill_stall), the decode at its ITL batch's cost
    assert c.prefill_stall > 1.0
    work = 20 * (800 * c.prefill_s(800) * c.prefill_stall + 150 * (c.decode_s_per_token + c.decode_s_per_kv_share * ctx_share))
    need = work + steady_queueing_headroom(load, work, 800)
    assert agg.replicas_at_peak == math.ceil(need / load.target - 1e-9)
    assert kv.target == sizing.decode_kv_target(prod_spec.models[1], m.decode_batch_at_slo, m.kv_capacity_tokens)


def test_hpa_backend_keeps_single_metrics_with_targets_at_the_workload_mix(stack_specs) -> None:  # type: ignore[no-untyped-def]
    m = sizing.size_platform(stack_specs["staging"]).model("llama-70b")
    agg = m.role("aggregated")
    assert [(x.metric, x.kind) for x in agg.signals] == [
        ("vllm:prompt_tokens_total", "rate"), ("vllm:num_requests_waiting", "gauge"), ("vllm:kv_cache_usage_perc", "gauge"),
    ]
    rate = agg.signals[0]
    # an aggregated replica also decodes what it prefills: the prompt rate at which the sized count suffices
    assert rate.target == round(1200 / agg.replicas_per_rps)
    assert all(x.purpose != "guard" for x in agg.signals)


def test_burst_mode_and_guard_switch_their_signals(raw_stack) -> None:  # type: ignore[no-untyped-def]
    from gpuscale.stackfile import validate_config

    raw = raw_stack("prod")
    raw["models"][0]["autoscaling"]["prefill"].update(burst_mode=False, slo_guard=False, target_utilisation=0.6)
    m = sizing.size_platform(validate_config(raw, "t")).model("llama-70b-fp8")
    prefill = m.role("prefill")
    assert [x.kind for x in prefill.signals] == ["prefill_load"]
    assert prefill.target_utilisation == prefill.target == 0.6 and prefill.burst_mode is False


def test_default_utilisation_is_headroom_for_bursts_shorter_than_a_cold_start() -> None:
    cold = sizing.ColdStart(node_s=60, gpu_ready_s=30, image_pull_s=180, weights_s=20, engine_init_s=60)
    m = deployment(llama70b())
    assert sizing.default_utilisation(m, cold) == sizing.PREFILL_TARGET_UTILISATION  # no bursts
    w = m.workload.model_copy(update={"burst": m.workload.burst.model_copy(update={"multiplier": 3.0, "duration_s": 60, "per_hour": 2})})
    assert sizing.default_utilisation(m.model_copy(update={"workload": w}), cold) == 0.3  # 0.9 / 3
    slow = w.model_copy(update={"burst": w.burst.model_copy(update={"duration_s": 3600})})  # a cold start catches it
    assert sizing.default_utilisation(m.model_copy(update={"workload": slow}), cold) == sizing.PREFILL_TARGET_UTILISATION
    huge = w.model_copy(update={"burst": w.burst.model_copy(update={"multiplier": 50.0})})
    assert sizing.default_utilisation(m.model_copy(update={"workload": huge}), cold) == sizing.MIN_TARGET_UTILISATION


def test_kv_target_is_capped_and_floored() -> None:
    m = deployment(llama70b())  # 1,000-token prompts, 200-token outputs: 1,100 tokens per decoding sequence
    assert sizing.decode_kv_target(m, 100, 1_000_000) == 0.11  # 110k / 1M
    assert sizing.decode_kv_target(m, 10, 1_000_000) == sizing.KV_TARGET_FLOOR  # 0.011 is noise
    assert sizing.decode_kv_target(m, 1000, 1_000_000) == sizing.KV_TARGET_UTILISATION  # 1.1 -> preemption headroom


def test_stack_metric_and_target_replace_the_primary_signal(raw_stack) -> None:  # type: ignore[no-untyped-def]
    from gpuscale.stackfile import validate_config

    raw = raw_stack("prod")
    raw["models"][0]["autoscaling"]["prefill"]["target"] = 10_000
    raw["models"][0]["autoscaling"]["decode"]["metric"] = "vllm:num_requests_running"
    m = sizing.size_platform(validate_config(raw, "t")).model("llama-70b-fp8")
    rate, backlog, _guard = m.role("prefill").signals
    assert (rate.metric, rate.kind, rate.target, rate.purpose) == ("vllm:prompt_tokens_total", "rate", 10_000, "load")
    assert backlog.kind == "prompt_backlog"
    assert "set in the stack file" in rate.why
    running, kv, _itl = m.role("decode").signals  # the load signal replaced; the running batch defaults to the ITL batch
    assert (running.metric, running.kind, running.target) == ("vllm:num_requests_running", "gauge", m.decode_batch_at_slo)
    assert kv.metric == "vllm:kv_cache_usage_perc"
    # a target alone on decode sets the KV target (the single-metric default)
    raw = raw_stack("prod")
    raw["models"][0]["autoscaling"]["decode"]["target"] = 0.5
    kv_only = sizing.size_platform(validate_config(raw, "t")).model("llama-70b-fp8").role("decode").signals
    assert (kv_only[0].metric, kv_only[0].target) == ("vllm:kv_cache_usage_perc", 0.5)
    assert [x.metric for x in kv_only].count("vllm:kv_cache_usage_perc") == 1


# ---------------------------------------------------------------- derived once, read everywhere


def test_an_explicit_zero_minimum_stays_zero_for_the_other_roles_budget() -> None:
    from gpuscale.feasibility import checked_sizing
    from tests.specs import model, small_spec

    wake = {"start": "0 8 * * 1-5", "end": "0 19 * * 1-5"}
    # a TTFT budget the KV transfer over g6e's 2.5 Gbit/s fits in (1.7 s of 10 s)
    slo = {"ttft_p99_s": 10.0, "itl_p99_s": 0.05, "request_timeout_s": 60}
    pd = model(mode="disaggregated", slo=slo, autoscaling={"prefill": {"min_replicas": 0, "wake_schedule": wake}},
               front_door={"enabled": False})  # the cron wakes it; no first-answer deadline to meet
    ms = checked_sizing(small_spec(models=[pd])).model("m8b")
    assert ms.role("prefill").min_replicas == 0
    # the prefill role keeps none warm, so nothing of the 16 GPUs is set aside for it: the roles share all 16 by demand
    assert sum(r.max_replicas for r in ms.roles) == 16
    assert sizing.default_min_replicas(small_spec(models=[pd]).models[0], "prefill") == 0


def test_best_effort_defaults_to_zero_and_others_to_one() -> None:
    from tests.specs import model, small_spec

    wake = {"start": "0 8 * * 1-5", "end": "0 19 * * 1-5"}
    be = small_spec(models=[model(criticality="best_effort", autoscaling={"aggregated": {"wake_schedule": wake}})])
    assert sizing.default_min_replicas(be.models[0], "aggregated") == 0
    assert sizing.default_min_replicas(small_spec().models[0], "aggregated") == 1


def test_bounds_are_quota_in_quota_only_queues_and_every_limit_otherwise() -> None:
    from tests.specs import model, pd_spec

    spec = pd_spec(
        teams=[{"name": "dept", "gpu_quota": 40, "gpu_limit": 56, "children": [
            {"name": "chat", "gpu_quota": 40, "gpu_limit": 48},
            {"name": "batch", "gpu_quota": 0, "gpu_limit": 48, "preemptible": True},
        ]}],
        models=[*pd_spec().model_dump()["models"][:0], model("m8b", queue="batch", pool="h100")],
    )
    bounds = {(b.kind, b.name): b.gpus for b in sizing.gpu_bounds(spec)}
    # a preemptible leaf counts against every limit on its path (its own 48 and the parent's 56), never a quota
    assert bounds == {("gpu_limit", "batch"): 48, ("gpu_limit", "dept"): 56, ("pool_gpu_limit", "h100"): 64}


def test_scheduler_defaults_and_rollout_deadline_come_from_sizing() -> None:
    from gpuscale.feasibility import checked_sizing
    from tests.specs import pd_spec, small_spec

    h100 = checked_sizing(pd_spec()).model("m70b")
    l40s = checked_sizing(small_spec()).model("m8b")
    assert (h100.max_num_seqs, h100.max_num_batched_tokens) == (1024, 8192)
    assert (l40s.max_num_seqs, l40s.max_num_batched_tokens) == (256, 2048)
    for ms in (h100, l40s):
        assert ms.rollout_deadline_s == max(600, math.ceil(2 * ms.cold_start.total_s))
