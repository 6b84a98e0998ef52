"""Where the platform runs: account-level settings of one stack."""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from gpuscale import versions
from gpuscale.problems import at
from gpuscale.spec.base import IamPrincipalArn, Ipv4Cidr, Name, Spec

MAX_AWS_TAGS = 50
"""AWS allows at most 50 tags on one resource."""
KARPENTER_INSTANCE_TAGS = (
    "Name", "eks:eks-cluster-name", "kubernetes.io/cluster/<cluster>", "karpenter.sh/nodepool",
    "karpenter.sh/nodeclaim", "karpenter.k8s.aws/ec2nodeclass",
)
"""Tags Karpenter adds to every instance it launches (karpenter-provider-aws launch and tagging controllers)."""
GPUSCALE_INSTANCE_TAGS = ("gpuscale.io/node-pool", "gpuscale.io/stage")
"""Tags gpuscale adds to every GPU instance (EC2NodeClass ``spec.tags``): its pool, and the stage the policy pack reads
(``gpuscale.guardrails.production``)."""
MAX_USER_TAGS = MAX_AWS_TAGS - len(KARPENTER_INSTANCE_TAGS) - len(GPUSCALE_INSTANCE_TAGS)
"""Stack tags that still fit on a GPU instance beside the tags Karpenter and gpuscale add."""
RESTRICTED_TAG_KEYS = ("eks:eks-cluster-name", "karpenter.sh/nodepool", "karpenter.sh/nodeclaim",
                       "karpenter.k8s.aws/ec2nodeclass")
"""Tag keys Karpenter's EC2NodeClass CRD refuses in ``spec.tags`` (with every ``kubernetes.io/cluster*`` key)."""
_TAG_CHARS = set("_.:/=+-@ ")


def tag_problems(tags: dict[str, str]) -> list[str]:
    """Why ``tags`` cannot go on every AWS resource gpuscale creates; [] when they can."""
    problems: list[str] = []
    if len(tags) > MAX_USER_TAGS:
        problems.append(
            f"{len(tags)} tags: AWS allows {MAX_AWS_TAGS} per resource and every GPU instance also carries "
            f"{len(KARPENTER_INSTANCE_TAGS) + len(GPUSCALE_INSTANCE_TAGS)} of Karpenter's and gpuscale's, so at most "
            f"{MAX_USER_TAGS} fit"
        )
    for key, value in tags.items():
        if key.lower().startswith("aws:"):
            problems.append(f"tag key {key!r}: the aws: prefix is reserved for AWS (CreateTags refuses it)")
        elif key in RESTRICTED_TAG_KEYS or key.startswith("kubernetes.io/cluster"):
            problems.append(f"tag key {key!r} is set by Karpenter; its EC2NodeClass refuses it in spec.tags")
        elif key in GPUSCALE_INSTANCE_TAGS:
            problems.append(f"tag key {key!r} is set by gpuscale on every GPU instance; use another key")
        if not 1 <= len(key) <= 128 or not all(c.isalnum() or c in _TAG_CHARS for c in key):
            problems.append(f"tag key {key!r}: use 1-128 letters, digits, spaces and _ . : / = + - @")
        if len(value) > 256 or not all(c.isalnum() or c in _TAG_CHARS for c in value):
            problems.append(f"tag {key!r} value {value!r}: use at most 256 letters, digits, spaces and _ . : / = + - @")
    return problems


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
        bad = [i for i in ids if not re.fullmatch(r"subnet-[0-9a-f]+", i)]
        if bad:
            raise ValueError(f"not subnet ids (subnet- and hex digits): {bad}")
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"subnet ids listed twice: {dupes}")
        return ids


class EnvironmentSpec(Spec):
    """Name, region, Kubernetes version, networking and tags of one environment."""

    name: Name
    """Environment name (dev, staging, prod ...); names objects only (``stage`` decides what production means)."""
    stage: Literal["dev", "staging", "prod"]
    """Lifecycle stage; ``prod`` is production (``gpuscale.guardrails.production``: it refuses unpinned AMIs), whatever
    the stack is called."""
    aws_region: str = Field(pattern=r"^[a-z]{2}(-gov)?-[a-z]+-[0-9]$")
    """AWS region, e.g. ``us-east-1``."""
    kubernetes_version: str = versions.DEFAULT_KUBERNETES_VERSION
    """EKS Kubernetes minor version; only minors in EKS standard support that the pinned Karpenter supports."""
    networking: NewVpcSpec | ExistingSubnetsSpec = NewVpcSpec()
    """A new VPC (``vpc_cidr``) or existing subnets (``vpc_id`` + ``private_subnet_ids``)."""
    endpoint_public_access: bool = False
    """Expose the EKS API endpoint publicly, to ``public_access_cidrs`` only (private access is always on). The same
    ``pulumi up`` installs charts and custom resources through the cluster's API, so the machine running it must reach
    the endpoint: from outside the VPC that needs the public endpoint with its egress CIDR listed."""
    public_access_cidrs: list[Ipv4Cidr] = []
    """CIDRs allowed to reach a public endpoint (e.g. the CI runners' egress); required when it is public."""
    acknowledge_private_endpoint_runs_inside_vpc: bool = False
    """Private-only endpoint: confirm that ``pulumi up`` runs inside the VPC or a network connected to it (VPN, Transit
    Gateway, in-VPC runner). A new VPC does not exist before the first run, so its private-only endpoint is refused
    without this (``gpuscale.platform_checks``: only where the program creates the VPC and the cluster)."""
    admin_principal_arns: list[IamPrincipalArn] = []
    """IAM principals granted cluster-admin through EKS access entries."""
    tags: dict[str, str] = {}
    """Tags on every AWS resource."""

    @field_validator("tags")
    @classmethod
    def _tags(cls, tags: dict[str, str]) -> dict[str, str]:
        problems = tag_problems(tags)
        if problems:
            raise ValueError("; ".join(problems))
        return tags

    @field_validator("kubernetes_version")
    @classmethod
    def _k8s(cls, v: str) -> str:
        if v not in versions.SUPPORTED_KUBERNETES_VERSIONS:
            raise ValueError(
                f"{v!r}: use a Kubernetes minor in EKS standard support that Karpenter "
                f"{versions.KARPENTER.version} supports: {', '.join(versions.SUPPORTED_KUBERNETES_VERSIONS)} "
                f"(default {versions.DEFAULT_KUBERNETES_VERSION})"
            )
        ends = versions.EKS_STANDARD_SUPPORT_ENDS[v]
        if versions.today() > ends:
            newer = [k for k, end in versions.EKS_STANDARD_SUPPORT_ENDS.items() if versions.today() <= end]
            raise ValueError(
                f"{v!r} left EKS standard support on {ends.isoformat()}: extended support is billed and ends with EKS "
                f"upgrading the control plane itself; use {', '.join(newer) or 'a newer minor (bump gpuscale)'}"
            )
        return v

    @model_validator(mode="after")
    def _endpoint(self) -> EnvironmentSpec:
        if self.endpoint_public_access and (not self.public_access_cidrs or "0.0.0.0/0" in self.public_access_cidrs):
            raise at("public_access_cidrs",
                "endpoint_public_access: true needs public_access_cidrs listing the networks allowed in "
                "(not 0.0.0.0/0); or keep the endpoint private"
            )
        if not self.endpoint_public_access and self.public_access_cidrs:
            raise at("public_access_cidrs",
                "public_access_cidrs are set but endpoint_public_access is false, so they would be ignored; set "
                "endpoint_public_access: true to use them, or remove them for a private-only endpoint"
            )
        return self

    @property
    def cluster_name(self) -> str:
        return f"gpuscale-{self.name}"
