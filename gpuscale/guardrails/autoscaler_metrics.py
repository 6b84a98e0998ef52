"""The signals no autoscaler may scale LLM serving on, one list for the spec's ``metric`` and the policy pack.

GPU utilisation and DCGM's profiling counters measure how busy the GPU is, which an inference engine keeps near 100%
with ten requests in flight or a hundred; GPU memory is flat because vLLM pre-allocates the KV cache at start-up. An
autoscaler on any of them never sees load grow (or never sees it fall). Metric names the pinned vLLM no longer exposes
read nothing, so the autoscaler never scales: they come from ``versions.VLLM_REMOVED_METRICS``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuscale import versions


@dataclass(frozen=True)
class BannedMetric:
    pattern: re.Pattern[str]
    why: str


BANNED_METRICS: tuple[BannedMetric, ...] = (
    BannedMetric(re.compile(r"DCGM_FI_DEV_GPU_UTIL|DCGM_FI_DEV_MEM_COPY_UTIL|nvidia_gpu_duty_cycle", re.I),
                 "GPU utilisation is a duty cycle: it reads ~100% with 10 or 100 requests in flight, so the "
                 "autoscaler never sees load grow"),
    BannedMetric(re.compile(r"DCGM_FI_PROF_[A-Z0-9_]+", re.I),
                 "DCGM profiling counters (SM/tensor/DRAM activity) saturate with batch size, not with queued requests"),
    BannedMetric(re.compile(r"(DCGM_FI_DEV_)?FB_(USED|FREE)|gpu_?memory\w*", re.I),
                 "vLLM pre-allocates the KV cache at start-up, so GPU memory is flat: the autoscaler scales up once "
                 "and never down"),
)
FIX = (
    "scale prefill on rate(vllm:prompt_tokens_total) and vllm:num_requests_waiting, decode on "
    "vllm:kv_cache_usage_perc and rate(vllm:generation_tokens_total)"
)


@dataclass(frozen=True)
class Finding:
    """A banned signal found in a metric name or query: what matched, why it is banned, what to scale on instead."""

    matched: str
    why: str
    fix: str

    def message(self) -> str:
        return f"{self.why}; {self.fix}"


def banned_in(text: str) -> list[Finding]:
    """Every banned signal in a metric name or query (one per family); [] when none is."""
    out: list[Finding] = []
    for banned in BANNED_METRICS:
        m = banned.pattern.search(text)
        if m:
            out.append(Finding(m.group(0), banned.why, FIX))
            break  # one reason per text: the first family that matches
    for removed, replacement in sorted(versions.VLLM_REMOVED_METRICS.items()):
        bare = removed.split(":", 1)[1]
        m = re.search(rf"vllm[:_]{re.escape(bare)}\b", text)  # prometheus-adapter renames vllm:x to vllm_x
        if m:
            out.append(Finding(m.group(0), f"vLLM {versions.VLLM.tag} no longer exposes {removed} (the autoscaler "
                                           "would read nothing and never scale)", replacement))
    return out
