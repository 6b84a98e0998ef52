"""Use gpuscale's components from your own Pulumi program.

Here: an existing EKS cluster that already runs Karpenter and KAI. We add one GPU NodePool with safe disruption
and one vLLM service with its per-role autoscaler inputs sized from the same spec. Run it as a Pulumi program
(``main: .`` with this file as ``__main__.py``), or under mocks as the gpuscale tests do.
"""

import pulumi
import pulumi_kubernetes as k8s

from gpuscale import PlatformSpec, size_platform
from gpuscale.components import GpuNodePool, GpuNodePoolArgs, VllmService, VllmServiceArgs

spec = PlatformSpec.model_validate({
    "environment": {"name": "team-a", "stage": "dev", "aws_region": "eu-west-1"},
    "topology": {
        "zones": ["eu-west-1a", "eu-west-1b"],
        "gpu_pools": [{"name": "l40s", "instance_types": ["g6e.xlarge", "g6e.2xlarge"], "gpu_limit": 8}],
    },
    "teams": [{"name": "team-a", "gpu_quota": 8, "gpu_limit": 8, "children": [{"name": "chat", "gpu_quota": 8, "gpu_limit": 8}]}],
    "models": [{
        "name": "llama-8b",
        "architecture": {
            "params_b": 8.03, "layers": 32, "attention_heads": 32, "kv_heads": 8, "head_dim": 128,
            "hidden_size": 4096, "vocab_size": 128256, "max_context_tokens": 16384,
        },
        "weights": {"uri": "s3://my-models/meta-llama/Llama-3.1-8B-Instruct"},
        "slo": {"ttft_p99_s": 2.0, "itl_p99_s": 0.08, "request_timeout_s": 60},
        "workload": {
            "base_rps": 1, "peak_rps": 5, "prompt_tokens": {"mean": 800, "p99": 3000},
            "output_tokens": {"mean": 200, "p99": 800},
        },
        "queue": "chat",
        "node_pool": "l40s",
    }],
})
sizing = size_platform(spec)

# your cluster, your provider: every child of the components below inherits it
cluster = k8s.Provider("existing-cluster", context="arn:aws:eks:eu-west-1:123456789012:cluster/team-a")
on_cluster = pulumi.ResourceOptions(provider=cluster)

pool = GpuNodePool(
    "l40s", GpuNodePoolArgs.from_spec(spec, "l40s"), node_role_name="KarpenterNodeRole-team-a", opts=on_cluster,
)
service = VllmService(
    "llama-8b", VllmServiceArgs.from_platform(spec, sizing, "llama-8b"), depends_on=[pool], opts=on_cluster,
)
pulumi.export("node_pool", pool.node_pool_name)
pulumi.export("endpoint", service.endpoint)
