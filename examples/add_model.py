"""Add one model to an existing cluster: its team's queue, the vLLM service and one autoscaler per role.

The cluster already runs what a gpuscale platform installs (another stack's ``InferencePlatform``, or your own):
Karpenter with a GPU pool labelled ``gpuscale.io/node-pool: l40s`` (``examples/own_program.py``), KAI with its
``gpuscale`` Topology, KEDA and a Prometheus scraping the pods. ``ModelOnCluster`` needs the model, the pool it runs
on and the team it is charged to; sizing refuses a model the pool or the team's quota cannot hold, naming the value
to change. Config: ``kubeContext``, ``clusterName`` (for the S3 weights' Pod Identity), ``prometheusUrl``, optional
``namespace`` and ``departmentQueue`` (an existing queue the team's queue goes under).
"""

import pulumi
import pulumi_kubernetes as k8s

from gpuscale import GpuNodePoolSpec, QueueSpec
from gpuscale.components import ModelOnCluster, ModelOnClusterArgs

config = pulumi.Config()
on_cluster = pulumi.ResourceOptions(provider=k8s.Provider("existing-cluster", context=config.require("kubeContext")))
namespace = k8s.core.v1.Namespace(
    "team-b-llm", metadata={"name": config.get("namespace") or "team-b-llm"}, opts=on_cluster,
)
model = ModelOnCluster("llama-8b", ModelOnClusterArgs(
    model={
        "name": "llama-8b",
        "architecture": {"params_b": 8.03, "layers": 32, "attention_heads": 32, "kv_heads": 8, "head_dim": 128,
                         "hidden_size": 4096, "vocab_size": 128256, "max_context_tokens": 16384},
        "weights": {"uri": "s3://my-models/meta-llama/Llama-3.1-8B-Instruct"},
        "slo": {"ttft_p99_s": 2.0, "itl_p99_s": 0.08, "request_timeout_s": 60},
        "workload": {"base_rps": 1, "peak_rps": 5, "prompt_tokens": {"mean": 800, "p99": 3000},
                     "output_tokens": {"mean": 200, "p99": 800}},
    },
    pool=GpuNodePoolSpec(name="l40s", instance_types=["g6e.xlarge", "g6e.2xlarge"], gpu_limit=8),
    team=QueueSpec(name="team-b", gpu_quota=4, gpu_limit=8),
    parent_queue=config.get("departmentQueue"),
    aws_region="eu-west-1",
    # the namespace is an Output of the Namespace above: every object lands in it and waits for it
    namespace=namespace.metadata.name,
    cluster_name=config.require("clusterName"),
    prometheus_url=config.require("prometheusUrl"),
), opts=on_cluster)
pulumi.export("endpoint", model.endpoint)
