"""Pure Karpenter builders: GPU/CPU NodePools and EC2NodeClasses, chart and device-plugin values."""

from __future__ import annotations

from typing import Any

import pytest

from gpuscale import labels, sizing, versions
from gpuscale.manifests import karpenter
from gpuscale.spec.platform import PlatformSpec
from gpuscale.spec.topology import CpuNodePoolSpec, GpuNodePoolSpec
from tests.conftest import requires_shared
from tests.k8s_schema import assert_valid

ZONES = ["us-east-1a", "us-east-1b"]


def gpu_pool(**kw: Any) -> GpuNodePoolSpec:
    base: dict[str, Any] = {"name": "test", "instance_types": ["g6e.xlarge", "g6e.2xlarge"], "gpu_limit": 8}
    return GpuNodePoolSpec(**{**base, **kw})


def requirement(body: dict[str, Any], key: str) -> dict[str, Any]:
    (req,) = [r for r in body["spec"]["template"]["spec"]["requirements"] if r["key"] == key]
    return req


def bodies(spec: PlatformSpec) -> list[dict[str, Any]]:
    """Every NodePool/EC2NodeClass a stack emits, built the way the components build them."""
    out: list[dict[str, Any]] = []
    for pool in spec.topology.gpu_pools:
        out.append(
            karpenter.nodepool_body(pool, zones=spec.topology.pool_zones(pool.name))
        )
        out.append(
            karpenter.ec2nodeclass_body(
                pool,
                cluster_name=spec.environment.cluster_name,
                node_role_name="gpuscale-node",
                root_volume_gib=sizing.root_volume_gib(spec, pool),
                tags=spec.environment.tags,
            )
        )
    out.append(karpenter.cpu_nodepool_body(spec.topology.cpu_pool, zones=spec.topology.zones))
    out.append(
        karpenter.cpu_ec2nodeclass_body(
            cluster_name=spec.environment.cluster_name,
            node_role_name="gpuscale-node",
            ami_alias=versions.EKS_AL2023_AMI_ALIAS,
            tags=spec.environment.tags,
        )
    )
    return out


# ------------------------------------------------------------------------------------------------ NodePool


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_every_stack_gpu_nodepool_is_safe_tainted_limited(stack: str, stack_specs: dict[str, PlatformSpec]) -> None:
    spec = stack_specs[stack]
    for pool in spec.topology.gpu_pools:
        body = karpenter.nodepool_body(pool, zones=spec.topology.pool_zones(pool.name))
        s = body["spec"]
        assert body["metadata"]["name"] == pool.name
        assert s["disruption"]["consolidationPolicy"] == "WhenEmpty"
        assert s["disruption"]["consolidateAfter"] == "1h"
        assert s["template"]["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
        assert s["limits"][labels.GPU_RESOURCE] == pool.gpu_limit
        assert s["template"]["spec"]["expireAfter"] == "Never"
        assert requirement(body, "node.kubernetes.io/instance-type") == {
            "key": "node.kubernetes.io/instance-type",
            "operator": "In",
            "values": pool.instance_types,
        }
        assert requirement(body, labels.KARPENTER_CAPACITY_TYPE_LABEL)["values"] == pool.capacity_types
        assert requirement(body, labels.ZONE_LABEL)["values"] == spec.topology.pool_zones(pool.name)
        # no grace period: Karpenter's drift would otherwise ignore PDBs and force-delete serving pods when it elapsed
        assert "terminationGracePeriod" not in s["template"]["spec"]
        node_labels = s["template"]["metadata"]["labels"]
        assert node_labels[labels.NODE_POOL_LABEL] == pool.name
        assert node_labels[labels.GPU_PRESENT_LABEL] == "true"
        assert s["template"]["spec"]["nodeClassRef"] == {
            "group": "karpenter.k8s.aws",
            "kind": "EC2NodeClass",
            "name": pool.name,
        }


def test_cpu_and_memory_limits_never_bind_before_the_gpu_limit() -> None:
    # 16 GPUs: 16 x g6e.2xlarge (8 vCPU, 64 GiB) is the largest combination of the mix
    limits = karpenter.gpu_node_limits(gpu_pool(gpu_limit=16))
    assert limits == {"nvidia.com/gpu": 16, "cpu": 128, "memory": "1024Gi"}
    # 20 GPUs on 8-GPU nodes round up to 3 nodes
    assert karpenter.gpu_node_limits(gpu_pool(instance_types=["p5.48xlarge"], gpu_limit=20)) == {
        "nvidia.com/gpu": 20,
        "cpu": 3 * 192,
        "memory": f"{3 * 2048}Gi",
    }


def test_budgets_keep_the_stack_s_and_add_the_drift_window_freeze(prod_spec: PlatformSpec) -> None:
    h100 = prod_spec.topology.pool("h100")
    budgets = karpenter.nodepool_body(h100, zones=ZONES)["spec"]["disruption"]["budgets"]
    # the stack's one-at-a-time budget, then drift frozen from the end of the Sunday 06:00 6h window for the rest of the week
    assert budgets == [
        {"nodes": "1"},
        {"nodes": "0", "reasons": ["Drifted"], "schedule": "0 12 * * sun", "duration": "162h"},
    ]


def test_a_pool_without_a_drift_window_may_drift_at_any_hour() -> None:
    pool = gpu_pool(drift_window=None)
    assert karpenter.nodepool_body(pool, zones=ZONES)["spec"]["disruption"]["budgets"] == [{"nodes": "1"}]


def test_acknowledged_unsafe_policy_is_emitted_annotated_and_warned() -> None:
    pool = gpu_pool(
        consolidation_policy="WhenEmptyOrUnderutilized",
        consolidate_after="5m",
        acknowledge_underutilized_consolidation_evicts_inference=True,
    )
    body = karpenter.nodepool_body(pool, zones=ZONES)
    assert body["spec"]["disruption"] == {
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": "5m",
        "budgets": [{"nodes": "1"}, {"nodes": "0", "reasons": ["Drifted"], "schedule": "0 6 * * *", "duration": "20h"}],
    }
    assert body["metadata"]["annotations"] == {labels.ACK_UNSAFE_CONSOLIDATION_ANNOTATION: "true"}
    warnings = karpenter.disruption_warnings(pool, cold_start_s=600)
    assert len(warnings) == 2
    assert "evict" in warnings[0] and "WhenEmptyOrUnderutilized" in warnings[0]
    assert "consolidateAfter 5m is shorter than 1h" in warnings[1] and warnings[1].endswith("(acknowledged on this pool)")
    [_, slow] = karpenter.disruption_warnings(pool, cold_start_s=5000)  # a cold start above the hour is the floor
    assert "shorter than the cold start of its slowest model (5000 s)" in slow and "consolidateAfter: 84m" in slow
    assert karpenter.disruption_warnings(gpu_pool(), cold_start_s=5000) == []  # unacknowledged: the spec refuses it


def test_the_nodepool_carries_the_cold_start_the_pack_reads() -> None:
    body = karpenter.nodepool_body(gpu_pool(), zones=ZONES, cold_start_s=263.2)
    assert body["metadata"]["annotations"] == {labels.COLD_START_ANNOTATION: "264"}
    assert "annotations" not in karpenter.nodepool_body(gpu_pool(), zones=ZONES)["metadata"]


def test_safe_pool_has_no_warnings_and_no_annotation() -> None:
    pool = gpu_pool()
    assert karpenter.disruption_warnings(pool, cold_start_s=600) == []
    assert "annotations" not in karpenter.nodepool_body(pool, zones=ZONES)["metadata"]


def test_reserved_capacity_without_reservations_is_warned_and_selected_when_given() -> None:
    pool = gpu_pool(capacity_types=["reserved", "on-demand"])
    assert "capacity_reservation_ids" in karpenter.capacity_warnings(pool)[0]
    pinned = gpu_pool(capacity_types=["reserved"], capacity_reservation_ids=["cr-0123456789abcdef0"])
    assert karpenter.capacity_warnings(pinned) == []
    nc = karpenter.ec2nodeclass_body(pinned, cluster_name="c", node_role_name="r", root_volume_gib=100, tags={})
    assert nc["spec"]["capacityReservationSelectorTerms"] == [{"id": "cr-0123456789abcdef0"}]


# ------------------------------------------------------------------------------------------------ EC2NodeClass


def test_ec2nodeclass_imdsv2_hop_limit_1_and_discovery() -> None:
    nc = karpenter.ec2nodeclass_body(
        gpu_pool(), cluster_name="gpuscale-x", node_role_name="role-x", root_volume_gib=150, tags={"team": "a"}
    )
    s = nc["spec"]
    assert s["metadataOptions"]["httpTokens"] == "required"
    assert s["metadataOptions"]["httpPutResponseHopLimit"] == 1
    assert s["role"] == "role-x"
    assert s["amiSelectorTerms"] == [{"alias": versions.EKS_AL2023_AMI_ALIAS}]
    assert (
        s["subnetSelectorTerms"]
        == s["securityGroupSelectorTerms"]
        == [{"tags": {"karpenter.sh/discovery": "gpuscale-x"}}]
    )
    assert s["tags"] == {"team": "a", labels.NODE_POOL_LABEL: "test"}


def test_root_volume_sized_encrypted_gp3_and_raid0_on_nvme() -> None:
    s = karpenter.ec2nodeclass_body(gpu_pool(), cluster_name="c", node_role_name="r", root_volume_gib=250, tags={})[
        "spec"
    ]
    (root,) = s["blockDeviceMappings"]
    assert root["deviceName"] == "/dev/xvda" and root["rootVolume"] is True
    assert root["ebs"]["volumeSize"] == "250Gi"
    assert root["ebs"]["volumeType"] == "gp3" and root["ebs"]["encrypted"] is True
    assert s["instanceStorePolicy"] == "RAID0"  # g6e types all have local NVMe
    assert "networkInterfaces" not in s


def test_bottlerocket_keeps_a_small_os_volume_and_sizes_the_data_volume() -> None:
    s = karpenter.ec2nodeclass_body(
        gpu_pool(ami_alias="bottlerocket@v1.20.4"),
        cluster_name="c",
        node_role_name="r",
        root_volume_gib=300,
        tags={},
    )["spec"]
    assert [(b["deviceName"], b["ebs"]["volumeSize"]) for b in s["blockDeviceMappings"]] == [
        ("/dev/xvda", "4Gi"),
        ("/dev/xvdb", "300Gi"),
    ]


def test_efa_layout_primary_interface_first_then_one_efa_only_per_card() -> None:
    nics = karpenter.efa_network_interfaces(4)
    assert nics[0] == {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"}
    efa = [n for n in nics if n["interfaceType"] == "efa-only"]
    assert sorted(n["networkCardIndex"] for n in efa) == [0, 1, 2, 3]
    pool = gpu_pool(instance_types=["p5.48xlarge"], efa=True)
    s = karpenter.ec2nodeclass_body(pool, cluster_name="c", node_role_name="r", root_volume_gib=100, tags={})["spec"]
    assert len(s["networkInterfaces"]) == 33  # p5.48xlarge: 32 EFA cards + the ENA primary


# ------------------------------------------------------------------------------------------------ CPU pool


def test_cpu_pool_may_repack_and_has_no_gpu_taint() -> None:
    body = karpenter.cpu_nodepool_body(CpuNodePoolSpec(), zones=ZONES)
    s = body["spec"]
    assert body["metadata"]["name"] == "cpu"
    assert s["disruption"]["consolidationPolicy"] == "WhenEmptyOrUnderutilized"
    assert "taints" not in s["template"]["spec"]
    assert s["limits"] == {"cpu": 256, "memory": "1024Gi"}  # c/m: at most 4 GiB per vCPU
    assert requirement(body, "karpenter.k8s.aws/instance-category")["values"] == ["c", "m"]


# ------------------------------------------------------------------------------------------------ Helm values


def test_chart_values_wire_cluster_queue_and_service_account() -> None:
    v = karpenter.karpenter_chart_values(
        cluster_name="gpuscale-prod",
        queue_name="gpuscale-prod-q",
        region="us-east-1",
        service_account="karpenter",
        replicas=2,
        cpu="1",
        memory="1Gi",
    )
    assert v["settings"]["clusterName"] == "gpuscale-prod"
    assert v["settings"]["interruptionQueue"] == "gpuscale-prod-q"
    assert v["serviceAccount"] == {"create": True, "name": "karpenter"}
    assert v["nodeSelector"] == {labels.SYSTEM_NODE_LABEL: labels.SYSTEM_NODE_ROLE}
    assert (
        v["controller"]["resources"]["requests"]
        == v["controller"]["resources"]["limits"]
        == {"cpu": "1", "memory": "1Gi"}
    )
    assert {"name": "AWS_REGION", "value": "us-east-1"} in v["controller"]["env"]


def test_device_plugin_selects_the_label_our_nodepools_set_and_tolerates_their_taint() -> None:
    v = karpenter.device_plugin_values(skip_pools=["br"])
    (term,) = v["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {"key": labels.GPU_PRESENT_LABEL, "operator": "In", "values": ["true"]} in term["matchExpressions"]
    assert {"key": labels.NODE_POOL_LABEL, "operator": "NotIn", "values": ["br"]} in term["matchExpressions"]
    pool = gpu_pool()
    node_labels = karpenter.gpu_node_labels(pool)
    assert node_labels[labels.GPU_PRESENT_LABEL] == "true"
    (taint,) = karpenter.nodepool_body(pool, zones=ZONES)["spec"]["template"]["spec"][
        "taints"
    ]
    assert any(
        t["key"] == taint["key"] and t["operator"] == "Exists" and t["effect"] == taint["effect"]
        for t in v["tolerations"]
    )
    assert "NotIn" not in repr(karpenter.device_plugin_values())
    # GPU pods must not get every uverbs device: the EFA devices belong to the EFA device plugin, one pod each
    assert v["mofedEnabled"] is False


# ------------------------------------------------------------------------------------------------ schemas


@requires_shared
@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_every_stack_nodepool_and_ec2nodeclass_validates_against_the_crds(
    stack: str, stack_specs: dict[str, PlatformSpec]
) -> None:
    objs = bodies(stack_specs[stack])
    assert {o["kind"] for o in objs} == {"NodePool", "EC2NodeClass"}
    assert_valid(*objs)


@requires_shared
def test_variants_validate_efa_bottlerocket_acknowledged_reserved() -> None:
    pools = [
        gpu_pool(name="efa", instance_types=["p5.48xlarge"], efa=True),
        gpu_pool(name="p4d", instance_types=["p4d.24xlarge"], efa=True),
        gpu_pool(name="br", ami_alias="bottlerocket@v1.20.4"),
        gpu_pool(
            name="ack",
            consolidation_policy="Balanced",
            consolidate_after="10m",
            acknowledge_underutilized_consolidation_evicts_inference=True,
        ),
        gpu_pool(
            name="res",
            capacity_types=["reserved"],
            capacity_reservation_ids=["cr-0abc"],
            labels={"example.com/team": "a"},
        ),
    ]
    objs: list[dict[str, Any]] = []
    for p in pools:
        objs.append(karpenter.nodepool_body(p, zones=ZONES))
        objs.append(
            karpenter.ec2nodeclass_body(p, cluster_name="c", node_role_name="r", root_volume_gib=100, tags={"a": "b"})
        )
    assert_valid(*objs)


@pytest.mark.parametrize(
    "key", ["karpenter.sh/foo", "karpenter.k8s.aws/instance-family", "kubernetes.io/hostname", labels.NODE_POOL_LABEL]
)
def test_spec_refuses_node_labels_karpenter_restricts_or_gpuscale_owns(key: str) -> None:
    with pytest.raises(ValueError, match="use your own prefix"):
        gpu_pool(labels={key: "x"})


def test_spec_refuses_a_gpu_pool_named_like_the_cpu_pool() -> None:
    with pytest.raises(ValueError, match="general-purpose CPU NodePool"):
        gpu_pool(name=karpenter.CPU_POOL_NAME)


# ------------------------------------------------------------------------------------------------ EFA and placement


def test_efa_pool_gets_a_cluster_placement_group_in_one_zone(prod_spec: PlatformSpec) -> None:
    h100 = prod_spec.topology.pool("h100")
    node_class = karpenter.ec2nodeclass_body(
        h100, cluster_name="gpuscale-prod", node_role_name="r", root_volume_gib=200, tags={},
    )["spec"]
    # Karpenter >= v1.11 resolves the group by name; a cluster placement group cannot span zones
    assert node_class["placementGroupSelector"] == {"name": "gpuscale-prod-h100"}
    assert prod_spec.topology.pool_zones("h100") == ["us-east-1a"]
    assert requirement(karpenter.nodepool_body(h100, zones=prod_spec.topology.pool_zones("h100")), labels.ZONE_LABEL)[
        "values"] == ["us-east-1a"]
    efa_only = [n for n in node_class["networkInterfaces"] if n["interfaceType"] == "efa-only"]
    assert len(efa_only) == 32  # p5.48xlarge: 32 EFA interfaces, each one advertised device
    l40s = prod_spec.topology.pool("l40s")
    assert "placementGroupSelector" not in karpenter.ec2nodeclass_body(
        l40s, cluster_name="c", node_role_name="r", root_volume_gib=100, tags={})["spec"]
    assert prod_spec.topology.pool_zones("l40s") == prod_spec.topology.zones


def test_placement_can_be_turned_off_or_moved() -> None:
    assert not gpu_pool(instance_types=["p5.48xlarge"], efa=True, placement_group="none").cluster_placement
    with pytest.raises(ValueError, match="placement_zone is only used with placement_group: cluster"):
        gpu_pool(placement_zone="us-east-1b")


def test_pods_request_their_share_of_the_node_s_efa_devices() -> None:
    pool = gpu_pool(instance_types=["p5.48xlarge"], efa=True)
    assert karpenter.efa_devices_per_pod(pool, "p5.48xlarge", 4) == 16
    assert karpenter.efa_devices_per_pod(pool, "p5.48xlarge", 8) == 32
    assert karpenter.efa_devices_per_pod(gpu_pool(instance_types=["p5.48xlarge"]), "p5.48xlarge", 8) == 0


def test_efa_device_plugin_runs_on_efa_pools_past_the_gpu_taint(prod_spec: PlatformSpec) -> None:
    values = karpenter.efa_device_plugin_values(karpenter.efa_pools(prod_spec), "registry/eks/aws-efa-k8s-device-plugin")
    # the chart turns each key into a required node-affinity term "<key> In <values>"
    assert values["supportedInstanceLabels"] == {"keys": [labels.NODE_POOL_LABEL], "values": ["h100"]}
    (taint,) = karpenter.nodepool_body(prod_spec.topology.pool("h100"), zones=ZONES)["spec"]["template"]["spec"]["taints"]
    assert any(t["key"] == taint["key"] and t["operator"] == "Exists" and t["effect"] == taint["effect"]
               for t in values["tolerations"])


@pytest.mark.parametrize(("region", "registry"), [
    ("us-east-1", "602401143452.dkr.ecr.us-east-1.amazonaws.com"),
    ("eu-south-1", "590381155156.dkr.ecr.eu-south-1.amazonaws.com"),
    ("cn-north-1", "918309763551.dkr.ecr.cn-north-1.amazonaws.com.cn"),
])
def test_the_efa_plugin_is_pulled_from_the_clusters_region(region: str, registry: str) -> None:
    """The chart's default image is us-west-2's; every region has its own EKS registry (EKS User Guide,
    add-ons-images), so nodes pull in-region (and through an in-region ECR endpoint, if the VPC has one)."""
    repository = versions.efa_device_plugin_repository(region)
    assert repository == f"{registry}/eks/aws-efa-k8s-device-plugin"
    assert karpenter.efa_device_plugin_values(["h100"], repository)["image"] == {"repository": repository}


def test_an_efa_pool_in_a_region_without_an_eks_registry_is_refused(prod_spec: PlatformSpec) -> None:
    spec = prod_spec.model_copy(update={"environment": prod_spec.environment.model_copy(update={"aws_region": "xx-mars-1"})})
    (problem,) = karpenter.efa_region_problems(spec)
    assert problem.path == "environment.aws_region" and "xx-mars-1" in problem.message and "us-east-1" in problem.message
    assert karpenter.efa_region_problems(prod_spec) == []


def test_the_pool_cold_start_is_the_sized_one(prod_spec: PlatformSpec) -> None:
    sized = sizing.size_platform(prod_spec)
    for pool in prod_spec.topology.gpu_pools:
        on_pool = [sized.model(m.name).cold_start.total_s for m in prod_spec.models if m.node_pool == pool.name]
        assert karpenter.longest_cold_start_s(prod_spec, pool.name) == max(on_pool)


@requires_shared
def test_odcrs_and_capacity_blocks_are_selected_by_id_in_one_valid_nodeclass() -> None:
    # Karpenter v1.14.1 learns a reservation's type and end from EC2; the NodeClass term is the id for both kinds
    pool = gpu_pool(
        capacity_types=["reserved", "on-demand"], capacity_reservation_ids=["cr-0odcr"],
        capacity_reservations=[
            {"id": "cr-0odcr2"},
            {"id": "cr-0block", "type": "capacity-block", "start_utc": "2026-12-01T11:30:00Z", "end_utc": "2026-12-08T11:30:00Z"},
        ],
    )
    nc = karpenter.ec2nodeclass_body(pool, cluster_name="c", node_role_name="r", root_volume_gib=100, tags={})
    assert nc["spec"]["capacityReservationSelectorTerms"] == [{"id": "cr-0odcr"}, {"id": "cr-0odcr2"}, {"id": "cr-0block"}]
    assert karpenter.capacity_warnings(pool) == []
    assert_valid(nc)


def test_reservations_without_the_reserved_capacity_type_are_warned() -> None:
    pool = gpu_pool(capacity_types=["on-demand"], capacity_reservations=[{"id": "cr-0a"}])
    (warning,) = karpenter.capacity_warnings(pool)
    assert "['cr-0a']" in warning and "no 'reserved'" in warning
