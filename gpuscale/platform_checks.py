"""Checks of what the platform program itself creates (the VPC and the EKS cluster), with their YAML paths.

A stack (``gpuscale validate``, ``pulumi up`` through ``stackfile.validate_config``) and ``InferencePlatform`` create
these and are checked; the pieces a program uses on a cluster it did not create (``GpuNodePool``, ``QueueTree``,
``VllmService`` ... from a spec that also describes an environment) create neither, so these checks never run for
them.
"""

from __future__ import annotations

from gpuscale.problems import Problem
from gpuscale.spec.environment import NewVpcSpec
from gpuscale.spec.platform import PlatformSpec


def platform_problems(spec: PlatformSpec) -> list[Problem]:
    """What would stop the run that creates the environment: a private-only endpoint on a VPC the same run creates."""
    env = spec.environment
    if env.endpoint_public_access or not isinstance(env.networking, NewVpcSpec) \
            or env.acknowledge_private_endpoint_runs_inside_vpc:
        return []
    return [Problem(
        "environment.endpoint_public_access",
        "the EKS endpoint would be private-only on a VPC this same `pulumi up` creates: the program installs "
        "charts and custom resources through that endpoint, and a machine outside the new VPC cannot reach it, "
        "so the run stops after creating the cluster. Set endpoint_public_access: true with public_access_cidrs "
        "listing the deploying machines' egress CIDRs (private access stays on for nodes), or set "
        "acknowledge_private_endpoint_runs_inside_vpc: true if pulumi runs inside the VPC or a connected network",
    )]
