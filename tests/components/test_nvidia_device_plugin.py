"""NvidiaDevicePlugin under Pulumi mocks: pinned chart whose DaemonSet lands on Karpenter GPU nodes."""

from __future__ import annotations

from typing import Any

from gpuscale import labels, versions
from gpuscale.components.nvidia_device_plugin import NvidiaDevicePlugin, NvidiaDevicePluginArgs
from gpuscale.manifests import karpenter
from gpuscale.spec.topology import GpuNodePoolSpec
from gpuscale.synth.mocks import RecordedResource
from tests.components.support import run
from tests.specs import pd_spec

CHART = "kubernetes:helm.sh/v4:Chart"


def build(args: NvidiaDevicePluginArgs) -> tuple[dict[str, RecordedResource], dict[str, Any]]:
    outputs: dict[str, Any] = {}

    def program() -> None:
        plugin = NvidiaDevicePlugin("nvidia", args)
        plugin.namespace.apply(lambda v: outputs.__setitem__("namespace", v))

    return {r.type: r for r in run(program)}, outputs


def match_expressions(values: dict[str, Any]) -> list[dict[str, Any]]:
    (term,) = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    return term["matchExpressions"]  # type: ignore[no-any-return]


def test_chart_is_pinned_and_installed_into_its_namespace() -> None:
    by_type, outputs = build(NvidiaDevicePluginArgs.from_spec(pd_spec()))
    chart, ns = by_type[CHART], by_type["kubernetes:core/v1:Namespace"]
    assert chart.inputs["chart"] == versions.NVIDIA_DEVICE_PLUGIN.chart == "nvidia-device-plugin"
    assert chart.inputs["version"] == versions.NVIDIA_DEVICE_PLUGIN.version
    assert chart.inputs["repositoryOpts"] == {"repo": "https://nvidia.github.io/k8s-device-plugin"}
    assert chart.inputs["namespace"] == ns.inputs["metadata"]["name"] == outputs["namespace"] == "nvidia-device-plugin"
    assert ns.urn in chart.dependencies
    component = by_type["gpuscale:index:NvidiaDevicePlugin"]
    assert chart.parent_urn == ns.parent_urn == component.urn


def test_daemonset_selects_gpu_present_and_tolerates_the_gpu_taint() -> None:
    prod_spec = pd_spec()
    by_type, _ = build(NvidiaDevicePluginArgs.from_spec(prod_spec))
    values = by_type[CHART].inputs["values"]
    assert match_expressions(values) == [{"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in values["tolerations"]
    # every GPU NodePool of the stack carries the label the affinity requires
    for pool in prod_spec.topology.gpu_pools:
        assert karpenter.gpu_node_labels(pool)[labels.GPU_PRESENT_LABEL] == "true"
    assert values["gfd"] == {"enabled": False} and values["nfd"] == {"enabled": False}


def test_bottlerocket_pools_are_skipped() -> None:
    prod_spec = pd_spec()
    br = GpuNodePoolSpec(name="br", instance_types=["g6e.xlarge"], gpu_limit=2, ami_alias="bottlerocket@v1.20.4")
    topology = prod_spec.topology.model_copy(update={"gpu_pools": [*prod_spec.topology.gpu_pools, br]})
    args = NvidiaDevicePluginArgs.from_spec(prod_spec.model_copy(update={"topology": topology}))
    assert args.skip_pools == ["br"]
    by_type, _ = build(args)
    assert {"key": labels.NODE_POOL_LABEL, "operator": "NotIn", "values": ["br"]} in match_expressions(
        by_type[CHART].inputs["values"]
    )
