"""GpuNodePool under Pulumi mocks, and the whole Layer 1 of each stack built end to end."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pulumi
import pytest

from gpuscale import labels, sizing
from gpuscale.components.cpu_node_pool import CpuNodePool, CpuNodePoolArgs
from gpuscale.components.eks_cluster import EksCluster, EksClusterArgs
from gpuscale.components.gpu_node_pool import GpuNodePool, GpuNodePoolArgs
from gpuscale.components.karpenter_controller import KarpenterController, KarpenterControllerArgs
from gpuscale.components.nvidia_device_plugin import NvidiaDevicePlugin, NvidiaDevicePluginArgs
from gpuscale.spec.platform import PlatformSpec
from gpuscale.spec.topology import GpuNodePoolSpec
from gpuscale.synth.mocks import RecordedResource
from tests.conftest import requires_shared
from tests.k8s_schema import assert_valid

Run = Callable[..., list[RecordedResource]]
NODEPOOL = "kubernetes:karpenter.sh/v1:NodePool"
NODECLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
CHART = "kubernetes:helm.sh/v4:Chart"


def ints(value: Any) -> Any:
    """Undo the wire format's doubles (1.0 -> 1) so emitted bodies compare and validate like the YAML they become."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [ints(v) for v in value]
    return value


def k8s_object(record: RecordedResource) -> dict[str, Any]:
    return ints({k: record.inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")})


def build_pool(run_pulumi: Run, args: GpuNodePoolArgs) -> tuple[list[RecordedResource], dict[str, Any]]:
    outputs: dict[str, Any] = {}

    def program() -> None:
        chart = pulumi.CustomResource("test:index:Chart", "karpenter-chart", {})  # stands in for the CRD installer
        pool = GpuNodePool(
            f"gpu-{args.pool.name}", args, node_role_name="gpuscale-test-karpenter-node", depends_on=[chart]
        )
        pool.node_pool_name.apply(lambda v: outputs.__setitem__("node_pool_name", v))
        pool.node_class_name.apply(lambda v: outputs.__setitem__("node_class_name", v))

    return run_pulumi(program), outputs


def one(records: list[RecordedResource], typ: str) -> RecordedResource:
    (r,) = [r for r in records if r.type == typ]
    return r


def test_prod_h100_pool_emits_a_safe_nodepool_and_its_nodeclass(run_pulumi: Run, prod_spec: PlatformSpec) -> None:
    args = GpuNodePoolArgs.from_spec(prod_spec, "h100")
    records, outputs = build_pool(run_pulumi, args)
    component = one(records, "gpuscale:index:GpuNodePool")
    np, nc = one(records, NODEPOOL), one(records, NODECLASS)
    assert (np.name, nc.name) == ("gpu-h100-nodepool", "gpu-h100-nodeclass")
    assert np.parent_urn == nc.parent_urn == component.urn
    assert outputs == {"node_pool_name": "h100", "node_class_name": "h100"}
    spec = ints(np.inputs["spec"])
    assert spec["disruption"]["consolidationPolicy"] == "WhenEmpty"
    assert spec["disruption"]["consolidateAfter"] == "1h"
    assert spec["template"]["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    assert spec["limits"]["nvidia.com/gpu"] == 64
    assert spec["template"]["spec"]["requirements"][0] == {
        "key": "node.kubernetes.io/instance-type",
        "operator": "In",
        "values": ["p5.48xlarge"],
    }
    # no grace period (drift would force-evict serving pods), drift only in the stack's Sunday window, one zone (EFA)
    assert "terminationGracePeriod" not in spec["template"]["spec"]
    assert {"nodes": "0", "reasons": ["Drifted"], "schedule": "0 12 * * sun", "duration": "162h"} in spec["disruption"]["budgets"]
    assert args.zones == ["us-east-1a"]
    pg = one(records, "aws:ec2/placementGroup:PlacementGroup")
    assert (pg.inputs["name"], pg.inputs["strategy"]) == ("gpuscale-prod-h100", "cluster")
    assert pg.parent_urn == component.urn and pg.urn in nc.dependencies
    node_class = ints(nc.inputs["spec"])
    assert node_class["role"] == "gpuscale-test-karpenter-node"
    assert node_class["metadataOptions"]["httpTokens"] == "required"
    assert node_class["metadataOptions"]["httpPutResponseHopLimit"] == 1
    assert (
        node_class["blockDeviceMappings"][0]["ebs"]["volumeSize"]
        == f"{sizing.root_volume_gib(prod_spec, prod_spec.topology.pool('h100'))}Gi"
    )
    assert node_class["networkInterfaces"][0] == {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"}
    # both wait for the CRDs; the NodePool also for its EC2NodeClass
    chart_urn = next(r.urn for r in records if r.name == "karpenter-chart")
    assert chart_urn in nc.dependencies and chart_urn in np.dependencies
    assert nc.urn in np.dependencies


def test_args_derive_root_volume_and_cold_start(prod_spec: PlatformSpec) -> None:
    args = GpuNodePoolArgs.from_spec(prod_spec, "l40s")
    assert args.root_volume_gib == sizing.root_volume_gib(prod_spec, prod_spec.topology.pool("l40s"))
    assert args.cold_start_s == sizing.cold_start(prod_spec.models[1], prod_spec.topology.provisioning).total_s
    assert args.cluster_name == "gpuscale-prod" and args.stage == "prod"


def test_prod_args_refuse_an_unpinned_ami() -> None:
    pool = GpuNodePoolSpec(name="x", instance_types=["g6e.xlarge"], gpu_limit=1, ami_alias="al2023@latest")
    with pytest.raises(ValueError, match="pin a version"):
        GpuNodePoolArgs(
            pool=pool, cluster_name="c", stage="prod", zones=["a"], root_volume_gib=100
        )
    GpuNodePoolArgs(
        pool=pool, cluster_name="c", stage="dev", zones=["a"], root_volume_gib=100
    )


def test_acknowledged_unsafe_pool_is_emitted_with_a_warning(run_pulumi: Run, caplog: pytest.LogCaptureFixture) -> None:
    pool = GpuNodePoolSpec(
        name="risky",
        instance_types=["g6e.xlarge"],
        gpu_limit=2,
        consolidation_policy="WhenEmptyOrUnderutilized",
        consolidate_after="5m",
        acknowledge_underutilized_consolidation_evicts_inference=True,
    )
    args = GpuNodePoolArgs(
        pool=pool,
        cluster_name="c",
        stage="dev",
        zones=["a"],
        root_volume_gib=100,
        cold_start_s=500,
    )
    with caplog.at_level(logging.WARNING):
        records, _ = build_pool(run_pulumi, args)
    np = one(records, NODEPOOL)
    assert np.inputs["spec"]["disruption"]["consolidationPolicy"] == "WhenEmptyOrUnderutilized"
    assert np.inputs["metadata"]["annotations"] == {labels.ACK_UNSAFE_CONSOLIDATION_ANNOTATION: "true"}
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("evict in-flight inference" in m and "risky" in m for m in messages)
    assert any("shorter than the slowest cold start" in m for m in messages)


def test_safe_pool_logs_no_warning(run_pulumi: Run, dev_spec: PlatformSpec, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        build_pool(run_pulumi, GpuNodePoolArgs.from_spec(dev_spec, "l40s-spot"))
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and "GPU pool" in r.getMessage()]


# ------------------------------------------------------------------------------------------------ Layer 1 end to end


def layer1(spec: PlatformSpec) -> Callable[[], None]:
    """The Layer 1 composition the platform program performs."""

    def program() -> None:
        cluster = EksCluster("eks", EksClusterArgs.from_spec(spec))
        in_cluster = pulumi.ResourceOptions(providers=[cluster.provider])
        karpenter = KarpenterController(
            "karpenter",
            KarpenterControllerArgs.from_spec(spec),
            cluster_name=cluster.cluster_name,
            opts=in_cluster,
        )
        for pool in spec.topology.gpu_pools:
            GpuNodePool(
                f"gpu-{pool.name}",
                GpuNodePoolArgs.from_spec(spec, pool.name),
                node_role_name=karpenter.node_role_name,
                depends_on=[karpenter.chart],
                opts=in_cluster,
            )
        CpuNodePool(
            "cpu",
            CpuNodePoolArgs.from_spec(spec),
            node_role_name=karpenter.node_role_name,
            depends_on=[karpenter.chart],
            opts=in_cluster,
        )
        NvidiaDevicePlugin("nvidia", NvidiaDevicePluginArgs.from_spec(spec), opts=in_cluster)

    return program


@pytest.fixture(scope="module")
def layer1_records(stack_specs: dict[str, PlatformSpec]) -> dict[str, list[RecordedResource]]:
    from gpuscale.synth.mocks import run_program

    return {name: run_program(layer1(spec), region=spec.environment.aws_region) for name, spec in stack_specs.items()}


def test_prod_layer1_builds_and_is_wired(
    layer1_records: dict[str, list[RecordedResource]], prod_spec: PlatformSpec
) -> None:
    records = layer1_records["prod"]
    types = {r.type for r in records}
    assert {
        "gpuscale:index:EksCluster",
        "gpuscale:index:KarpenterController",
        "gpuscale:index:GpuNodePool",
        "gpuscale:index:CpuNodePool",
        "gpuscale:index:NvidiaDevicePlugin",
    } <= types
    (node_role,) = [r for r in records if r.name == "karpenter-node-role"]
    (queue,) = [r for r in records if r.type == "aws:sqs/queue:Queue"]
    charts = {r.name: r for r in records if r.type == CHART}
    assert charts["karpenter-chart"].inputs["values"]["settings"]["interruptionQueue"] == queue.inputs["name"]
    assert charts["karpenter-chart"].inputs["values"]["settings"]["clusterName"] == "gpuscale-prod"
    classes = [r for r in records if r.type == NODECLASS]
    pools = [r for r in records if r.type == NODEPOOL]
    assert sorted(r.inputs["metadata"]["name"] for r in pools) == ["cpu", "h100", "l40s"]
    assert len(classes) == 3 and all(r.inputs["spec"]["role"] == node_role.inputs["name"] for r in classes)
    # every in-cluster object goes through the cluster's provider and waits for the Karpenter CRDs
    (provider,) = [r for r in records if r.type == "pulumi:providers:kubernetes"]
    assert all(r.provider.startswith(provider.urn) for r in [*classes, *pools, *charts.values()])
    assert all(charts["karpenter-chart"].urn in r.dependencies for r in [*classes, *pools])
    gpu = [ints(r.inputs["spec"]) for r in pools if r.inputs["metadata"]["name"] != "cpu"]
    assert {p["limits"]["nvidia.com/gpu"] for p in gpu} == {64, 16}


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_every_stack_gpu_nodepool_is_when_empty_1h_tainted_and_limited(
    stack: str, layer1_records: dict[str, list[RecordedResource]], stack_specs: dict[str, PlatformSpec]
) -> None:
    spec = stack_specs[stack]
    emitted = {
        r.inputs["metadata"]["name"]: ints(r.inputs["spec"]) for r in layer1_records[stack] if r.type == NODEPOOL
    }
    for pool in spec.topology.gpu_pools:
        np = emitted[pool.name]
        assert (np["disruption"]["consolidationPolicy"], np["disruption"]["consolidateAfter"]) == ("WhenEmpty", "1h")
        assert {"key": labels.GPU_TAINT_KEY, "value": labels.GPU_TAINT_VALUE, "effect": labels.GPU_TAINT_EFFECT} in np[
            "template"
        ]["spec"]["taints"]
        assert np["limits"]["nvidia.com/gpu"] == pool.gpu_limit


@requires_shared
@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_every_emitted_nodepool_and_ec2nodeclass_is_schema_valid(
    stack: str, layer1_records: dict[str, list[RecordedResource]]
) -> None:
    objs = [k8s_object(r) for r in layer1_records[stack] if r.type in (NODEPOOL, NODECLASS)]
    assert len(objs) >= 4
    assert_valid(*objs)
