"""The NVIDIA device plugin, so GPU nodes advertise ``nvidia.com/gpu`` (AL2023 NVIDIA AMIs do not ship it).

Pitfall it avoids: the chart's default node affinity needs a Node Feature Discovery label or
``nvidia.com/gpu.present=true``; Karpenter nodes run no NFD, so without the label the DaemonSet never lands
and GPU pods stay Pending. Every gpuscale GPU NodePool sets the label; these values require it and tolerate
the GPU taint. Bottlerocket pools are skipped: their OS ships its own plugin.
See https://github.com/NVIDIA/k8s-device-plugin (``research/serving-facts.md`` section 3.1).
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s
from pydantic import Field

from gpuscale import versions
from gpuscale.components.helm_release import namespaced_chart
from gpuscale.manifests import karpenter
from gpuscale.manifests.namespaces import DEVICE_PLUGIN_NAMESPACE
from gpuscale.spec.base import Spec
from gpuscale.spec.platform import PlatformSpec
from gpuscale.versions import HelmChartPin


class NvidiaDevicePluginArgs(Spec):
    """Chart pin, namespace and the GPU pools the plugin must not run on."""

    chart: HelmChartPin = versions.NVIDIA_DEVICE_PLUGIN
    """Pinned ``nvidia-device-plugin`` chart."""
    namespace: str = DEVICE_PLUGIN_NAMESPACE
    """Namespace created for the DaemonSet."""
    skip_pools: list[str] = Field(default_factory=list)
    """GPU pools whose nodes already run a device plugin (Bottlerocket)."""

    @classmethod
    def from_spec(cls, spec: PlatformSpec) -> NvidiaDevicePluginArgs:
        bottlerocket = [p.name for p in spec.topology.gpu_pools if karpenter.ami_family(p.ami_alias) == "bottlerocket"]
        return cls(skip_pools=bottlerocket)


class NvidiaDevicePlugin(pulumi.ComponentResource):
    """The ``nvidia-device-plugin`` DaemonSet on every gpuscale GPU node.

    Creates ``<name>-namespace`` and ``<name>-chart``. The kubernetes provider is inherited from ``opts``. Expects
    GPU nodes labelled ``nvidia.com/gpu.present=true`` (every ``GpuNodePool`` sets it).
    """

    namespace: pulumi.Output[str]
    chart: k8s.helm.v4.Chart

    def __init__(self, name: str, args: NvidiaDevicePluginArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuscale:index:NvidiaDevicePlugin", name, None, opts)
        ns, self.chart = namespaced_chart(
            self, name, f"NvidiaDevicePlugin {name!r}", release="nvidia-device-plugin", pin=args.chart,
            namespace=args.namespace, values=karpenter.device_plugin_values(skip_pools=args.skip_pools), opts=opts,
        )
        self.namespace = ns.metadata.name
        self.register_outputs({"namespace": self.namespace})
