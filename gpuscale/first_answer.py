"""The cold start stage by stage, the first answer from zero, and what the front door derives from them.

Pure functions of the spec (and the replica's instance and prefill rate); ``gpuscale.sizing`` calls them once per
model, and the components, the simulator and the plan read the results from ``ModelSizing``.

* ``cold_start``: seconds of each stage for the choices of ``gpuscale.spec.cold_start`` (node, GPU device plugin, image
  pull, weights, engine start) on a fresh node.
* ``first_answer``: a request that reaches a model at zero waits for the front door's queue to be seen (one scrape and
  one KEDA poll at most), the cold start, then its first token (the TTFT target). The stack's request timeout must
  cover that, or scale-to-zero is refused naming the stage to speed up (``first_answer_problems``).
* ``front_door_sizing``: the hold limit (a request may wait only while its wait plus the TTFT target still fits the
  request timeout), the queue bound (what the first replica serves before the oldest held request runs out of time),
  the trigger's per-replica target, the ``Retry-After`` of a 503 (the expected ready time of a model woken from
  zero) and of a 429 (the time a saturated replica takes to free a slot).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal

from gpuscale.problems import Problem
from gpuscale.spec.base import Spec
from gpuscale.spec.catalogue import GpuInstanceType
from gpuscale.spec.cold_start import (
    IMAGE_EXTRACT_GIB_S,
    NVME_READ_GIB_S,
    REGISTRY_PULL_GBPS,
    SNAPSHOT_INIT_MIB_S,
    SNAPSHOT_START_READ_GIB,
    SOCI_MIN_AL2023_RELEASE,
    SOCI_PARALLEL_PULL_FACTOR,
    VLLM_IMAGE_COMPRESSED_GB,
    VLLM_IMAGE_GIB,
    EngineStart,
    ImagePull,
    engine_start_s,
)
from gpuscale.spec.model import ModelDeployment
from gpuscale.spec.topology import GpuNodePoolSpec, ProvisioningSpec
from gpuscale.upstream_bounds import ENVOY_EXT_PROC_MESSAGE_TIMEOUT_S

if TYPE_CHECKING:
    from gpuscale.spec.platform import PlatformSpec

EXT_PROC_MARGIN_S = 30
"""The door's ext_proc ``message_timeout`` is the hold limit plus this: the EPP answers at the hold limit, Envoy never
cuts a hold short (``docs/upstream-readings.md``, Envoy: whether the timer runs on a held request at all)."""
HOLD_LIMIT_MAX_S = ENVOY_EXT_PROC_MESSAGE_TIMEOUT_S.high - EXT_PROC_MARGIN_S
"""The longest hold the door's Envoy allows: its ext_proc ``message_timeout`` may not exceed 3600 s
(``gpuscale.upstream_bounds``), so a hold ends by 3570 s whatever the request timeout."""

Stage = Literal["detection", "node", "gpu_ready", "image_pull", "weights", "engine_start", "first_token"]
WeightsSource = Literal["s3-stream", "shared-fs", "hub-download"]
_SOURCES: dict[str, WeightsSource] = {"s3": "s3-stream", "pvc": "shared-fs", "hf": "hub-download"}


class ColdStart(Spec):
    """The chain a new replica waits through on a fresh node, seconds, and the choices each stage was timed for."""

    node_s: float
    """Pending pod to node Ready (the provisioner's slowest, ``node_ready_s[1]``)."""
    gpu_ready_s: float
    """Node Ready to ``nvidia.com/gpu`` allocatable (device plugin)."""
    image_pull_s: float
    weights_s: float
    """Weights from their source (S3 stream, shared file system or hub download)."""
    engine_init_s: float
    image_pull: ImagePull = "registry"
    weights_source: WeightsSource = "s3-stream"
    engine_start: EngineStart = "cold"
    weights_cached_s: float | None = None
    """Weights from the node's NVMe cache (``weights_cache: node-nvme``), when an earlier replica there downloaded
    them; ``None`` when nothing is cached on the node."""

    @property
    def total_s(self) -> float:
        return self.node_s + self.gpu_ready_s + self.image_pull_s + self.weights_s + self.engine_init_s

    @property
    def warm_node_s(self) -> float:
        """A replica on a node that is already up with the image cached."""
        return self.weights_s + self.engine_init_s

    def stages(self) -> list[tuple[Stage, float]]:
        return [("node", self.node_s), ("gpu_ready", self.gpu_ready_s), ("image_pull", self.image_pull_s),
                ("weights", self.weights_s), ("engine_start", self.engine_init_s)]


class FirstAnswer(Spec):
    """The first answer to a request that reaches the model at zero replicas, on a fresh node."""

    detection_s: float
    """The front door's queue seen by Prometheus and KEDA: one scrape plus one poll at most."""
    cold_start_s: float
    first_token_s: float
    """The TTFT target (``slo.ttft_p99_s``): what the hold must leave for the first token once a replica is up."""
    request_timeout_s: float
    slowest_stage: Stage
    """The stage to speed up: the longest one that has a faster choice."""
    speed_up: str
    """That faster choice, as a stack-file change."""

    @property
    def total_s(self) -> float:
        return self.detection_s + self.cold_start_s + self.first_token_s

    @property
    def deadline_s(self) -> float:
        """When the first answer must come: the request timeout, or the longest hold plus the first token when that
        is sooner (the door answers 503 at its hold limit)."""
        return min(self.request_timeout_s, HOLD_LIMIT_MAX_S + self.first_token_s)

    @property
    def meets_timeout(self) -> bool:
        return self.total_s <= self.deadline_s


class FrontDoorSizing(Spec):
    """The numbers the front door is configured with, all derived here (none is a constant)."""

    hold_limit_s: int
    """How long a request may wait at the door (EPP ``defaultRequestTTL``): the request timeout minus the TTFT target,
    so a request is held only while it can still get its first token in time, then answered 503; at most
    ``HOLD_LIMIT_MAX_S`` (Envoy's bound on the ext_proc ``message_timeout``)."""
    queue_bound: int
    """Requests the door holds at most (EPP ``maxRequests``): what the first replica serves, at its sized rate, between
    coming up and the oldest held request's first-token budget running out; more are answered 503 at once."""
    per_replica: int
    """Held requests per replica the KEDA trigger on the door's queue targets: what one replica's sized rate
    accumulates over one wake (detection plus cold start)."""
    retry_after_s: int
    """``Retry-After`` of a 503 from the door: the expected ready time of the model woken from zero (detection plus the
    cold start), rounded up."""
    retry_after_saturated_s: int
    """``Retry-After`` of a 429 from the door (replicas are up but saturated): how long one request holds its slot
    (the TTFT target plus the mean output at the ITL target), rounded up; a retry then finds a slot freed, not a cold
    start's worth of waiting."""
    poll_s: int
    idle_window_s: int
    first_answer: FirstAnswer


# ------------------------------------------------------------------------------------------ stages


def registry_pull_s(instance: GpuInstanceType) -> float:
    """A plain pull on a fresh node: download at the node's bandwidth (capped by the registry), then extraction."""
    gbps = min(instance.network_gbps, REGISTRY_PULL_GBPS) if instance.network_gbps > 0 else REGISTRY_PULL_GBPS
    return VLLM_IMAGE_COMPRESSED_GB * 8.0 / gbps + VLLM_IMAGE_GIB / IMAGE_EXTRACT_GIB_S


def image_pull_s(method: ImagePull, instance: GpuInstanceType) -> float:
    """The vLLM image on a fresh node by ``method`` (timings: ``gpuscale.spec.cold_start``)."""
    if method == "registry":
        return round(registry_pull_s(instance), 1)
    if method == "soci-parallel":
        return round(registry_pull_s(instance) * SOCI_PARALLEL_PULL_FACTOR, 1)
    # a data volume restored from the snapshot: nothing to pull; the blocks the engine reads at start hydrate lazily
    return round(SNAPSHOT_START_READ_GIB * 1024 / SNAPSHOT_INIT_MIB_S, 1)


def cold_start(
    model: ModelDeployment, pool: GpuNodePoolSpec, provisioning: ProvisioningSpec, instance: GpuInstanceType,
    weights_gib: float,
) -> ColdStart:
    """Each stage of ``model``'s cold start on a fresh ``instance`` of ``pool`` (``weights_gib`` of weights); a
    measured figure in ``topology.provisioning`` replaces the derived one of its stage."""
    gib = weights_gib
    cached = model.weights.scheme == "hf" and model.cold_start.weights_cache == "node-nvme"
    return ColdStart(
        node_s=provisioning.node_ready_s[1],
        gpu_ready_s=provisioning.gpu_ready_s,
        image_pull_s=(provisioning.image_pull_s if provisioning.image_pull_s is not None
                      else image_pull_s(pool.image_pull, instance)),
        weights_s=round(gib / model.weights.throughput_gib_s, 1),
        engine_init_s=(provisioning.engine_init_s if provisioning.engine_init_s is not None
                       else engine_start_s(model.architecture.params_b, model.cold_start.engine_start)),
        image_pull=pool.image_pull,
        weights_source=_SOURCES[model.weights.scheme],
        engine_start=model.cold_start.engine_start,
        weights_cached_s=round(gib / NVME_READ_GIB_S, 1) if cached else None,
    )


# ------------------------------------------------------------------------------------------ first answer


def detection_s(poll_s: int) -> float:
    """Worst case from the first held request to KEDA scaling 0 -> 1: one scrape of the door's queue, one KEDA poll."""
    return 2.0 * poll_s


def faster_choice(stage: Stage, model: ModelDeployment, pool: GpuNodePoolSpec, provisioning: ProvisioningSpec) -> str | None:
    """The stack-file change that shortens ``stage``; ``None`` when the stage already has its fastest choice."""
    where = f"gpu pool {pool.name}"
    if stage == "image_pull" and provisioning.image_pull_s is None:
        if pool.image_pull == "registry":
            family = pool.ami_alias.partition("@")[0]
            if family == "al2023":
                return f"{where}: image_pull: soci-parallel"
            return f"{where}: image_pull: snapshot with an image_snapshot_id of the image pre-pulled"
        if pool.image_pull == "soci-parallel":
            return f"{where}: a bottlerocket ami_alias with image_pull: snapshot (the image pre-pulled on a data volume)"
    if stage == "engine_start" and provisioning.engine_init_s is None and model.cold_start.engine_start == "cold":
        return "cold_start.engine_start: compile-cache with a cold_start.compile_cache_claim"
    if stage == "weights" and model.weights.scheme != "s3":
        return "weights.uri: s3://... (the Run:ai streamer reads ~3.5 GiB/s)"
    if stage in ("node", "gpu_ready") and provisioning.node_provisioner != "karpenter":
        return "topology.provisioning.node_provisioner: karpenter"
    if stage == "detection" and model.front_door.poll_s > 1:
        return "a shorter front_door.poll_s"
    return None


def first_answer(
    model: ModelDeployment, pool: GpuNodePoolSpec, provisioning: ProvisioningSpec, cold: ColdStart,
) -> FirstAnswer:
    """The first answer from zero on a fresh node, and the stage to speed up: the longest one that has a faster
    choice (or the longest of all when none has)."""
    detect = detection_s(model.front_door.poll_s)
    stages: list[tuple[Stage, float]] = sorted([("detection", detect), *cold.stages()], key=lambda s: -s[1])
    choices = [(stage, faster_choice(stage, model, pool, provisioning)) for stage, _ in stages]
    stage, choice = next(((st, c) for st, c in choices if c is not None), (stages[0][0], None))
    pick = (stage, choice or "every stage already has its fastest choice")
    return FirstAnswer(
        detection_s=detect, cold_start_s=round(cold.total_s, 1), first_token_s=model.slo.ttft_p99_s,
        request_timeout_s=model.slo.request_timeout_s, slowest_stage=pick[0], speed_up=pick[1],
    )


def front_door_sizing(model: ModelDeployment, answer: FirstAnswer, rps_per_replica: float) -> FrontDoorSizing:
    """Hold limit, queue bound, per-replica trigger target and ``Retry-After`` of the door before ``model``.

    ``rps_per_replica``: requests per second one replica (one of each role) serves at the sized utilisation. While the
    model wakes, requests pile up at the door at their arrival rate, so ``held / wake`` estimates that rate: the trigger
    asks for one replica per ``rps_per_replica x wake`` held requests, the replicas the arrival rate needs, not one per
    handful of requests that the first replica clears in seconds once it is up. The first replica is up ``wake`` after
    the first hold; it has ``hold_limit - wake`` left to serve the backlog before the oldest held request's first-token
    budget runs out, at its sized rate: that many requests is the queue bound.
    """
    slo = model.slo
    hold = min(HOLD_LIMIT_MAX_S, max(1, math.floor(slo.request_timeout_s - slo.ttft_p99_s)))
    wake = answer.detection_s + answer.cold_start_s
    return FrontDoorSizing(
        hold_limit_s=hold,
        queue_bound=max(1, math.floor(max(hold - wake, 0.0) * rps_per_replica)),
        per_replica=max(1, math.ceil(rps_per_replica * wake)),
        retry_after_s=math.ceil(wake),
        retry_after_saturated_s=max(1, math.ceil(slo.ttft_p99_s + model.workload.output_tokens.mean * slo.itl_p99_s)),
        poll_s=model.front_door.poll_s,
        idle_window_s=model.front_door.idle_window_s,
        first_answer=answer,
    )


def first_answer_problems(spec: PlatformSpec, answers: dict[str, FirstAnswer]) -> list[Problem]:
    """Scale-to-zero refused where the first answer from zero cannot meet the request timeout."""
    problems = []
    for i, m in enumerate(spec.models):
        fa = answers.get(m.name)
        if fa is None or not m.may_scale_to_zero or fa.meets_timeout:
            continue
        role = next(r for r in m.serving.roles if m.scales_to_zero(r))
        if fa.deadline_s < fa.request_timeout_s:  # the door's Envoy ends every hold by HOLD_LIMIT_MAX_S
            limit = (f"the front door holds a request at most {HOLD_LIMIT_MAX_S} s (Envoy refuses an ext_proc "
                     f"message_timeout above {ENVOY_EXT_PROC_MESSAGE_TIMEOUT_S.high} s)")
            raise_it = "keep a warm replica (min_replicas: 1)"
        else:
            limit = f"slo.request_timeout_s is {fa.request_timeout_s:g} s"
            raise_it = f"raise slo.request_timeout_s to at least {math.ceil(fa.total_s)}, or keep a warm replica (min_replicas: 1)"
        problems.append(Problem(
            f"models[{i}].autoscaling.{role}.min_replicas",
            f"model {m.name} may scale to zero, but its first answer from zero takes {fa.total_s:.0f} s (queue seen "
            f"{fa.detection_s:.0f} s + cold start {fa.cold_start_s:.0f} s + first token {fa.first_token_s:g} s) and "
            f"{limit}: the first requests of the day would be answered 503. "
            f"Speed up the {fa.slowest_stage.replace('_', ' ')}: {fa.speed_up}. Or {raise_it}",
        ))
    return problems


def fastest_image_pull(pool: GpuNodePoolSpec) -> ImagePull:
    """The fastest image pull the pool's AMI family allows: a snapshot on Bottlerocket, SOCI parallel pull on an
    AL2023 release that has it, else the registry."""
    family, _, release = pool.ami_alias.partition("@")
    if family == "bottlerocket":
        return "snapshot"
    if family == "al2023" and (release == "latest" or release >= SOCI_MIN_AL2023_RELEASE):
        return "soci-parallel"
    return "registry"


def fastest_cold_start(
    model: ModelDeployment, pool: GpuNodePoolSpec, provisioning: ProvisioningSpec, instance: GpuInstanceType,
    weights_gib: float,
) -> ColdStart:
    """The model's cold start with the fastest choice the stack allows at each stage: the pool's best image pull and the
    compile cache (the node provisioner and the weights' location stay what the stack has). A measured figure of a
    stage whose choice changes no longer applies and is derived instead."""
    faster_pool = pool.model_copy(update={"image_pull": fastest_image_pull(pool)})
    faster_model = model.model_copy(update={
        "cold_start": model.cold_start.model_copy(update={"engine_start": "compile-cache"}),
    })
    overrides: dict[str, float | None] = {}
    if faster_pool.image_pull != pool.image_pull:
        overrides["image_pull_s"] = None
    if model.cold_start.engine_start != "compile-cache":
        overrides["engine_init_s"] = None
    return cold_start(faster_model, faster_pool, provisioning.model_copy(update=overrides), instance, weights_gib)
