"""A role's spare GPU nodes as a Karpenter ``CapacityBuffer`` (``autoscaling.x-k8s.io/v1beta1``, Karpenter v1.14.1).

What Karpenter v1.14.1 does with it (read at kubernetes-sigs/karpenter v1.14.1):

- The buffer controller resolves the pod shape from ``scalableRef`` (``apps`` Deployment, StatefulSet or ReplicaSet
  only: ``pkg/utils/apps/resolve.go``) or from a ``podTemplateRef`` (a core ``PodTemplate``), and builds
  ``status.replicas`` *virtual* pods from it in memory (``pkg/state/virtualpods/utilities.go`` ``BuildVirtualPods``:
  annotated ``karpenter.sh/capacity-buffer-fake-pod``, priority ``math.MinInt32``, never written to the API server).
- Every provisioning pass appends them to the pending pods (``provisioner.go`` ``GetPendingPods``, behind the
  ``CapacityBuffer`` gate) and launches NodeClaims for those that do not fit: the spare nodes. The controller triggers a
  pass on each reconcile and requeues every 30 s (``pkg/controllers/capacitybuffer/controller.go``), so a spare node
  taken by a serving pod is relaunched within 30 s plus the batch window.
- A node the last pass placed a virtual pod on is not removed as empty (``Cluster.HasBufferPods``, used by
  ``disruption/emptiness.go``); consolidation simulates the virtual pods as pending, so it never removes the capacity.

With KAI: the virtual pods exist only inside Karpenter, so KAI never sees them: no PodGroup, no queue charge, nothing to
bind, nothing to preempt. A spare node is an empty node of the pool (its labels and taint); KAI binds the model's next
pending replica there at once, within the queue's quota as ever, and Karpenter's next pass launches a node for the
virtual pods that no longer fit. The spare nodes count against the NodePool's GPU limit, so at the limit Karpenter
keeps fewer (``status.conditions`` Provisioning False, ``RequiresNewCapacity``).

Single-pod replicas point ``scalableRef`` at the role's Deployment, so the virtual pods follow its template. A
multi-node replica (a LeaderWorkerSet, which Karpenter cannot resolve) gets a ``PodTemplate`` holding the worker pod's
template as the LeaderWorkerSet has it, and ``replicas`` = N x pods per replica. The virtual pods pull no image: a
replica on a spare node still pulls it (placeholder pods would: the ``headroom`` scenario simulates both).
"""

from __future__ import annotations

from typing import Any

from gpuscale.headroom import HeadroomSizing
from gpuscale.manifests import vllm
from gpuscale.manifests.vllm import ServingSettings
from gpuscale.spec.model import Role

API_VERSION = "autoscaling.x-k8s.io/v1beta1"
"""The group/version Karpenter v1.14.1 serves (``pkg/apis/autoscaling/v1beta1``, its CRD's only version)."""
ACTIVE_CAPACITY = "buffer.x-k8s.io/active-capacity"
"""``provisioningStrategy`` Karpenter v1.14.1 implements (``ActiveProvisioningStrategy``); the CRD's default."""


def buffer_name(model: str, role: Role) -> str:
    return f"{vllm.workload_name(model, role)}-headroom"


def headroom_bodies(args: ServingSettings, role: Role, headroom: HeadroomSizing) -> list[dict[str, Any]]:
    """The CapacityBuffer of ``role`` (and the PodTemplate it names, for a multi-node replica); none when the sized
    headroom is not a paying CapacityBuffer."""
    if headroom.mode != "capacity-buffer" or not headroom.emitted:
        return []
    name = buffer_name(args.model.name, role)
    meta = vllm.object_meta(args, name, role)
    spec: dict[str, Any] = {"provisioningStrategy": ACTIVE_CAPACITY, "replicas": headroom.pods}
    out: list[dict[str, Any]] = []
    if args.shape.multi_node:
        out.append({"apiVersion": "v1", "kind": "PodTemplate", "metadata": dict(meta),
                    "template": vllm.pod_template(args, role, "worker")})
        spec["podTemplateRef"] = {"name": name}
    else:
        spec["scalableRef"] = {"apiGroup": "apps", "kind": "Deployment", "name": vllm.workload_name(args.model.name, role)}
    out.append({"apiVersion": API_VERSION, "kind": "CapacityBuffer", "metadata": meta, "spec": spec})
    return out
