"""Use gpuscale's components from your own Pulumi program: a safe GPU NodePool on your cluster, from the pool alone.

Your EKS cluster already runs Karpenter (and the nodes' role has an ``EC2_LINUX`` access entry). The pool needs no
platform spec: the pool itself, your cluster's name, the node role and, here, the subnets to launch in. Each of those
may be a plain value (from config, as here) or another resource's Output (``cluster.name``,
``StackReference(...).get_output("private_subnet_ids")``). Config: ``kubeContext``, ``clusterName``,
``nodeRoleName``, ``subnetIds`` (a list).
"""

import pulumi
import pulumi_kubernetes as k8s

from gpuscale import GpuNodePoolSpec
from gpuscale.components import GpuNodePool, GpuNodePoolArgs, NvidiaDevicePlugin, NvidiaDevicePluginArgs

config = pulumi.Config()
# your cluster, your provider: every child of the components below inherits it
cluster = k8s.Provider("existing-cluster", context=config.require("kubeContext"))
on_cluster = pulumi.ResourceOptions(provider=cluster)

pool = GpuNodePool(
    "l40s",
    GpuNodePoolArgs(
        pool=GpuNodePoolSpec(name="l40s", instance_types=["g6e.xlarge", "g6e.2xlarge"], gpu_limit=8, root_volume_gib=200),
        cluster_name=config.require("clusterName"),
        node_role_name=config.require("nodeRoleName"),
        subnet_ids=config.require_object("subnetIds"),
    ),
    opts=on_cluster,
)
NvidiaDevicePlugin("nvidia", NvidiaDevicePluginArgs(), opts=on_cluster)  # GPU nodes advertise nvidia.com/gpu
pulumi.export("node_pool", pool.node_pool_name)
