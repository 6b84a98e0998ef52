"""The EC2NodeClass + NodePool pair every Karpenter pool component creates (GPU and CPU alike)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from gpuscale.manifests import karpenter


def node_class_and_pool(
    owner: pulumi.Resource, name: str, *, k8s_name: str, class_spec: pulumi.Output[dict[str, Any]],
    pool_body: dict[str, Any], crds: Sequence[pulumi.Resource],
) -> tuple[k8s.apiextensions.CustomResource, k8s.apiextensions.CustomResource]:
    """``<name>-nodeclass`` and ``<name>-nodepool``, both named ``k8s_name`` in the cluster, children of ``owner``.

    The class spec is an Output because ``spec.role`` waits for the node role; metadata never depends on one.
    Both wait for ``crds`` (the Karpenter chart), and the pool for its class.
    """
    node_class = k8s.apiextensions.CustomResource(
        f"{name}-nodeclass",
        api_version=karpenter.EC2NODECLASS_API,
        kind="EC2NodeClass",
        metadata=karpenter.object_metadata(k8s_name),
        spec=class_spec,
        opts=pulumi.ResourceOptions(parent=owner, depends_on=list(crds)),
    )
    node_pool = k8s.apiextensions.CustomResource(
        f"{name}-nodepool",
        api_version=pool_body["apiVersion"],
        kind=pool_body["kind"],
        metadata=pool_body["metadata"],
        spec=pool_body["spec"],
        opts=pulumi.ResourceOptions(parent=owner, depends_on=[node_class, *crds]),
    )
    return node_class, node_pool
