"""The stages of a cold start as typed choices, and the sourced timings sizing derives each stage's seconds from.

A replica that starts from zero waits through: node provisioning (``topology.provisioning``), the GPU device plugin,
the vLLM image pull (``gpu_pools[].image_pull``), the weight load (``models[].weights``: S3 streaming, a shared file
system, the hub, optionally cached on the node's NVMe) and the engine start (``models[].cold_start.engine_start``:
torch.compile and CUDA-graph capture, or a compile cache). Each choice here has its default timing next to it, with
the measurement it comes from (``research/perf-model.md`` section 4 unless stated); ``gpuscale.first_answer.cold_start``
turns them into seconds per model (once, in sizing: ``ModelSizing.cold_start``) and ``gpuscale.manifests.cold_start`` emits what each choice needs.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import model_validator

from gpuscale.problems import at
from gpuscale.spec.base import Spec

ImagePull = Literal["registry", "soci-parallel", "snapshot"]
"""How a fresh GPU node gets the vLLM image:

* ``registry``: containerd pulls the layers and unpacks them one at a time (the default);
* ``soci-parallel``: the SOCI snapshotter's parallel pull-and-unpack mode (AL2023 EKS AMIs from v20250813, nodeadm
  feature gate ``FastImagePull``);
* ``snapshot``: the image is already in containerd's store on a Bottlerocket data volume created from an EBS snapshot
  (``image_snapshot_id``), so nothing is pulled."""
WeightsCache = Literal["none", "node-nvme"]
"""Where downloaded (``hf://``) weights live: per pod (``none``: an ``emptyDir``, gone with the pod) or in a directory on
the node's instance-store NVMe RAID0 (``node-nvme``), which the next replica on that node reads at NVMe speed."""
EngineStart = Literal["cold", "compile-cache"]
"""vLLM engine start after the weights: ``cold`` compiles (torch.compile) and captures CUDA graphs from scratch;
``compile-cache`` reads the torch.compile artefacts of an earlier start from a shared volume (``VLLM_CACHE_ROOT``),
so only the CUDA-graph capture is left."""

# ------------------------------------------------------------------------------------------ the timing catalogue

VLLM_IMAGE_COMPRESSED_GB = 9.0
"""vllm/vllm-openai compressed on the registry (perf-model.md 4.2: about 9 GB on Docker Hub)."""
VLLM_IMAGE_GIB = 30.0
"""Uncompressed vllm/vllm-openai plus layers being extracted (perf-model.md 4.2: 28.6 GB uncompressed)."""
REGISTRY_PULL_GBPS = 5.0
"""Download ceiling of one plain image pull (a few layer downloads in parallel), Gbit/s; a node's NIC below it is the
limit."""
IMAGE_EXTRACT_GIB_S = 0.2
"""Layer decompression and unpacking of a plain pull, GiB/s (one gzip stream per layer, layers in sequence): with
``VLLM_IMAGE_GIB`` and the download this gives the 120-240 s first pull perf-model.md 4.2 reports for a fresh node and
the "15-20 GB pulls take 4-6 minutes" of the AWS ML blog on SOCI for DLAMI/DLC."""
SOCI_PARALLEL_PULL_FACTOR = 0.5
"""Share of the plain pull time left with SOCI parallel pull-and-unpack (amazon-eks-ami nodeadm's config: 20 concurrent
chunked downloads and 12 concurrent unpacks per image through unpigz). The SOCI snapshotter's parallel-pull fallback
change (awslabs/soci-snapshotter PR #1938) measured parallel pull 14-50% faster than a plain pull on 20 GB+ images;
Grab's engineering blog reports about 4x on fresh nodes with tuned concurrency. 0.5 is the best of the measured range
for an image the size of vLLM's."""
SNAPSHOT_START_READ_GIB = 6.0
"""What the engine reads from its image before serving (Python, PyTorch, CUDA and NCCL libraries): an assumption, about
a fifth of the 28.6 GB image. On a data volume restored from a snapshot those blocks arrive lazily from S3."""
SNAPSHOT_INIT_MIB_S = 300
"""EBS provisioned rate for volume initialization (EC2NodeClass ``volumeInitializationRate``, 100-300 MiB/s in the
Karpenter v1.14.1 CRD): the rate a volume restored from a snapshot fetches its blocks."""
NVME_READ_GIB_S = 6.0
"""Reading cached weights back from the instance-store NVMe / page cache (perf-model.md 4.3: ~10 s for a 70B
checkpoint from a hot page cache)."""
ENGINE_START_ANCHORS: tuple[tuple[float, float, float], ...] = ((8.0, 40.0, 15.0), (70.0, 150.0, 60.0))
"""``(params_b, cold_s, compile_cache_s)``: vLLM engine start after the weights, perf-model.md 4.3 (8B: 15-40 s; 70B: 60 s
with a warm compile cache, 150 s cold; vllm issue #19824: ~70 s of torch.compile and ~60 s of CUDA-graph capture for
70B). Sizes between are interpolated linearly, outside clamped to the nearest anchor."""
SOCI_MIN_AL2023_RELEASE = "v20250813"
"""First amazon-eks-ami release with nodeadm's SOCI support (commit 69b11404 "add SOCI snapshotter support", #2352)."""

_SNAPSHOT_ID = re.compile(r"snap-[0-9a-f]{8}([0-9a-f]{9})?")
_CLAIM = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


def engine_start_s(params_b: float, engine: EngineStart) -> float:
    """Seconds from weights loaded to serving, for a model of ``params_b`` billion parameters."""
    (p0, cold0, cached0), (p1, cold1, cached1) = ENGINE_START_ANCHORS
    lo, hi = (cold0, cold1) if engine == "cold" else (cached0, cached1)
    share = min(max((params_b - p0) / (p1 - p0), 0.0), 1.0)
    return round(lo + (hi - lo) * share, 1)


def snapshot_id_problem(value: str) -> str | None:
    if _SNAPSHOT_ID.fullmatch(value):
        return None
    return f"{value!r} is not an EBS snapshot id: write snap- and 8 or 17 hex digits"


class ModelColdStartSpec(Spec):
    """The model's own cold-start choices (the node's image pull is its GPU pool's ``image_pull``)."""

    engine_start: EngineStart = "cold"
    """``cold`` (torch.compile and CUDA graphs from scratch) or ``compile-cache`` (torch.compile artefacts read from
    ``compile_cache_claim``, written there by the first replica that compiles)."""
    compile_cache_claim: str | None = None
    """A ReadWriteMany PersistentVolumeClaim in the model's namespace (EFS, FSx for Lustre) mounted as vLLM's
    ``VLLM_CACHE_ROOT``; required with ``engine_start: compile-cache``."""
    weights_cache: WeightsCache = "none"
    """``node-nvme`` keeps ``hf://`` downloads in a directory on the node's NVMe instance store, so the next replica on
    that node (a restart, a wake before the node is consolidated) reads them locally; a fresh node still downloads."""

    @model_validator(mode="after")
    def _claim_with_cache(self) -> ModelColdStartSpec:
        if self.engine_start == "compile-cache" and self.compile_cache_claim is None:
            raise at("compile_cache_claim",
                "engine_start: compile-cache needs compile_cache_claim: a ReadWriteMany PersistentVolumeClaim (EFS, "
                "FSx) every replica mounts, or the cache would start empty on each fresh node; or use engine_start: cold"
            )
        if self.compile_cache_claim is not None and self.engine_start != "compile-cache":
            raise at("compile_cache_claim",
                f"compile_cache_claim is only used with engine_start: compile-cache (got {self.engine_start}); set "
                "engine_start: compile-cache or drop the claim"
            )
        if self.compile_cache_claim is not None and not _CLAIM.fullmatch(self.compile_cache_claim):
            raise at("compile_cache_claim",
                f"{self.compile_cache_claim!r} is not a PersistentVolumeClaim name (a DNS subdomain: lowercase letters, "
                "digits, '-' and '.')"
            )
        return self

