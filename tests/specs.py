"""Small platform specs for unit tests, built from plain dicts: one section changes, the rest stays minimal.

Unit tests build on these instead of the shipped stack files (tests/stacks/ checks those). Each builder returns the
``gpuscale:*`` dict a stack file would hold, so a test can change one field and validate it the way users do.
"""

from __future__ import annotations

import copy
from typing import Any

from gpuscale.spec.platform import PlatformSpec

LLAMA_8B: dict[str, Any] = {
    "params_b": 8.03, "layers": 32, "attention_heads": 32, "kv_heads": 8, "head_dim": 128, "hidden_size": 4096,
    "vocab_size": 128256, "max_context_tokens": 16384,
}
LLAMA_70B_FP8: dict[str, Any] = {
    "params_b": 70.55, "weight_precision": "fp8", "kv_cache_precision": "bf16", "layers": 80, "attention_heads": 64,
    "kv_heads": 8, "head_dim": 128, "hidden_size": 8192, "vocab_size": 128256, "max_context_tokens": 32768,
}


def environment(name: str = "t", stage: str = "dev", region: str = "us-east-1") -> dict[str, Any]:
    return {"name": name, "stage": stage, "aws_region": region, "networking": {"vpc_cidr": "10.0.0.0/16"},
            "endpoint_public_access": True, "public_access_cidrs": ["203.0.113.0/24"]}


def model(
    name: str = "m8b", *, arch: dict[str, Any] | None = None, queue: str = "team", pool: str = "l40s",
    mode: str = "aggregated", criticality: str = "standard", **extra: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": name,
        "architecture": copy.deepcopy(arch or LLAMA_8B),
        "weights": {"uri": f"s3://weights/{name}"},
        "serving": {"mode": mode},
        "slo": {"ttft_p99_s": 2.0, "itl_p99_s": 0.05, "request_timeout_s": 60, "criticality": criticality},
        "workload": {"base_rps": 1.0, "peak_rps": 4.0, "prompt_tokens": {"mean": 1000, "p99": 4000},
                     "output_tokens": {"mean": 200, "p99": 800}},
        "queue": queue,
        "node_pool": pool,
    }
    body.update(copy.deepcopy(extra))
    return body


def small_raw(**sections: Any) -> dict[str, Any]:
    """One L40S pool, a department with one team (16 GPUs), one 8B model served aggregated."""
    raw: dict[str, Any] = {
        "environment": environment(),
        "topology": {
            "zones": ["us-east-1a", "us-east-1b"],
            "gpu_pools": [{"name": "l40s", "instance_types": ["g6e.xlarge", "g6e.2xlarge"], "gpu_limit": 16}],
        },
        "teams": [{"name": "dept", "gpu_quota": 16, "gpu_limit": 16,
                   "children": [{"name": "team", "gpu_quota": 16, "gpu_limit": 16}]}],
        "models": [model()],
    }
    raw.update(copy.deepcopy(sections))
    return raw


def pd_raw(**sections: Any) -> dict[str, Any]:
    """One p5 pool (64 GPUs), one 70B FP8 model served disaggregated with a critical SLO, plus a preemptible queue."""
    raw = small_raw(
        topology={
            "zones": ["us-east-1a", "us-east-1b"],
            "gpu_pools": [{"name": "h100", "instance_types": ["p5.48xlarge"], "gpu_limit": 64}],
        },
        teams=[{"name": "dept", "gpu_quota": 64, "gpu_limit": 64, "children": [
            {"name": "chat", "gpu_quota": 48, "gpu_limit": 64},
            {"name": "batch", "gpu_quota": 16, "gpu_limit": 64, "preemptible": True},
        ]}],
        models=[model("m70b", arch=LLAMA_70B_FP8, queue="chat", pool="h100", mode="disaggregated",
                      criticality="critical",
                      autoscaling={"prefill": {"max_replicas": 4}, "decode": {"max_replicas": 4}})],
    )
    raw.update(copy.deepcopy(sections))
    return raw


def small_spec(**sections: Any) -> PlatformSpec:
    return PlatformSpec.model_validate(small_raw(**sections))


def pd_spec(**sections: Any) -> PlatformSpec:
    return PlatformSpec.model_validate(pd_raw(**sections))


def multi_node_aggregated(raw: dict[str, Any], index: int = 0) -> dict[str, Any]:
    """``raw`` with model ``index`` served aggregated at TP8 x PP2 (two 8-GPU pods on two p5 nodes): multi-node replicas
    exist only for aggregated serving, since vLLM's NIXL decode side refuses pipeline parallelism."""
    m = raw["models"][index]
    m["parallelism"] = {"tensor_parallel_size": 8, "pipeline_parallel_size": 2}
    m["workload"]["peak_rps"] = 20  # what 16-GPU replicas in chat's quota carry
    m.setdefault("serving", {})["mode"] = "aggregated"
    scaling = m.get("autoscaling", {})
    warm = (scaling.pop("prefill", None) or {}).get("min_replicas")
    scaling.pop("decode", None)
    if warm is not None:
        scaling["aggregated"] = {"min_replicas": warm}
    m["autoscaling"] = scaling
    return raw
