"""Every vLLM metric name gpuscale reads, for the pinned vLLM (``versions.VLLM``): the one place they are spelled.

Names from ``vllm/v1/metrics/loggers.py`` of the v0.33.0 wheel (commit 4ba787ec9; ``research/upstream-facts.md``
section 7). Counters are scraped with ``prometheus_client``'s ``_total`` suffix; histograms are read through their
``_sum``/``_count`` series.
"""

from __future__ import annotations

from collections.abc import Mapping

# gauges
QUEUE = "vllm:num_requests_waiting"
RUNNING = "vllm:num_requests_running"
KV_CACHE = "vllm:kv_cache_usage_perc"
# counters
PROMPT_TOKENS = "vllm:prompt_tokens_total"
GENERATION_TOKENS = "vllm:generation_tokens_total"
# histograms
REQUEST_PROMPT_TOKENS = "vllm:request_prompt_tokens"
"""Each finished request's prompt length (observed when the request finishes): the recent mean prompt."""
QUEUE_TIME = "vllm:request_queue_time_seconds"
"""Each finished request's time in the WAITING state (observed when the request finishes)."""
INTER_TOKEN_LATENCY = "vllm:inter_token_latency_seconds"
"""Every inter-token gap (observed each engine iteration)."""
TIME_TO_FIRST_TOKEN = "vllm:time_to_first_token_seconds"

TTFT_BUCKETS_S: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0,
    640.0, 2560.0,
)
"""Upper bounds (``le``) of ``vllm:time_to_first_token_seconds`` (``PrometheusStatLogger.__init__`` in
``vllm/v1/metrics/loggers.py``; the same list in every stored version read, from commit 005a810b on: not re-read in the
v0.33.0 wheel). An SLO burn rate counts a request good only up to a bucket bound (``gpuscale.alerts.burn_rate``)."""
ITL_BUCKETS_S: tuple[float, ...] = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)
"""Upper bounds of ``vllm:inter_token_latency_seconds`` (same file and caveat as ``TTFT_BUCKETS_S``)."""
BUCKETS_S: Mapping[str, tuple[float, ...]] = {TIME_TO_FIRST_TOKEN: TTFT_BUCKETS_S, INTER_TOKEN_LATENCY: ITL_BUCKETS_S}

GAUGES: frozenset[str] = frozenset({QUEUE, RUNNING, KV_CACHE})
"""vLLM gauges an autoscaler may target."""
COUNTERS: frozenset[str] = frozenset({PROMPT_TOKENS, GENERATION_TOKENS})
"""vLLM counters an autoscaler may ``rate()``."""
HISTOGRAMS: frozenset[str] = frozenset({REQUEST_PROMPT_TOKENS, QUEUE_TIME, INTER_TOKEN_LATENCY, TIME_TO_FIRST_TOKEN})
"""vLLM histograms whose ``_sum``/``_count`` the queries read (``request_prompt_tokens`` and
``request_queue_time_seconds`` are observed when a request finishes, the latencies every iteration)."""
REMOVED: Mapping[str, str] = {
    "vllm:gpu_cache_usage_perc": f"deprecated in vLLM 0.9 and absent since ~0.12; use {KV_CACHE}",
    "vllm:time_per_output_token_seconds": f"deprecated in 0.11, hidden in 0.12; use {INTER_TOKEN_LATENCY}",
    "vllm:num_requests_swapped": f"removed with the V0 engine; use {QUEUE}",
}
"""Names the pinned vLLM no longer exposes, with the replacement."""
