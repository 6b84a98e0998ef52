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
