"""What a stack will be warned about at synth, known before synth: the same warning functions the components log
through ``pulumi.log.warn`` (``GpuNodePool``: disruption, capacity, network layers; ``VllmService``: EFA with the stock
image), called here on the spec and its sizing so ``validate`` and the plan say them too, word for word."""

from __future__ import annotations

from gpuscale.manifests import karpenter, vllm
from gpuscale.sizing import PlatformSizing
from gpuscale.spec.platform import PlatformSpec


def stack_warnings(spec: PlatformSpec, sizing: PlatformSizing) -> list[str]:
    """Every warning synth would log for ``spec``, pools first, in the order the components log them."""
    out: list[str] = []
    for pool in spec.topology.gpu_pools:
        out += karpenter.disruption_warnings(pool, karpenter.longest_cold_start_s(spec, pool.name))
        out += karpenter.capacity_warnings(pool)
        out += karpenter.network_layer_warnings(pool)
    for model in spec.models:
        out += vllm.efa_image_warnings(vllm.ServingSettings.from_platform(spec, sizing, model.name))
    return out
