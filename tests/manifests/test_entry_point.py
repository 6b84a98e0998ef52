"""A CPU node that expires under a model's entry point drains, and the entry point keeps serving (issue 22, items 7-8).

A small model of the drain, run over the emitted objects (replicas, PDB, anti-affinity, the CPU pool's grace period):

* Kubernetes' eviction API (``pkg/registry/core/pod/storage/eviction.go``, PDB status from
  ``pkg/controller/disruption/disruption.go``): a Ready pod may be evicted while ``currentHealthy > minAvailable``; a
  pod that is not Ready while ``currentHealthy >= minAvailable`` (``unhealthyPodEvictionPolicy: IfHealthyBudget``,
  the default).
* Karpenter v1.14.1's termination (``pkg/controllers/node/termination/terminator/eviction.go``): it evicts every pod
  on the node, a refused eviction (429) is retried, and once the NodeClaim's ``terminationGracePeriod`` has passed
  the pod is deleted whatever its PDB (``terminator/events.go``). Without a grace period, nothing else ends the drain.
* The Deployment starts a successor on another node (the draining one is tainted), Ready after a start-up time.
* The EPP with two replicas elects a leader, and only the leader is Ready (llm-d-router v0.10.0
  ``cmd/epp/runner/health.go``); a standby takes over a lease after the leader is gone.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from gpuscale.manifests import entry_point, karpenter
from gpuscale.manifests import front_door as fd
from gpuscale.manifests.front_door import FrontDoorSettings
from gpuscale.manifests.router import RouterSettings, router_deployment_body, router_pdb_body
from gpuscale.manifests.vllm import ServingSettings
from gpuscale.sizing import size_platform
from gpuscale.spec.base import duration_seconds
from gpuscale.spec.platform import PlatformSpec
from gpuscale.spec.topology import CpuNodePoolSpec
from tests.specs import pd_raw

STARTUP_S = 30.0
"""Router or EPP pod from creation to Ready on a node that is up."""
LEASE_S = 15.0
"""controller-runtime's default lease duration: how long a standby waits before leading."""
STEP_S = 5.0
HORIZON_S = 6 * 3600.0


@dataclass
class Pod:
    node: str
    ready: bool
    ready_at: float | None = None
    leader_at: float | None = None


@dataclass(frozen=True)
class Drain:
    done_s: float | None
    """When the node had no pod left; ``None``: still draining at the horizon."""
    min_ready: int
    """Fewest Ready entry-point pods at any moment."""


def drain(replicas: int, one_per_node: bool, min_available: int, grace_s: float | None, leader_elected: bool) -> Drain:
    nodes = [f"node-{i}" for i in range(replicas)] if one_per_node else ["node-0"] * replicas
    pods = [Pod(n, ready=not leader_elected or i == 0) for i, n in enumerate(nodes)]
    min_ready = sum(p.ready for p in pods)
    t = 0.0
    while t <= HORIZON_S:
        for p in pods:
            if p.ready_at is not None and t >= p.ready_at and not leader_elected:
                p.ready, p.ready_at = True, None
        if leader_elected and not any(p.ready for p in pods):
            for p in pods:  # the first pod that can take the lease leads, and only the leader is Ready
                if p.ready_at is None or t >= p.ready_at:
                    p.leader_at = p.leader_at if p.leader_at is not None else t + LEASE_S
                    if t >= p.leader_at:
                        p.ready = True
                    break
        min_ready = min(min_ready, sum(p.ready for p in pods))
        on_node = [p for p in pods if p.node == "node-0"]
        if not on_node:
            return Drain(t, min_ready)
        for p in on_node:
            healthy = sum(q.ready for q in pods)
            allowed = healthy > min_available if p.ready else healthy >= min_available
            if allowed or (grace_s is not None and t >= grace_s):
                pods.remove(p)
                pods.append(Pod(f"node-{len(nodes) + len(pods)}", ready=False, ready_at=t + STARTUP_S))
        min_ready = min(min_ready, sum(p.ready for p in pods))
        t += STEP_S
    return Drain(None, min_ready)


def _spec() -> PlatformSpec:
    raw = pd_raw()
    raw["models"][0]["slo"]["request_timeout_s"] = 900
    return PlatformSpec.model_validate(raw)


def _cpu_grace_s() -> float | None:
    body = karpenter.cpu_nodepool_body(CpuNodePoolSpec(), zones=None)
    grace = body["spec"]["template"]["spec"].get("terminationGracePeriod")
    return duration_seconds(grace) if grace is not None else None


def _one_per_node(affinity: dict[str, object] | None, selector: dict[str, str]) -> bool:
    return affinity is not None and affinity == entry_point.affinity(selector)


def test_the_pd_router_drains_one_at_a_time_and_never_goes_dark() -> None:
    spec = _spec()
    args = RouterSettings.from_service(ServingSettings.from_platform(spec, size_platform(spec), "m70b"))
    dep, pdb = router_deployment_body(args), router_pdb_body(args)
    pod = dep["spec"]["template"]["spec"]
    result = drain(dep["spec"]["replicas"], _one_per_node(pod.get("affinity"), dep["spec"]["selector"]["matchLabels"]),
                   pdb["spec"]["minAvailable"], _cpu_grace_s(), leader_elected=False)
    assert result.done_s is not None and result.done_s <= STARTUP_S  # no wait on the grace period
    assert result.min_ready >= 1  # the other router serves throughout


def test_a_lone_router_would_keep_its_node_cordoned_without_the_grace_period() -> None:
    """Before: one router, minAvailable 1, no grace period on the CPU pool. The drain never ends."""
    assert drain(1, True, 1, None, leader_elected=False).done_s is None
    # with the CPU pool's grace period it ends, at the cost of a gap until the successor is Ready
    grace = _cpu_grace_s()
    assert grace == 3600
    lone = drain(1, True, 1, grace, leader_elected=False)
    assert lone.done_s is not None and grace <= lone.done_s <= grace + STEP_S and lone.min_ready == 0


@pytest.mark.parametrize("criticality", ["standard", "critical"])
def test_the_doors_epp_runs_on_demand_one_per_node_and_its_node_drains(criticality: str) -> None:
    raw = pd_raw()
    m = raw["models"][0]
    m["slo"].update(criticality=criticality, request_timeout_s=900)
    if criticality == "standard":
        m["autoscaling"]["prefill"]["min_replicas"] = m["autoscaling"]["decode"]["min_replicas"] = 0
    else:
        m["front_door"] = {"enabled": True}
    spec = PlatformSpec.model_validate(raw)
    door = FrontDoorSettings.from_platform(spec, size_platform(spec), "m70b")
    epp = fd.chart_values(door)["router"]["epp"]
    pdb = fd.pdb_body(door)
    assert pdb["spec"]["selector"]["matchLabels"] == fd.epp_selector("m70b")
    assert epp["affinity"] == entry_point.affinity(fd.epp_selector("m70b"))
    (term,) = epp["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]
    result = drain(epp["replicas"], _one_per_node(epp["affinity"], fd.epp_selector("m70b")),
                   pdb["spec"]["minAvailable"], _cpu_grace_s(), leader_elected=epp["replicas"] > 1)
    # the Ready EPP (the only one, or the leader) is evicted only at the grace period, then a successor takes over
    grace = _cpu_grace_s()
    assert grace is not None and result.done_s is not None and grace <= result.done_s <= grace + STEP_S
    assert epp["replicas"] == (2 if criticality == "critical" else 1)
