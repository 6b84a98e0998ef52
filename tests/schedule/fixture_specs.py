"""Small specs for the scheduling scenarios, each built from a shipped stack so every field stays realistic.

``fixture_raw`` is one small cluster that holds every scenario, so a single synth serves them all:

- pool ``gang`` (g6e.12xlarge, 4 L40S per node, 12 GPUs = 3 nodes over 2 zones): ``llama-70b`` TP4 x PP2 is an
  8-GPU LeaderWorkerSet gang of 2 pods (queue ``llm``, quota 8), and ``filler-8b`` 1-GPU pods (queue ``fill``,
  quota 5) take GPUs away from it; both queues have room, so only the nodes decide. The ceilings (8 + 4) fit the pool,
  as the summed-bound check requires; the contention scenarios ask for a fifth filler on purpose;
- pool ``shared`` (g6e.xlarge, 8 GPUs): ``serve-8b`` (queue ``serve``, non-preemptible, quota 4) and ``batch-8b``
  (queue ``batch``, preemptible, quota 2) compete for the same GPUs;
- pool ``plain`` (g6.xlarge, no network-node-layer labels, 2 GPUs): ``plain-8b``.
"""

from __future__ import annotations

import copy
from typing import Any

from gpuscale.spec.platform import PlatformSpec
from gpuscale.stackfile import read_stack_config, validate_config
from tests.conftest import stack_path


def _model(base: dict[str, Any], name: str, queue: str, pool: str, rps: tuple[float, float] | None = None,
           **extra: Any) -> dict[str, Any]:
    """A copy of ``base`` renamed into ``queue`` on ``pool``; ``rps`` = (base, peak) traffic its replicas can carry."""
    m = copy.deepcopy(base)
    m.update(name=name, queue=queue, node_pool=pool, **extra)
    if rps is not None:
        m["workload"] = dict(m["workload"], base_rps=rps[0], peak_rps=rps[1])
    return m


def fixture_raw() -> dict[str, Any]:
    raw = read_stack_config(stack_path("prod"))
    small, big = raw["models"][1], raw["models"][0]
    raw["topology"]["zones"] = ["us-east-1a", "us-east-1b"]
    raw["topology"]["gpu_pools"] = [
        {"name": "gang", "instance_types": ["g6e.12xlarge"], "gpu_limit": 12},
        {"name": "shared", "instance_types": ["g6e.xlarge"], "gpu_limit": 8},
        {"name": "plain", "instance_types": ["g6.xlarge"], "gpu_limit": 2},
    ]
    raw["teams"] = [
        {"name": "inference", "gpu_quota": 19, "gpu_limit": 21, "children": [
            {"name": "llm", "gpu_quota": 8, "gpu_limit": 8},
            {"name": "fill", "gpu_quota": 5, "gpu_limit": 5},
            {"name": "serve", "gpu_quota": 4, "gpu_limit": 8},
            {"name": "edge", "gpu_quota": 2, "gpu_limit": 2},
        ]},
        {"name": "research", "gpu_quota": 2, "gpu_limit": 8, "preemptible": True, "children": [
            {"name": "batch", "gpu_quota": 2, "gpu_limit": 8, "preemptible": True},
        ]},
    ]
    autoscale = {"backend": "keda", "aggregated": {"min_replicas": 1, "max_replicas": 4}}
    raw["models"] = [
        _model(big, "llama-70b", "llm", "gang", rps=(0.002, 0.005),
               architecture=dict(big["architecture"], weight_precision="bf16"),
               parallelism={"tensor_parallel_size": 4, "pipeline_parallel_size": 2,
                            "allow_tensor_parallel_over_pcie": True},
               serving={"mode": "aggregated"}, slo=dict(big["slo"], criticality="standard"),
               autoscaling={"backend": "keda", "aggregated": {"min_replicas": 1, "max_replicas": 1}}),
        _model(small, "filler-8b", "fill", "gang", rps=(2, 8),
               autoscaling={"backend": "keda", "aggregated": {"min_replicas": 1, "max_replicas": 4}}),
        _model(small, "serve-8b", "serve", "shared", rps=(2, 8), autoscaling=autoscale),
        _model(small, "batch-8b", "batch", "shared", rps=(2, 8), autoscaling=autoscale),
        _model(small, "plain-8b", "edge", "plain", rps=(0.02, 0.05),
               autoscaling={"backend": "keda", "aggregated": {"min_replicas": 1, "max_replicas": 2}}),
    ]
    return raw


def fixture_spec() -> PlatformSpec:
    return validate_config(fixture_raw(), "schedule-fixture")


def prod_variant_raw() -> dict[str, Any]:
    """Prod with what the shipped stacks lack, everything else as shipped:

    - the ``l40s`` pool on g6e.12xlarge serving ``llama-70b-bf16`` TP4 x PP2 (an 8-GPU, 2-pod LeaderWorkerSet gang,
      queue ``chat``), as ``tests/manifests/test_kai_wiring.py`` builds it;
    - ``search-8b`` moved to a new pool ``l4`` on g6.xlarge (no network-node-layer labels);
    - ``batch-70b``, a preemptible copy of ``llama-70b-fp8`` in the ``training`` queue on the ``h100`` pool, its
      ceiling (6 x 4 GPUs) what the chat ceilings (40) leave of the pool's 64;
    - traffic each model's share of its queue can carry (``llama-70b-fp8`` peaks at 28 rps, sharing chat's quota with
      the bf16 gang).
    """
    raw = read_stack_config(stack_path("prod"))
    fp8, search = raw["models"][0], raw["models"][1]
    raw["topology"]["gpu_pools"][1]["instance_types"] = ["g6e.12xlarge"]
    raw["topology"]["gpu_pools"].append({"name": "l4", "instance_types": ["g6.xlarge"], "gpu_limit": 12})
    # traffic each model's ceilings carry once the bf16 gang shares chat's quota (sizing refuses an unreachable peak)
    fp8["workload"] = dict(fp8["workload"], base_rps=10, peak_rps=28)
    raw["models"] = [
        fp8,
        _model(search, "search-8b", "search", "l4", rps=(0.5, 1.0)),
        _model(search, "llama-70b-bf16", "chat", "l40s", rps=(0.05, 0.2),
               architecture=dict(fp8["architecture"], weight_precision="bf16"),
               parallelism={"tensor_parallel_size": 4, "pipeline_parallel_size": 2,
                            "allow_tensor_parallel_over_pcie": True},
               autoscaling={"backend": "keda", "aggregated": {"min_replicas": 1, "max_replicas": 2}}),
        _model(fp8, "batch-70b", "training", "h100", serving={"mode": "aggregated"}, rps=(5, 20),
               slo=dict(fp8["slo"], criticality="standard"),
               autoscaling={"backend": "keda", "aggregated": {"min_replicas": 1, "max_replicas": 6}}),
    ]
    return raw


def prod_variant_spec() -> PlatformSpec:
    return validate_config(prod_variant_raw(), "prod-variant")

