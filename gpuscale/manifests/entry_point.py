"""Where a model's entry-point pods run and how a drain may move them: the P/D router and the front door's EPP.

Both sit on the CPU pool, which repacks (``WhenEmptyOrUnderutilized``) and expires its nodes (``expireAfter: 720h``),
and both are the only way into their model. So, one rule for both:

* **on-demand nodes** (required node affinity on ``karpenter.sh/capacity-type``): a spot reclaim would take the
  entry point with two minutes' notice;
* **never two on one node** (required pod anti-affinity on the hostname), preferably in different zones, so one
  node's drain or loss takes at most one replica;
* **a PDB of ``minAvailable: 1``**: no voluntary eviction takes the last Ready replica. With two replicas that all
  answer (the P/D router), a drain evicts one, the Deployment starts its successor on another node, and the next
  drain proceeds once it is Ready: Kubernetes' eviction API allows an eviction while ``currentHealthy >
  minAvailable`` (``pkg/registry/core/pod/storage/eviction.go``). Where only one replica is Ready (one EPP, or the
  leader of two: the chart's leader election makes the standby unready, llm-d-router v0.10.0
  ``cmd/epp/runner/health.go``), the eviction is refused and Karpenter retries it (kubernetes-sigs/karpenter v1.14.1
  ``pkg/controllers/node/termination/terminator/eviction.go``: a 429 requeues) until the CPU pool's
  ``terminationGracePeriod`` deletes the pod (``terminator/events.go``: "This bypasses the PDB"), so an expiring node
  is never stuck cordoned (``gpuscale.manifests.karpenter.CPU_TERMINATION_GRACE_PERIOD``).
"""

from __future__ import annotations

from typing import Any

from gpuscale import labels

ENTRY_POINT_CAPACITY = "on-demand"
PDB_MIN_AVAILABLE = 1


def affinity(selector: dict[str, str]) -> dict[str, Any]:
    """On-demand nodes only; replicas (pods matching ``selector``) on different nodes, preferably different zones."""
    spread = {"labelSelector": {"matchLabels": dict(selector)}}
    return {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": labels.KARPENTER_CAPACITY_TYPE_LABEL, "operator": "In", "values": [ENTRY_POINT_CAPACITY]},
        ]}]}},
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{**spread, "topologyKey": labels.HOSTNAME_LABEL}],
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "podAffinityTerm": {**spread, "topologyKey": labels.ZONE_LABEL}},
            ],
        },
    }


def pdb_body(name: str, namespace: str, object_labels: dict[str, str], selector: dict[str, str]) -> dict[str, Any]:
    """No voluntary eviction (drain, consolidation) takes the last Ready replica."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(object_labels)},
        "spec": {"minAvailable": PDB_MIN_AVAILABLE, "selector": {"matchLabels": dict(selector)}},
    }
