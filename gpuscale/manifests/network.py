"""Pure builders for the cluster's network layout and for how clients reach the API server.

``subnet_plan`` splits a new VPC into one private and one public subnet per zone; ``kubeconfig_body``
is the kubeconfig the in-cluster Pulumi provider uses (short-lived tokens from ``aws eks get-token``,
never a static credential).
"""

from __future__ import annotations

import ipaddress
import math
from typing import Any, Literal

from gpuscale import labels
from gpuscale.spec.base import Spec

MAX_ZONES = 8
"""More zones than this would leave private subnets too small for GPU pods (one VPC-CNI IP per pod)."""


class ZoneSubnets(Spec):
    """The two subnets of one availability zone."""

    zone: str
    """Availability zone name, e.g. ``us-east-1a``."""
    private_cidr: str
    """Nodes and pods live here (VPC CNI gives every pod a VPC address), so it gets most of the space."""
    public_cidr: str
    """Load balancers and the NAT gateway only."""


def subnet_plan(vpc_cidr: str, zones: list[str]) -> list[ZoneSubnets]:
    """Private subnets share the first half of the VPC, public subnets 1/8 of that size in the second half.

    A /16 over three zones gives three /19 private subnets (8,190 pod/node addresses each) and /22 public ones.
    """
    if not 1 <= len(zones) <= MAX_ZONES:
        raise ValueError(f"{len(zones)} zones: use 1 to {MAX_ZONES}")
    vpc = ipaddress.IPv4Network(vpc_cidr)
    bits = max(1, math.ceil(math.log2(len(zones))))
    private_half, public_half = vpc.subnets(prefixlen_diff=1)
    private = list(private_half.subnets(prefixlen_diff=bits))
    public_prefix = min(private[0].prefixlen + 3, 28)
    public = list(public_half.subnets(new_prefix=public_prefix))
    return [
        ZoneSubnets(zone=zone, private_cidr=str(private[i]), public_cidr=str(public[i])) for i, zone in enumerate(zones)
    ]


def subnet_tags(
    kind: Literal["private", "public"], cluster_name: str, zone: str, base: dict[str, str]
) -> dict[str, str]:
    """Tags of one subnet: private ones carry the Karpenter discovery tag and host internal load balancers."""
    tags = {**base, "Name": f"{cluster_name}-{kind}-{zone}"}
    if kind == "private":
        tags[labels.KARPENTER_DISCOVERY_TAG] = cluster_name
        tags["kubernetes.io/role/internal-elb"] = "1"
    else:
        tags["kubernetes.io/role/elb"] = "1"
    return tags


def nat_gateway_zones(zones: list[str], stage: str) -> list[str]:
    """Zones that get a NAT gateway: one per zone in prod (a zone outage keeps egress), one in total elsewhere."""
    return list(zones) if stage == "prod" else list(zones[:1])


def kubeconfig_body(
    cluster_name: str, endpoint: str, certificate_authority: str, region: str, *,
    role_arn: str | None = None, profile: str | None = None,
) -> dict[str, Any]:
    """A kubeconfig whose user runs ``aws eks get-token`` (IAM -> EKS access entries); it holds no secret.

    ``role_arn`` (``--role-arn``) and ``profile`` (``AWS_PROFILE``) make the token the identity that deploys, as
    ``aws eks update-kubeconfig --role-arn ... --profile ...`` writes them: a program that reaches AWS through an
    assumed role or a named profile gets a token for that identity, not for whatever the shell's default is.
    """
    user = f"{cluster_name}-aws"
    args = ["eks", "get-token", "--cluster-name", cluster_name, "--region", region, "--output", "json"]
    if role_arn:
        args += ["--role-arn", role_arn]
    exec_config: dict[str, Any] = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "command": "aws",
        "args": args,
        "interactiveMode": "Never",
    }
    if profile:
        exec_config["env"] = [{"name": "AWS_PROFILE", "value": profile}]
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": cluster_name, "cluster": {"server": endpoint, "certificate-authority-data": certificate_authority}}
        ],
        "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": user}}],
        "current-context": cluster_name,
        "preferences": {},
        "users": [{"name": user, "user": {"exec": exec_config}}],
    }
