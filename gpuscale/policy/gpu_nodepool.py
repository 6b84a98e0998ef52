"""Whether a Karpenter NodePool can launch GPU nodes, decided by what its requirements admit, not by what they name.

A NodePool's requirements are a conjunction: Karpenter launches an instance type only if it meets all of them. A pool
is a GPU pool when some EC2 GPU instance type meets every requirement (so ``instance-category NotIn [t]`` admits
g and p types, and no requirements at all admit every type), or when it says so another way (the GPU taint, the
``nvidia.com/gpu.present`` node label, an ``nvidia.com/gpu`` limit). Requirements on keys this table does not describe
(zones, capacity types, sizes, your own labels) restrict nothing a GPU type lacks, so they are taken as met.

The table below holds one row per EC2 GPU family and GPU count with the labels Karpenter puts on its instance types
(karpenter-provider-aws ``pkg/providers/instancetype/types.go`` at the pinned tag: ``instance-category`` is the
family's letters, ``instance-generation`` its number, ``instance-gpu-name`` the lower-cased part, counts and memory
in MiB per GPU, from the EC2 accelerated-computing instance documentation). A GPU family missing from it is still
found by name when a requirement lists it (``node.kubernetes.io/instance-type In [p7.48xlarge]``) and is then taken
to meet every GPU requirement (unknown is treated as possible).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuscale import labels

INSTANCE_TYPE = "node.kubernetes.io/instance-type"
FAMILY = "karpenter.k8s.aws/instance-family"
CATEGORY = "karpenter.k8s.aws/instance-category"
GENERATION = "karpenter.k8s.aws/instance-generation"
ARCH = "kubernetes.io/arch"
GPU_COUNT = "karpenter.k8s.aws/instance-gpu-count"
GPU_MEMORY = "karpenter.k8s.aws/instance-gpu-memory"
GPU_NAME = "karpenter.k8s.aws/instance-gpu-name"
GPU_MANUFACTURER = "karpenter.k8s.aws/instance-gpu-manufacturer"
GPU_NAME_LABELS = frozenset({GPU_NAME, GPU_MANUFACTURER})
NUMERIC_GPU_LABELS = frozenset({GPU_COUNT, GPU_MEMORY})
GPU_INSTANCE = re.compile(r"^(p\d|g\d|gr\d)")
"""EC2 GPU families (p3..p6, g4dn..g7e, gr6); Graviton CPU types carry the ``g`` as a suffix (m7g), not a prefix."""
_FAMILY_PARTS = re.compile(r"^([a-z]+)(\d+)")

UNKNOWN = object()
"""A label value a row cannot know (a GPU family outside the table): every requirement on it may be met."""


@dataclass(frozen=True)
class GpuRow:
    """One GPU family at one GPU count, as Karpenter labels its instance types."""

    family: str
    manufacturer: str
    gpu: str
    gpus: int
    gpu_memory_mib: int
    arch: str = "amd64"

    def value(self, key: str) -> object:
        """The row's value of a label, ``None`` when its types do not carry it, ``UNKNOWN`` when unknowable."""
        category, generation = _FAMILY_PARTS.match(self.family).groups()  # type: ignore[union-attr]
        return {
            FAMILY: self.family, CATEGORY: category, GENERATION: generation, ARCH: self.arch,
            GPU_COUNT: str(self.gpus), GPU_MEMORY: str(self.gpu_memory_mib), GPU_NAME: self.gpu,
            GPU_MANUFACTURER: self.manufacturer, labels.GPU_PRESENT_LABEL: "true",
        }.get(key, UNKNOWN)


def _rows(family: str, manufacturer: str, gpu: str, counts: tuple[int, ...], memory_mib: int,
          arch: str = "amd64") -> list[GpuRow]:
    return [GpuRow(family, manufacturer, gpu, n, memory_mib, arch) for n in counts]


GPU_ROWS: tuple[GpuRow, ...] = (
    *_rows("p3", "nvidia", "v100", (1, 4, 8), 16384), *_rows("p3dn", "nvidia", "v100", (8,), 32768),
    *_rows("p4d", "nvidia", "a100", (8,), 40960), *_rows("p4de", "nvidia", "a100", (8,), 81920),
    *_rows("p5", "nvidia", "h100", (1, 8), 81920), *_rows("p5e", "nvidia", "h200", (8,), 144384),
    *_rows("p5en", "nvidia", "h200", (8,), 144384), *_rows("p6-b200", "nvidia", "b200", (8,), 183359),
    *_rows("p6e-gb200", "nvidia", "gb200", (4,), 189471, "arm64"),
    *_rows("g4dn", "nvidia", "t4", (1, 4, 8), 16384), *_rows("g4ad", "amd", "radeon pro v520", (1, 2, 4), 8192),
    *_rows("g5", "nvidia", "a10g", (1, 4, 8), 24576), *_rows("g5g", "nvidia", "t4g", (1, 2), 16384, "arm64"),
    *_rows("g6", "nvidia", "l4", (1, 4, 8), 23034), *_rows("g6e", "nvidia", "l40s", (1, 4, 8), 46068),
    *_rows("gr6", "nvidia", "l4", (1,), 23034),
)


@dataclass(frozen=True)
class _Unlisted:
    """A GPU family a requirement names that the table lacks: its family and category are known, the rest is not."""

    family: str

    def value(self, key: str) -> object:
        match = _FAMILY_PARTS.match(self.family)
        if key == FAMILY:
            return self.family
        if key == CATEGORY and match:
            return match.group(1)
        return UNKNOWN


def requirement_met(key: str, op: str, values: Sequence[str], value: object, instance_type: str = "") -> bool:
    """Whether a label value (``None``: absent, ``UNKNOWN``: unknowable) meets one NodePool requirement."""
    if value is UNKNOWN:
        return True
    if key == INSTANCE_TYPE:
        # a row stands for every size of its family: In admits it when any listed type is of the family; NotIn
        # cannot exclude a whole family short of listing every size, so it never does here
        return op != "In" or any(v.split(".", 1)[0] == instance_type for v in values)
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op == "In":
        return value is not None and str(value) in values
    if op == "NotIn":
        return value is None or str(value) not in values
    if op in ("Gt", "Gte", "Lt", "Lte"):
        return value is not None and bool(values) and _compare(op, str(value), values[0])
    return True  # an operator Karpenter does not have: its admission webhook refuses the NodePool anyway


def _compare(op: str, value: str, bound: str) -> bool:
    try:
        v, b = int(value), int(bound)
    except ValueError:
        return True
    return {"Gt": v > b, "Gte": v >= b, "Lt": v < b, "Lte": v <= b}[op]


def requirements_admit_gpus(requirements: Sequence[Mapping[str, Any]]) -> bool:
    """Whether some EC2 GPU instance type meets every requirement (none at all admit every type)."""
    parsed = [(str(r.get("key", "")), str(r.get("operator", "")), [str(v) for v in _seq(r.get("values"))])
              for r in requirements]
    named = {v.split(".", 1)[0] for key, op, values in parsed if key in (INSTANCE_TYPE, FAMILY) and op == "In"
             for v in values if GPU_INSTANCE.match(v)}
    listed = {row.family for row in GPU_ROWS}
    candidates: list[GpuRow | _Unlisted] = [*GPU_ROWS, *(_Unlisted(f) for f in sorted(named - listed))]
    return any(
        all(requirement_met(key, op, values, row.value(key) if key != INSTANCE_TYPE else "", row.family)
            for key, op, values in parsed)
        for row in candidates
    )


def requirement_admits_gpus(key: str, op: str, values: Sequence[str]) -> bool:
    """Whether one requirement on its own leaves some GPU instance type admissible."""
    return requirements_admit_gpus([{"key": key, "operator": op, "values": list(values)}])


def nodepool_selects_gpus(spec: Mapping[str, Any]) -> bool:
    """Whether a NodePool ``spec`` can launch GPU nodes: its requirements admit a GPU instance type, or it carries the
    GPU taint, the ``nvidia.com/gpu.present`` node label or an ``nvidia.com/gpu`` limit."""
    template = _map(spec.get("template"))
    template_spec = _map(template.get("spec"))
    if requirements_admit_gpus([_map(r) for r in _seq(template_spec.get("requirements"))]):
        return True
    if labels.GPU_TAINT_KEY in [_map(t).get("key") for t in _seq(template_spec.get("taints"))]:
        return True
    if str(_map(_map(template.get("metadata")).get("labels")).get(labels.GPU_PRESENT_LABEL, "")).lower() == "true":
        return True
    return labels.GPU_RESOURCE in _map(spec.get("limits"))


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _seq(value: Any) -> Sequence[Any]:
    return value if isinstance(value, Sequence) and not isinstance(value, str) else ()
