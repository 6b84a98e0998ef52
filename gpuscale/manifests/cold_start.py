"""Pure builders for what each cold-start choice needs (``gpuscale.spec.cold_start``): on the node, the EC2NodeClass;
on the pod, volumes, mounts and environment.

* ``image_pull: soci-parallel`` (AL2023): the EC2NodeClass ``userData`` is a nodeadm ``NodeConfig`` turning on the
  ``FastImagePull`` feature gate, which makes nodeadm configure containerd with the SOCI snapshotter in parallel
  pull-and-unpack mode (amazon-eks-ami ``nodeadm/internal/containerd/config.go`` ``UseSOCISnapshotter``: on instances
  with at least 4 vCPUs and 7 GiB, which every GPU type is). Karpenter v1.14.1 merges a plain ``NodeConfig`` user data
  with its own (``pkg/providers/amifamily/bootstrap/nodeadm.go`` ``parseUserData``).
* ``image_pull: snapshot`` (Bottlerocket): the data volume ``/dev/xvdb`` (container images, logs) is created from the
  snapshot, with the provisioned initialization rate so its blocks hydrate at 300 MiB/s rather than on first read only
  (EC2NodeClass ``blockDeviceMappings[].ebs.snapshotID`` / ``volumeInitializationRate``).
* ``engine_start: compile-cache``: ``VLLM_CACHE_ROOT`` (vLLM v0.33.0 ``envs.py``; torch.compile writes
  ``<root>/torch_compile_cache``) on the model's ReadWriteMany claim.
* ``weights_cache: node-nvme``: the ``hf://`` download directory (``HF_HOME``) on the node's NVMe RAID0, which the AL2023
  AMI mounts at ``/mnt/k8s-disks/0`` (amazon-eks-ami ``setup-local-disks``), one directory per model.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml

from gpuscale.spec.cold_start import SNAPSHOT_INIT_MIB_S
from gpuscale.spec.model import ModelDeployment
from gpuscale.spec.topology import GpuNodePoolSpec

NODECONFIG_API = "node.eks.aws/v1alpha1"
FAST_IMAGE_PULL_GATE = "FastImagePull"
"""nodeadm ``api/v1alpha1/nodeconfig_types.go`` feature gate (amazon-eks-ami from v20250813)."""
BOTTLEROCKET_DATA_DEVICE = "/dev/xvdb"
COMPILE_CACHE_MOUNT = "/var/cache/vllm"
"""``VLLM_CACHE_ROOT`` when a compile cache is mounted (the image's default is ``~/.cache/vllm``)."""
NVME_RAID_MOUNT = "/mnt/k8s-disks/0"
"""Where the AL2023 EKS AMI mounts the instance-store RAID0 (``instanceStorePolicy: RAID0``)."""


def node_config_user_data() -> str:
    """The AL2023 ``NodeConfig`` that turns SOCI parallel pull on (YAML of a structure, never text templated)."""
    body = {"apiVersion": NODECONFIG_API, "kind": "NodeConfig", "spec": {"featureGates": {FAST_IMAGE_PULL_GATE: True}}}
    return yaml.safe_dump(body, sort_keys=False)


def apply_image_pull(pool: GpuNodePoolSpec, nodeclass_spec: dict[str, Any]) -> dict[str, Any]:
    """``nodeclass_spec`` (an EC2NodeClass ``spec``) with what the pool's ``image_pull`` needs; a new dict."""
    spec = copy.deepcopy(nodeclass_spec)
    if pool.image_pull == "soci-parallel":
        spec["userData"] = node_config_user_data()
    elif pool.image_pull == "snapshot":
        data = next((m for m in spec["blockDeviceMappings"] if m["deviceName"] == BOTTLEROCKET_DATA_DEVICE), None)
        if data is None:
            raise ValueError(
                f"GPU pool {pool.name}: image_pull: snapshot needs the Bottlerocket data volume {BOTTLEROCKET_DATA_DEVICE}, "
                "which the EC2NodeClass does not map"
            )
        data["ebs"]["snapshotID"] = pool.image_snapshot_id
        data["ebs"]["volumeInitializationRate"] = SNAPSHOT_INIT_MIB_S
    return spec


def compile_cache_volumes(model: ModelDeployment) -> list[dict[str, Any]]:
    claim = model.cold_start.compile_cache_claim
    if model.cold_start.engine_start != "compile-cache" or claim is None:
        return []
    return [{"name": "compile-cache", "persistentVolumeClaim": {"claimName": claim}}]


def compile_cache_mounts(model: ModelDeployment) -> list[dict[str, Any]]:
    if not compile_cache_volumes(model):
        return []
    return [{"name": "compile-cache", "mountPath": COMPILE_CACHE_MOUNT}]


def compile_cache_env(model: ModelDeployment) -> list[dict[str, Any]]:
    if not compile_cache_volumes(model):
        return []
    return [{"name": "VLLM_CACHE_ROOT", "value": COMPILE_CACHE_MOUNT}]


def weights_cache_volume(model: ModelDeployment, size_limit: str) -> dict[str, Any]:
    """The ``hf-cache`` volume: an ``emptyDir`` per pod, or a directory on the node's NVMe kept across pods."""
    if model.cold_start.weights_cache == "node-nvme":
        path = f"{NVME_RAID_MOUNT}/gpuscale/{model.serving.namespace}/{model.name}"
        return {"name": "hf-cache", "hostPath": {"path": path, "type": "DirectoryOrCreate"}}
    return {"name": "hf-cache", "emptyDir": {"sizeLimit": size_limit}}
