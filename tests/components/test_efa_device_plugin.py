"""EfaDevicePlugin under Pulumi mocks, and the platform installs it exactly when a pool has EFA."""

from __future__ import annotations

from collections.abc import Callable

from gpuscale import versions
from gpuscale.components.efa_device_plugin import EfaDevicePlugin, EfaDevicePluginArgs
from gpuscale.manifests import karpenter
from gpuscale.spec.platform import PlatformSpec
from gpuscale.synth.mocks import RecordedResource

Run = Callable[..., list[RecordedResource]]


def test_plugin_chart_is_pinned_and_lands_on_the_efa_pools(run_pulumi: Run, prod_spec: PlatformSpec) -> None:
    args = EfaDevicePluginArgs.from_spec(prod_spec)
    assert args.pools == ["h100"]
    records = run_pulumi(lambda: EfaDevicePlugin("efa", args))
    (chart,) = [r for r in records if r.type == "kubernetes:helm.sh/v4:Chart"]
    assert (chart.inputs["chart"], chart.inputs["version"]) == ("aws-efa-k8s-device-plugin", versions.AWS_EFA_DEVICE_PLUGIN.version)
    assert chart.inputs["repositoryOpts"]["repo"] == "https://aws.github.io/eks-charts"
    assert chart.inputs["name"] == "aws-efa-k8s-device-plugin"
    assert chart.inputs["values"] == karpenter.efa_device_plugin_values(["h100"], args.image_repository)
    # the cluster's own region's EKS registry, not the chart's us-west-2 default
    assert chart.inputs["values"]["image"]["repository"] == (
        f"602401143452.dkr.ecr.{prod_spec.environment.aws_region}.amazonaws.com/eks/aws-efa-k8s-device-plugin")


def test_no_efa_pool_no_plugin(dev_spec: PlatformSpec, prod_spec: PlatformSpec) -> None:
    assert karpenter.efa_pools(dev_spec) == [] and karpenter.efa_pools(prod_spec) == ["h100"]
