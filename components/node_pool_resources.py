"""The EC2NodeClass + NodePool pair every Karpenter pool component creates (GPU and CPU alike)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from gpuscale.components.children import child_opts, claim
from gpuscale.components.inputs import StrInput, StrListInput, output_list
from gpuscale.manifests import karpenter

NodeClassBuilder = Callable[[str, str, list[str] | None, list[str] | None], dict[str, Any]]
"""``(cluster_name, node_role_name, subnet_ids, security_group_ids) -> EC2NodeClass body``."""


def node_class_spec(
    build: NodeClassBuilder, *, cluster_name: StrInput, node_role_name: StrInput,
    subnet_ids: StrListInput | None, security_group_ids: StrListInput | None,
) -> pulumi.Output[dict[str, Any]]:
    """The EC2NodeClass ``spec`` once the cluster name, the node role and the explicit ids (if any) are known."""
    subnets = output_list(subnet_ids) if subnet_ids is not None else None
    groups = output_list(security_group_ids) if security_group_ids is not None else None
    return pulumi.Output.all(cluster_name, node_role_name, subnets, groups).apply(
        lambda a: build(a[0], a[1], a[2], a[3])["spec"]
    )


def node_class_and_pool(
    owner: pulumi.Resource, name: str, who: str, *, k8s_name: str, class_spec: pulumi.Output[dict[str, Any]],
    pool_body: dict[str, Any], opts: pulumi.ResourceOptions | None,
) -> tuple[k8s.apiextensions.CustomResource, k8s.apiextensions.CustomResource]:
    """``<name>-nodeclass`` and ``<name>-nodepool``, both named ``k8s_name`` in the cluster, children of ``owner``.

    The class spec is an Output because ``spec.role`` (and the cluster name, subnets ...) may be other resources'
    Outputs; metadata never depends on one. Both wait for what ``opts.depends_on`` names (the Karpenter chart and
    its CRDs), and the pool for its class. A second pool component on the same cluster with the same name is refused.
    """
    fix = "give one of them another name (its args' name field)"
    for kind in ("EC2NodeClass", "NodePool"):
        claim(owner, who, "kubernetes", kind, k8s_name, fix=fix)
    node_class = k8s.apiextensions.CustomResource(
        f"{name}-nodeclass",
        api_version=karpenter.EC2NODECLASS_API,
        kind="EC2NodeClass",
        metadata=karpenter.object_metadata(k8s_name),
        spec=class_spec,
        opts=child_opts(owner, opts),
    )
    node_pool = k8s.apiextensions.CustomResource(
        f"{name}-nodepool",
        api_version=pool_body["apiVersion"],
        kind=pool_body["kind"],
        metadata=pool_body["metadata"],
        spec=pool_body["spec"],
        opts=child_opts(owner, opts, node_class),
    )
    return node_class, node_pool

