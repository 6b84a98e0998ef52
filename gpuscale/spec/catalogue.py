"""GPU instance catalogue, as validated data.

Prices: AWS Pricing API dumps committed by Karpenter (``zz_generated.pricing_aws.go``, generated
2026-07-20), us-east-1 on-demand Linux; see ``research/perf-model.md`` section 1.1. GPU figures are
datasheet values (perf-model.md section 1.2); ``memory_gib`` is the memory the driver reports, the
figure perf-model.md section 3 uses for its KV-capacity table.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from pydantic import Field, model_validator

from gpuscale.spec.base import Spec


class GpuModel(Spec):
    """One GPU part and the numbers the sizing and simulator need."""

    name: str
    """Marketing name, e.g. ``H100``; also the ``karpenter.k8s.aws/instance-gpu-name`` value, lower-cased."""
    memory_gib: float = Field(gt=0)
    """Device memory the driver reports, GiB."""
    bf16_dense_tflops: float = Field(gt=0)
    """Dense BF16 tensor throughput, TFLOP/s."""
    fp8_dense_tflops: float = Field(ge=0)
    """Dense FP8 tensor throughput, TFLOP/s; 0 where the part has no FP8 tensor cores."""
    memory_bandwidth_tb_s: float = Field(gt=0)
    """HBM/GDDR bandwidth, TB/s; bounds decode step time."""
    nvlink_gb_s: float = Field(default=0.0, ge=0)
    """NVLink bandwidth per GPU and direction, GB/s (half the datasheet's bidirectional figure); 0 for parts without
    NVLink, whose tensor-parallel all-reduces cross PCIe (``pcie_gb_s``)."""
    pcie_gb_s: float = Field(gt=0)
    """Host-link (PCIe x16) bandwidth per GPU and direction, GB/s: 32 for Gen4, 64 for Gen5 (PCI-SIG line rates)."""

    @property
    def tp_link_gb_s(self) -> float:
        """The link a tensor-parallel all-reduce between GPUs of one node crosses: NVLink where the part has it, else
        PCIe."""
        return self.nvlink_gb_s if self.nvlink_gb_s > 0 else self.pcie_gb_s

    @property
    def supports_fp8(self) -> bool:
        return self.fp8_dense_tflops > 0


class GpuInstanceType(Spec):
    """One EC2 GPU instance type."""

    name: str
    """EC2 instance type, e.g. ``p5.48xlarge``."""
    gpu: GpuModel
    """The GPU part it carries."""
    gpus_per_node: int = Field(gt=0)
    """GPUs per instance."""
    nvlink_domain_gpus: int = Field(gt=0)
    """GPUs that share NVLink/NVSwitch; 1 for PCIe-only parts. A tensor-parallel group must fit in one domain."""
    efa_interfaces: int = Field(ge=0)
    """Elastic Fabric Adapter interfaces (EC2 ``EfaInfo.MaximumEfaInterfaces``; upstream-facts-2.md B4); 0 means no EFA.
    Karpenter advertises this many ``vpc.amazonaws.com/efa`` devices per node."""
    network_node_layers: int = Field(default=0, ge=0, le=4)
    """How many ``topology.k8s.aws/network-node-layer-N`` labels nodes of this type get: the network nodes EC2
    DescribeInstanceTopology returns for it (3 for p4d/p5/g6e..., 4 for p6-b200), 0 for types it does not support (g5, g6,
    p5.4xlarge), which then carry none (upstream-facts-2.md B2: EC2 User Guide "Prerequisites for Amazon EC2 topology",
    AWS cloud-controller-manager v1.36.1 ``getAdditionalLabels``)."""
    vcpus: int = Field(gt=0)
    """vCPUs per instance."""
    memory_gib: int = Field(gt=0)
    """Host memory, GiB."""
    local_nvme_gib: int = Field(ge=0)
    """Instance-store NVMe, GiB (RAID0-able for image and model cache)."""
    on_demand_usd_per_hour: float = Field(gt=0)
    """On-demand price, us-east-1, USD per hour."""
    network_gbps: float = Field(default=0.0, ge=0)
    """Baseline network bandwidth of the instance, Gbit/s (EFA included on p4/p5): Karpenter's
    ``pkg/providers/instancetype/zz_generated.bandwidth.go`` (EC2 DescribeInstanceTypes, commit 9c68c87f). ``up to``
    burst figures are not counted. The simulator times prefill -> decode KV transfers and image pulls with it."""

    @property
    def family(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def gpu_memory_gib(self) -> float:
        return self.gpu.memory_gib

    @property
    def usd_per_gpu_hour(self) -> float:
        return self.on_demand_usd_per_hour / self.gpus_per_node

    @model_validator(mode="after")
    def _domain_fits_node(self) -> GpuInstanceType:
        if self.gpus_per_node % self.nvlink_domain_gpus:
            raise ValueError(
                f"{self.name}: nvlink_domain_gpus ({self.nvlink_domain_gpus}) must divide gpus_per_node ({self.gpus_per_node})"
            )
        return self


# Interconnects (NVIDIA datasheets, not verified here, as perf-model.md 1.2 flags its GPU figures): H100 SXM and H200
# NVLink 4 at 900 GB/s bidirectional and PCIe Gen5 x16; A100 SXM NVLink 3 at 600 GB/s and PCIe Gen4; L40S, L4 and A10G
# have no NVLink and sit on PCIe Gen4 x16 (EC2's g6e, g6 and g5 have no NVLink bridges: nvlink_domain_gpus 1 below).
H100 = GpuModel(name="H100", memory_gib=80.0, bf16_dense_tflops=989, fp8_dense_tflops=1979, memory_bandwidth_tb_s=3.35,
                nvlink_gb_s=450, pcie_gb_s=64)
H200 = GpuModel(name="H200", memory_gib=140.0, bf16_dense_tflops=989, fp8_dense_tflops=1979, memory_bandwidth_tb_s=4.8,
                nvlink_gb_s=450, pcie_gb_s=64)
A100_40 = GpuModel(name="A100", memory_gib=40.0, bf16_dense_tflops=312, fp8_dense_tflops=0, memory_bandwidth_tb_s=1.555,
                   nvlink_gb_s=300, pcie_gb_s=32)
A100_80 = GpuModel(name="A100", memory_gib=80.0, bf16_dense_tflops=312, fp8_dense_tflops=0, memory_bandwidth_tb_s=2.039,
                   nvlink_gb_s=300, pcie_gb_s=32)
L40S = GpuModel(name="L40S", memory_gib=44.8, bf16_dense_tflops=362, fp8_dense_tflops=733, memory_bandwidth_tb_s=0.864,
                pcie_gb_s=32)
A10G = GpuModel(name="A10G", memory_gib=22.9, bf16_dense_tflops=70, fp8_dense_tflops=0, memory_bandwidth_tb_s=0.6,
                pcie_gb_s=32)
L4 = GpuModel(name="L4", memory_gib=22.0, bf16_dense_tflops=121, fp8_dense_tflops=242, memory_bandwidth_tb_s=0.3,
              pcie_gb_s=32)


_NETWORK_NODE_LAYERS = {
    "p5.48xlarge": 3, "p5en.48xlarge": 3, "p4d.24xlarge": 3, "p4de.24xlarge": 3,
    "g6e.xlarge": 3, "g6e.2xlarge": 3, "g6e.12xlarge": 3, "g6e.24xlarge": 3, "g6e.48xlarge": 3,
}
"""``network_node_layers`` of the catalogue types EC2 topology supports (upstream-facts-2.md B2); every other type: 0."""


def _it(name: str, gpu: GpuModel, gpus: int, nvlink: int, efa: int, vcpus: int, mem: int, nvme: int, usd: float) -> GpuInstanceType:
    return GpuInstanceType(
        name=name,
        gpu=gpu,
        gpus_per_node=gpus,
        nvlink_domain_gpus=nvlink,
        efa_interfaces=efa,
        network_node_layers=_NETWORK_NODE_LAYERS.get(name, 0),
        vcpus=vcpus,
        memory_gib=mem,
        local_nvme_gib=nvme,
        on_demand_usd_per_hour=usd,
    )


_ALL = (
    _it("p5.48xlarge", H100, 8, 8, 32, 192, 2048, 28610, 55.04),
    _it("p5.4xlarge", H100, 1, 1, 0, 16, 256, 3576, 6.88),
    _it("p5en.48xlarge", H200, 8, 8, 16, 192, 2048, 28610, 63.30),
    _it("p4d.24xlarge", A100_40, 8, 8, 4, 96, 1152, 7450, 21.96),
    _it("p4de.24xlarge", A100_80, 8, 8, 4, 96, 1152, 7450, 27.45),
    _it("g6e.xlarge", L40S, 1, 1, 0, 4, 32, 232, 1.861),
    _it("g6e.2xlarge", L40S, 1, 1, 0, 8, 64, 419, 2.242),
    _it("g6e.12xlarge", L40S, 4, 1, 1, 48, 384, 3576, 10.49),
    _it("g6e.24xlarge", L40S, 4, 1, 2, 96, 768, 3576, 15.07),
    _it("g6e.48xlarge", L40S, 8, 1, 4, 192, 1536, 7153, 30.13),
    _it("g5.xlarge", A10G, 1, 1, 0, 4, 16, 232, 1.006),
    _it("g5.2xlarge", A10G, 1, 1, 0, 8, 32, 419, 1.212),
    _it("g5.12xlarge", A10G, 4, 1, 0, 48, 192, 3576, 5.672),
    _it("g5.48xlarge", A10G, 8, 1, 1, 192, 768, 7153, 16.288),
    _it("g6.xlarge", L4, 1, 1, 0, 4, 16, 232, 0.805),
    _it("g6.12xlarge", L4, 4, 1, 0, 48, 192, 3576, 4.60),
    _it("g6.48xlarge", L4, 8, 1, 1, 192, 768, 7153, 13.35),
)

_NETWORK_GBPS = {
    "p5.48xlarge": 3200, "p5.4xlarge": 100, "p5en.48xlarge": 3200, "p4d.24xlarge": 400, "p4de.24xlarge": 400,
    "g6e.xlarge": 2.5, "g6e.2xlarge": 5, "g6e.12xlarge": 100, "g6e.24xlarge": 200, "g6e.48xlarge": 400,
    "g5.xlarge": 2.5, "g5.2xlarge": 5, "g5.12xlarge": 40, "g5.48xlarge": 100,
    "g6.xlarge": 2.5, "g6.12xlarge": 40, "g6.48xlarge": 100,
}
"""``network_gbps`` per type (Karpenter's generated bandwidth table, Mbit/s / 1000)."""
CATALOGUE: Mapping[str, GpuInstanceType] = MappingProxyType(
    {it.name: it.model_copy(update={"network_gbps": float(_NETWORK_GBPS[it.name])}) for it in _ALL}
)
"""Every GPU instance type gpuscale can size for, keyed by EC2 name."""


def instance_type(name: str) -> GpuInstanceType:
    """Look up a catalogue entry; raises ``KeyError`` naming the known types."""
    try:
        return CATALOGUE[name]
    except KeyError:
        raise KeyError(f"unknown GPU instance type {name!r}; known: {', '.join(sorted(CATALOGUE))}") from None


GPU_INSTANCE: Mapping[str, str] = MappingProxyType({
    "H100-SXM": "p5.48xlarge", "H200": "p5en.48xlarge", "A100-80": "p4de.24xlarge", "A100-40": "p4d.24xlarge",
    "L40S": "g6e.48xlarge", "L4": "g6.48xlarge", "A10G": "g5.48xlarge",
})
"""GPU part names (what ``gpuscale perf --gpu`` takes) and the catalogue's largest instance type carrying each: the one
a replica of up to its ``gpus_per_node`` GPUs per tensor-parallel group is costed on (a replica's numbers depend on the
part and on whether its GPUs share NVLink, not on the instance size)."""
