"""Typed platform spec: the single source of truth every layer is derived from."""

from gpuscale.spec.base import Spec
from gpuscale.spec.catalogue import CATALOGUE, GpuInstanceType, GpuModel, instance_type
from gpuscale.spec.environment import EnvironmentSpec, ExistingSubnetsSpec, NewVpcSpec
from gpuscale.spec.model import (
    AutoscalingSpec,
    ModelArchitecture,
    ModelDeployment,
    ParallelismSpec,
    RoleScalingSpec,
    SecretRef,
    ServingSpec,
    WakeSchedule,
    WeightsSpec,
)
from gpuscale.spec.observability import ObservabilitySpec
from gpuscale.spec.platform import PlatformSpec
from gpuscale.spec.slo import SloSpec
from gpuscale.spec.teams import QueueSpec
from gpuscale.spec.topology import (
    CpuNodePoolSpec,
    DisruptionBudget,
    GpuNodePoolSpec,
    ProvisioningSpec,
    TopologyLevel,
    TopologySpec,
)
from gpuscale.spec.workload import BurstSpec, TokenDistribution, TraceSpec, WorkloadSpec

__all__ = [
    "CATALOGUE", "AutoscalingSpec", "BurstSpec", "CpuNodePoolSpec", "DisruptionBudget", "EnvironmentSpec",
    "ExistingSubnetsSpec", "GpuInstanceType", "GpuModel", "GpuNodePoolSpec", "ModelArchitecture", "ModelDeployment",
    "NewVpcSpec", "ObservabilitySpec", "ParallelismSpec", "PlatformSpec", "ProvisioningSpec", "QueueSpec", "RoleScalingSpec", "SecretRef",
    "ServingSpec", "SloSpec", "Spec", "TokenDistribution", "TopologyLevel", "TopologySpec",
    "TraceSpec", "WakeSchedule", "WeightsSpec", "WorkloadSpec", "instance_type",
]
