"""One dump per fault class, built from a shipped stack's synth output plus what the controllers would write; the
doctor must name the layer and cause. Plus a healthy cluster and a dump with two causes at once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuscale.doctor.cluster import Settings
from gpuscale.doctor.diagnose import diagnose
from gpuscale.doctor.dump import read_dump
from gpuscale.doctor.findings import Finding, Report
from tests.doctor.builders import HOUR, DumpBuilder, condition

Builder = Callable[[str], DumpBuilder]
SettingsOf = Callable[[str], Settings]
DEV_POOL, DEV_MODEL = "l40s-spot", "llama-8b"
KAI_NO_GPUS = "no nodes with enough resources were found: {n} node(s) didn't have enough resources: GPUs."


def run(b: DumpBuilder, tmp_path: Path, settings: Settings) -> Report:
    return diagnose(read_dump(b.write(tmp_path / "dump.json")), settings)


def only(report: Report) -> Finding:
    assert not report.in_progress, report.in_progress
    (finding,) = report.stuck
    return finding


def dev_full(b: DumpBuilder, running: int) -> None:
    """The dev stack's GPU pool with ``running`` llama-8b replicas bound, one per node."""
    b.nodepool(DEV_POOL, gpus_used=running)
    b.queues()
    nodes = b.nodes(DEV_POOL, running)
    for pod, node in zip(b.pods(DEV_MODEL, "aggregated", running, seconds_ago=2 * HOUR), nodes, strict=True):
        b.bind(pod, node)


def pending(b: DumpBuilder, *, seconds_ago: float = 20 * 60) -> dict[str, Any]:
    """One more llama-8b replica, created ``seconds_ago`` (the ReplicaSet's next pod)."""
    return b.pods(DEV_MODEL, "aggregated", 1 + sum(1 for i in b.items if i["kind"] == "Pod"),
                  seconds_ago=seconds_ago)[-1]


def dev_pending(builder: Builder, *, running: int = 2, seconds_ago: float = 20 * 60) -> tuple[DumpBuilder, dict[str, Any]]:
    """The dev pool with ``running`` replicas bound and one more Pending, which KAI found no node with a free GPU for."""
    b = builder("dev")
    dev_full(b, running)
    pod = pending(b, seconds_ago=seconds_ago)
    b.kai_unschedulable(pod, KAI_NO_GPUS.format(n=running))
    return b, pod


def prod_h100(builder: Builder, *, gpus_used: int, nodes: int) -> tuple[DumpBuilder, list[dict[str, Any]]]:
    """The prod stack's h100 NodePool with ``gpus_used`` GPUs launched, its queues, and ``nodes`` of its nodes."""
    b = builder("prod")
    b.nodepool("h100", gpus_used=gpus_used)
    b.queues()
    return b, b.nodes("h100", nodes)


def test_a_pod_waiting_for_a_launching_node_is_in_progress(builder: Builder, settings: SettingsOf,
                                                           tmp_path: Path) -> None:
    b, pod = dev_pending(builder, running=2, seconds_ago=45)
    b.nominated(pod, "l40s-spot-x7k2p", seconds_ago=40)
    b.nodeclaim(DEV_POOL, "l40s-spot-x7k2p", seconds_ago=40)
    report = run(b, tmp_path, settings("dev"))
    assert report.stuck == [] and report.exit_code == 0
    (waiting,) = report.in_progress
    assert waiting.layer == "karpenter" and "NodeClaim l40s-spot-x7k2p is launching" in waiting.cause
    assert any(e.startswith("NodeClaim/l40s-spot-x7k2p: status.conditions Launched=True") for e in waiting.evidence)
    assert 'karpenter_nodeclaims_created_total{nodepool="l40s-spot"}' in waiting.confirm_with


def test_a_pool_full_of_the_pod_s_own_launching_node_is_in_progress(builder: Builder, settings: SettingsOf,
                                                                     tmp_path: Path) -> None:
    b, pod = dev_pending(builder, running=3, seconds_ago=50)
    b.items[0]["status"]["resources"]["nvidia.com/gpu"] = "4"  # Karpenter counts the launching NodeClaim already
    b.nominated(pod, "l40s-spot-x7k2p", seconds_ago=40)
    b.nodeclaim(DEV_POOL, "l40s-spot-x7k2p", seconds_ago=40)
    report = run(b, tmp_path, settings("dev"))
    assert report.stuck == [] and [f.layer for f in report.in_progress] == ["karpenter"]


def test_the_same_launch_past_the_window_is_stuck(builder: Builder, settings: SettingsOf, tmp_path: Path) -> None:
    b, pod = dev_pending(builder, running=2, seconds_ago=30 * 60)
    b.nominated(pod, "l40s-spot-x7k2p", seconds_ago=29 * 60)
    b.nodeclaim(DEV_POOL, "l40s-spot-x7k2p", seconds_ago=29 * 60)
    finding = only(run(b, tmp_path, settings("dev")))
    assert finding.layer == "karpenter" and "has not become an initialized node within 180 s" in finding.cause


def test_nodepool_gpu_limit(builder: Builder, settings: SettingsOf, tmp_path: Path) -> None:
    b, pod = dev_pending(builder, running=3)
    b.items[0]["status"]["resources"]["nvidia.com/gpu"] = "4"  # a fourth node, cordoned for drift, still counts
    b.karpenter_failed(pod, "all available instance types exceed limits for nodepool (NodePool=l40s-spot)")
    finding = only(run(b, tmp_path, settings("dev")))
    assert finding.layer == "karpenter" and "NodePool l40s-spot is at its GPU limit" in finding.cause
    assert "NodePool/l40s-spot: spec.limits.nvidia.com/gpu=4, status.resources.nvidia.com/gpu=4 (the pod needs 1 more)" \
        in finding.evidence
    assert 'karpenter_nodepools_usage{nodepool="l40s-spot",resource_type="nvidia.com/gpu"}' in finding.confirm_with


def test_no_instance_type_satisfies_the_requirements(builder: Builder, settings: SettingsOf, tmp_path: Path) -> None:
    b, pod = dev_pending(builder, running=2)
    for c in pod["spec"]["containers"]:  # two GPUs on a pool of one-GPU g6e.xlarge
        c["resources"]["requests"]["nvidia.com/gpu"] = c["resources"]["limits"]["nvidia.com/gpu"] = "2"
    b.karpenter_failed(pod, 'incompatible with nodepool "l40s-spot", daemonset overhead={"cpu":"180m"}, no instance type '
                            "met the scheduling requirements or had enough resources, requirements=..., "
                            'resources={"cpu":"3","memory":"25Gi","nvidia.com/gpu":"2","pods":"1"}')
    finding = only(run(b, tmp_path, settings("dev")))
    assert finding.layer == "karpenter" and finding.cause.startswith("no instance type of the NodePool satisfies")


def test_insufficient_capacity(builder: Builder, settings: SettingsOf, tmp_path: Path) -> None:
    b, pod = dev_pending(builder, running=2, seconds_ago=10 * 60)
    b.nominated(pod, "l40s-spot-9q4fz", seconds_ago=9 * 60)
    claim = {"kind": "NodeClaim", "metadata": {"name": "l40s-spot-9q4fz"}}  # deleted after the failure (launch.go)
    b.event(claim, "InsufficientCapacityError", "NodeClaim l40s-spot-9q4fz event: creating instance, insufficient "
            "capacity, all requested instance types were unavailable during launch", component="karpenter",
            seconds_ago=8 * 60)
    finding = only(run(b, tmp_path, settings("dev")))
    assert finding.layer == "karpenter" and finding.cause.startswith("insufficient EC2 capacity")
    assert finding.evidence[0].startswith("NodeClaim/l40s-spot-9q4fz: event InsufficientCapacityError: ")
    assert 'karpenter_nodeclaims_disrupted_total{reason="insufficient_capacity",nodepool="l40s-spot"}' in \
        finding.confirm_with


def test_nodeclaim_launch_failure(builder: Builder, settings: SettingsOf, tmp_path: Path) -> None:
    b, pod = dev_pending(builder, running=2, seconds_ago=10 * 60)
    b.nominated(pod, "l40s-spot-m2k8r", seconds_ago=9 * 60)
    b.nodeclaim(DEV_POOL, "l40s-spot-m2k8r", seconds_ago=9 * 60, launched=condition(
        "Launched", "Unknown", "InsufficientFreeAddressesInSubnet",
        "There are not enough free IP addresses to launch an instance in this subnet", seconds_ago=8 * 60))
    finding = only(run(b, tmp_path, settings("dev")))
    assert finding.layer == "karpenter"
    assert finding.cause.startswith("NodeClaim l40s-spot-m2k8r failed to launch (InsufficientFreeAddressesInSubnet)")


def test_ec2nodeclass_not_ready_because_the_ami_is_not_found(builder: Builder, settings: SettingsOf,
                                                             tmp_path: Path) -> None:
    b = builder("dev")
    dev_full(b, 0)
    pool = b.items[0]
    pool["status"]["conditions"] = [condition("NodeClassReady", "False", "UnhealthyDependents", "AMIsReady=False"),
                                    condition("Ready", "False", "UnhealthyDependents", "NodeClassReady=False")]
    (node_class,) = b.synthesized("EC2NodeClass", DEV_POOL)
    node_class["status"] = {"conditions": [
        condition("AMIsReady", "False", "AMINotFound", "AMISelector did not match any AMIs"),
        condition("Ready", "False", "UnhealthyDependents", "AMIsReady=False")]}
    b.items.append(node_class)
    pod = pending(b, seconds_ago=10 * 60)
    b.kai_unschedulable(pod, "no nodes with enough resources were found")
    finding = only(run(b, tmp_path, settings("dev")))
    assert finding.layer == "karpenter" and "its AMI selector matches no AMI" in finding.cause
    assert "EC2NodeClass/l40s-spot: status.conditions AMIsReady=False AMINotFound: AMISelector did not match any AMIs" \
        in finding.evidence


def test_taint_not_tolerated(builder: Builder, settings: SettingsOf, tmp_path: Path) -> None:
    b = builder("dev")
    dev_full(b, 0)
    b.nodes(DEV_POOL, 2)
    pod = pending(b)
    pod["spec"]["tolerations"] = []
    b.kai_unschedulable(pod, "no nodes with enough resources were found: 2 node(s) had untolerated taint(s).")
    b.karpenter_failed(pod, 'incompatible with nodepool "l40s-spot", daemonset overhead={"cpu":"180m"}, did not '
                            "tolerate taint (taint=nvidia.com/gpu=true:NoSchedule)")
    finding = only(run(b, tmp_path, settings("dev")))
    assert finding.layer == "kube-scheduler"
    assert finding.cause.startswith("the pod does not tolerate the GPU nodes' taint(s) nvidia.com/gpu=true:NoSchedule: "
                                    "add the toleration")
    assert "NodePool/l40s-spot: spec.template.spec.taints nvidia.com/gpu=true:NoSchedule not tolerated by the pod" in \
        finding.evidence


def test_selector_mismatch(builder: Builder, settings: SettingsOf, tmp_path: Path) -> None:
    b = builder("dev")
    dev_full(b, 0)
    b.nodes(DEV_POOL, 2)
    pod = pending(b)
    pod["spec"]["nodeSelector"] = {"gpuscale.io/node-pool": "l40s"}  # prod's pool name in the dev cluster
    b.kai_unschedulable(pod, "no nodes with enough resources were found: 2 node(s) didn't match Pod's node "
                             "affinity/selector.")
    b.karpenter_failed(pod, 'incompatible with nodepool "l40s-spot", daemonset overhead={"cpu":"180m"}, incompatible '
                            "requirements, key gpuscale.io/node-pool, gpuscale.io/node-pool In [l40s] not in "
                            "gpuscale.io/node-pool In [l40s-spot]")
    finding = only(run(b, tmp_path, settings("dev")))
    assert finding.layer == "kube-scheduler" and "(gpuscale.io/node-pool=l40s)" in finding.cause
    assert any(e.startswith("NodePool/l40s-spot: spec.template.metadata.labels do not satisfy") for e in
               finding.evidence)


def test_pod_not_addressed_to_kai(builder: Builder, settings: SettingsOf, tmp_path: Path) -> None:
    b = builder("dev")
    dev_full(b, 2)
    pod = pending(b, seconds_ago=10 * 60)
    pod["spec"]["schedulerName"] = "default-scheduler"
    b.event(pod, "FailedScheduling", "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
            "2 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are available: 1 Preemption is not helpful for "
            "scheduling, 2 No preemption victims found for incoming pod.", component="default-scheduler")
    finding = only(run(b, tmp_path, settings("dev")))
    assert finding.layer == "kube-scheduler" and "not the KAI scheduler" in finding.cause
    assert finding.evidence[0].endswith("spec.schedulerName=default-scheduler (gpuscale's GPU pods name kai-scheduler)")


def test_device_plugin_advertising_no_gpu(builder: Builder, settings: SettingsOf, tmp_path: Path) -> None:
    b = builder("dev")
    dev_full(b, 0)
    for node in b.nodes(DEV_POOL, 2, seconds_ago=HOUR):
        del node["status"]["allocatable"]["nvidia.com/gpu"]
    pod = pending(b)
    b.kai_unschedulable(pod, KAI_NO_GPUS.format(n=2))
    finding = only(run(b, tmp_path, settings("dev")))
    assert finding.layer == "device-plugin" and "advertises no nvidia.com/gpu on l40s-spot-" in finding.cause
    assert any("status.allocatable has no nvidia.com/gpu (Ready; instance has 1 GPUs" in e for e in finding.evidence)
    assert finding.confirm_with[0].startswith("kubectl -n nvidia-device-plugin get pods")


def test_a_new_node_without_gpus_yet_is_in_progress(builder: Builder, settings: SettingsOf, tmp_path: Path) -> None:
    b = builder("dev")
    dev_full(b, 0)
    for node in b.nodes(DEV_POOL, 1, seconds_ago=50):
        del node["status"]["allocatable"]["nvidia.com/gpu"]
    pod = pending(b, seconds_ago=2 * 60)
    b.kai_unschedulable(pod, KAI_NO_GPUS.format(n=1))
    report = run(b, tmp_path, settings("dev"))
    assert report.stuck == [] and [f.layer for f in report.in_progress] == ["device-plugin"]


def test_leaf_queue_over_quota_and_not_preemptible(builder: Builder, settings: SettingsOf, tmp_path: Path) -> None:
    b, nodes = prod_h100(builder, gpus_used=40, nodes=5)
    running = b.pods("llama-70b-fp8", "decode", 10, seconds_ago=2 * HOUR)
    for i, pod in enumerate(running):
        b.bind(pod, nodes[i // 2])
    pod = b.pods("llama-70b-fp8", "decode", 11)[-1]
    message = ("Non-preemptible workload is over quota. Workload requested 4 GPUs, but chat quota is 40 GPUs, while 40 "
               "GPUs are already allocated for non-preemptible pods. Use a preemptible workload to go over quota.")
    b.kai_unschedulable(pod, message, reasons=("NonPreemptibleOverQuota",))
    report = diagnose(read_dump(b.write(tmp_path / "dump.json")), settings("prod"))
    stuck = [f for f in report.stuck if f.pod.endswith(pod["metadata"]["name"])]
    (finding,) = stuck
    assert finding.layer == "kai" and finding.cause.startswith("leaf queue chat is at its GPU quota")
    assert "Queue/chat: spec.resources.gpu quota=40 limit=48" in finding.evidence
    assert 'kai_queue_allocated_gpus{queue_name="chat"}' in finding.confirm_with


def test_gang_minimum_unmet(builder: Builder, settings: SettingsOf, tmp_path: Path) -> None:
    b = builder("dev")
    dev_full(b, 0)
    b.nodes(DEV_POOL, 2)
    pod = pending(b)
    pg = b.podgroup_of(pod)
    pg["spec"]["minMember"] = 2  # one PodGroup for two pods; the second was never created
    b.event(pg, "NotReady", "Job is not ready for scheduling. Waiting for 2 pods, currently 1 exist, 0 are gated",
            component="kai-scheduler", type_="Normal")
    finding = only(run(b, tmp_path, settings("dev")))
    assert finding.layer == "kai" and finding.cause.startswith("gang minimum unmet: the PodGroup needs 2 pods placed at "
                                                               "once and fewer of its pods exist")
    assert any(e.endswith("spec.minMember=2") for e in finding.evidence)


def test_free_gpus_fragmented_across_nodes(builder: Builder, settings: SettingsOf, tmp_path: Path) -> None:
    b, nodes = prod_h100(builder, gpus_used=16, nodes=2)
    fillers = b.pods("llama-70b-fp8", "prefill", 2, seconds_ago=2 * HOUR)
    for filler, node in zip(fillers, nodes, strict=True):  # six of each node's eight GPUs in use
        for c in filler["spec"]["containers"]:
            c["resources"]["requests"]["nvidia.com/gpu"] = c["resources"]["limits"]["nvidia.com/gpu"] = "6"
        b.bind(filler, node)
    pod = b.pods("llama-70b-fp8", "decode", 1)[0]
    b.kai_unschedulable(pod, KAI_NO_GPUS.format(n=2))
    finding = only(run(b, tmp_path, settings("prod")))
    assert finding.layer == "kai" and finding.cause.startswith("free GPUs are fragmented: 4 are free across nodes but "
                                                               "no node has 4")


def test_topology_constraint_no_node_satisfies(builder: Builder, settings: SettingsOf, tmp_path: Path) -> None:
    b, _ = prod_h100(builder, gpus_used=8, nodes=1)
    pod = b.pods("llama-70b-fp8", "decode", 1)[0]
    level = pod["metadata"]["annotations"]["kai.scheduler/topology-required-placement"]
    pg = b.podgroup_of(pod)["metadata"]["name"]
    b.kai_unschedulable(pod, f"topology gpuscale, requirement {level} couldn't be satisfied for job <inference/{pg}>: "
                             "not enough resources in the cluster to allocate the job")
    finding = only(run(b, tmp_path, settings("prod")))
    assert finding.layer == "kai" and finding.cause.startswith("topology constraint no node set satisfies")
    assert f"kubectl get nodes -L {level}" in finding.confirm_with


def test_no_podgroup_because_the_grouper_did_not_know_the_owner(builder: Builder, settings: SettingsOf,
                                                                tmp_path: Path) -> None:
    b = builder("dev")
    dev_full(b, 0)
    b.nodes(DEV_POOL, 2)
    pod = b.pods(DEV_MODEL, "aggregated", 1, podgroup=False)[0]
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "serving.example.com/v1", "kind": "InferenceService",
                                           "name": "llama", "uid": "0e8c", "controller": True}]
    b.event(pod, "PodGrouperWarning", "failed to find InferenceService: <inference/llama>, uid: <0e8c>: "
            'inferenceservices.serving.example.com "llama" is forbidden', component="pod-grouper")
    finding = only(run(b, tmp_path, settings("dev")))
    assert finding.layer == "kai" and "top owner InferenceService/llama" in finding.cause
    assert any("event PodGrouperWarning: failed to find InferenceService" in e for e in finding.evidence)


def test_healthy_cluster(builder: Builder, settings: SettingsOf, tmp_path: Path) -> None:
    b = builder("prod")
    b.nodepool("h100", gpus_used=16)
    b.nodepool("l40s", gpus_used=2)
    b.queues()
    nodes = b.nodes("h100", 2)
    for i, pod in enumerate(b.pods("llama-70b-fp8", "decode", 4, seconds_ago=2 * HOUR)):
        b.bind(pod, nodes[i // 2])
    report = run(b, tmp_path, settings("prod"))
    assert report == Report(stuck=[], in_progress=[]) and report.exit_code == 0


def test_two_causes_at_once(builder: Builder, settings: SettingsOf, tmp_path: Path) -> None:
    b = builder("dev")
    dev_full(b, 4)  # sandbox's quota (4) and the pool's limit (4) both used up
    over = pending(b)
    b.kai_unschedulable(over, "Non-preemptible workload is over quota. Workload requested 1 GPUs, but sandbox quota is "
                              "4 GPUs, while 4 GPUs are already allocated for non-preemptible pods. Use a preemptible "
                              "workload to go over quota.", reasons=("NonPreemptibleOverQuota",))
    b.karpenter_failed(over, "all available instance types exceed limits for nodepool (NodePool=l40s-spot)")
    report = run(b, tmp_path, settings("dev"))
    assert [(f.pod, f.layer) for f in report.stuck] == [(f"inference/{over['metadata']['name']}", "karpenter"),
                                                         (f"inference/{over['metadata']['name']}", "kai")]
    assert report.exit_code == 1


def test_the_dump_is_dated_by_node_heartbeats_when_no_event_is_recent(builder: Builder, settings: SettingsOf,
                                                                      tmp_path: Path) -> None:
    b = builder("dev")
    dev_full(b, 0)
    (node,) = b.nodes(DEV_POOL, 1, seconds_ago=3 * HOUR)
    node["spec"]["taints"].append({"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"})
    node["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-11-30T12:00:00Z"
    pending(b, seconds_ago=2 * HOUR)  # no controller wrote anything about it
    finding = only(run(b, tmp_path, settings("dev")))
    assert finding.layer == "kai" and finding.cause.startswith("pending 7200 s and no controller has written why")


def test_without_podgroups_in_the_dump_a_grouped_pod_is_not_called_ungrouped(builder: Builder, settings: SettingsOf,
                                                                            tmp_path: Path) -> None:
    b = builder("dev")
    dev_full(b, 0)
    pod = pending(b, seconds_ago=30)
    b.items.remove(b.podgroup_of(pod))  # the dump was taken without podgroups.scheduling.run.ai
    report = run(b, tmp_path, settings("dev"))
    assert report.stuck == [] and [f.layer for f in report.in_progress] == ["kai"]
