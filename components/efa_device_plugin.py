"""The AWS EFA device plugin, so EFA pools advertise ``vpc.amazonaws.com/efa`` and pods can claim their EFA devices.

Without it, the EFA interfaces Karpenter attaches stay unused: no pod can request a device, so NIXL (P/D KV transfer)
and NCCL fall back to TCP. The DaemonSet runs on the EFA pools only and tolerates their GPU taint
(``gpuscale.manifests.karpenter.efa_device_plugin_values``). See ``research/upstream-facts-2.md`` B4.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s
from pydantic import Field

from gpuscale import versions
from gpuscale.components.helm_release import namespaced_chart
from gpuscale.manifests import karpenter
from gpuscale.spec.base import Spec
from gpuscale.spec.platform import PlatformSpec
from gpuscale.versions import HelmChartPin

RELEASE = "aws-efa-k8s-device-plugin"


class EfaDevicePluginArgs(Spec):
    """Chart pin, namespace and the EFA pools the plugin runs on."""

    chart: HelmChartPin = versions.AWS_EFA_DEVICE_PLUGIN
    """Pinned ``eks/aws-efa-k8s-device-plugin`` chart."""
    namespace: str = "aws-efa-device-plugin"
    """Namespace created for the DaemonSet."""
    pools: list[str] = Field(min_length=1)
    """GPU pools with ``efa: true``."""
    image_repository: str = Field(min_length=1)
    """The plugin image in the cluster's region's EKS registry (``versions.efa_device_plugin_repository(region)``)."""

    @classmethod
    def from_spec(cls, spec: PlatformSpec) -> EfaDevicePluginArgs:
        region = spec.environment.aws_region
        repository = versions.efa_device_plugin_repository(region)
        if repository is None:  # checks.feasibility refuses this first (karpenter.efa_region_problems)
            raise ValueError(f"{region} has no EKS add-on image registry; see gpuscale/upstream/eks_addon_registries.tsv")
        return cls(pools=karpenter.efa_pools(spec), image_repository=repository)


class EfaDevicePlugin(pulumi.ComponentResource):
    """The ``aws-efa-k8s-device-plugin`` DaemonSet on every node of the EFA pools.

    Creates ``<name>-namespace`` and ``<name>-chart``. The kubernetes provider is inherited from ``opts``.
    """

    namespace: pulumi.Output[str]
    chart: k8s.helm.v4.Chart

    def __init__(self, name: str, args: EfaDevicePluginArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuscale:index:EfaDevicePlugin", name, None, opts)
        ns, self.chart = namespaced_chart(
            self, name, f"EfaDevicePlugin {name!r}", release=RELEASE, pin=args.chart, namespace=args.namespace,
            values=karpenter.efa_device_plugin_values(args.pools, args.image_repository), opts=opts,
        )
        self.namespace = ns.metadata.name
        self.register_outputs({"namespace": self.namespace})
