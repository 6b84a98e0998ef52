"""Where the platform runs: account-level settings of one stack."""

from __future__ import annotations

import ipaddress
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from gpuscale import versions
from gpuscale.spec.base import Name, Spec


def _kubernetes_version(v: str) -> str:
    if v not in versions.SUPPORTED_KUBERNETES_VERSIONS:
        raise ValueError(f"{v!r}: supported versions are {', '.join(versions.SUPPORTED_KUBERNETES_VERSIONS)}")
    return v


KubernetesVersion = Annotated[str, AfterValidator(_kubernetes_version)]
"""An EKS Kubernetes minor version gpuscale's pins support."""


def check_public_endpoint(public: bool, cidrs: list[str]) -> None:
    """A public API endpoint must name the networks allowed in (never the whole internet)."""
    if public and (not cidrs or "0.0.0.0/0" in cidrs):
        raise ValueError(
            "endpoint_public_access: true needs public_access_cidrs listing the networks allowed in "
            "(not 0.0.0.0/0); or keep the endpoint private"
        )


class NewVpcSpec(Spec):
    """Create a VPC with a public and a private subnet per zone."""

    vpc_cidr: str = "10.0.0.0/16"
    """IPv4 CIDR of the new VPC (/16 to /20)."""

    @field_validator("vpc_cidr")
    @classmethod
    def _cidr(cls, cidr: str) -> str:
        try:
            net = ipaddress.IPv4Network(cidr)
        except ValueError as exc:
            raise ValueError(f"{cidr!r} is not an IPv4 CIDR: {exc}") from None
        if not 16 <= net.prefixlen <= 20:
            raise ValueError(f"{cidr}: use a /16 to /20 so each zone gets room for GPU pods")
        return cidr


class ExistingSubnetsSpec(Spec):
    """Use subnets that already exist; gpuscale's node pools select them by id."""

    vpc_id: str = Field(pattern=r"^vpc-[0-9a-f]+$")
    """Existing VPC id."""
    private_subnet_ids: list[str] = Field(min_length=1)
    """Private subnets for nodes, one or more per zone."""
    public_subnet_ids: list[str] = []
    """Public subnets (load balancers), optional."""

    @field_validator("private_subnet_ids", "public_subnet_ids")
    @classmethod
    def _ids(cls, ids: list[str]) -> list[str]:
        bad = [i for i in ids if not i.startswith("subnet-")]
        if bad:
            raise ValueError(f"not subnet ids: {bad}")
        return ids


class EnvironmentSpec(Spec):
    """Name, region, Kubernetes version, networking and tags of one environment."""

    name: Name
    """Environment name (dev, staging, prod ...); prod turns on the strictest checks."""
    stage: Literal["dev", "staging", "prod"]
    """Lifecycle stage; ``prod`` refuses unpinned AMIs and zero warm replicas on critical models."""
    aws_region: str = Field(pattern=r"^[a-z]{2}(-gov)?-[a-z]+-[0-9]$")
    """AWS region, e.g. ``us-east-1``."""
    kubernetes_version: KubernetesVersion = "1.33"
    """EKS Kubernetes minor version."""
    networking: NewVpcSpec | ExistingSubnetsSpec = NewVpcSpec()
    """A new VPC (``vpc_cidr``) or existing subnets (``vpc_id`` + ``private_subnet_ids``)."""
    endpoint_public_access: bool = False
    """Expose the EKS API endpoint publicly (private access is always on)."""
    public_access_cidrs: list[str] = []
    """CIDRs allowed to reach a public endpoint; required when it is public."""
    admin_principal_arns: list[str] = []
    """IAM principals granted cluster-admin through EKS access entries."""
    tags: dict[str, str] = {}
    """Tags on every AWS resource."""

    @model_validator(mode="after")
    def _endpoint(self) -> EnvironmentSpec:
        check_public_endpoint(self.endpoint_public_access, self.public_access_cidrs)
        return self

    @property
    def cluster_name(self) -> str:
        return f"gpuscale-{self.name}"
