"""Add one model to an existing cluster: its team's queue, its namespace, the vLLM service and one autoscaler per role.

The cluster already runs what a gpuscale platform installs (another stack's ``InferencePlatform``, or your own):
Karpenter with a GPU pool labelled ``gpuscale.io/node-pool: l40s`` (``examples/own_program.py``), KAI with its
``gpuscale`` Topology, KEDA and kube-prometheus-stack. The spec below is all gpuscale needs to size the model: the
pool it runs on, the team it is charged to, the model and its traffic. Config: ``kubeContext``, ``clusterName``
(for the S3 weights' Pod Identity), optional ``namespace`` and ``prometheusUrl``.
"""

import pulumi
import pulumi_kubernetes as k8s
import yaml

from gpuscale import PlatformSpec
from gpuscale.components import (
    QueueTree,
    QueueTreeArgs,
    RoleAutoscaler,
    RoleAutoscalerArgs,
    VllmService,
    VllmServiceArgs,
)
from gpuscale.feasibility import checked_sizing

SPEC = """
environment: {name: team-b, stage: dev, aws_region: eu-west-1, endpoint_public_access: true, public_access_cidrs: [203.0.113.0/24]}
topology:
  zones: [eu-west-1a, eu-west-1b]
  gpu_pools: [{name: l40s, instance_types: [g6e.xlarge, g6e.2xlarge], gpu_limit: 8}]
teams: [{name: team-b, gpu_quota: 4, gpu_limit: 8}]
models:
  - name: llama-8b
    architecture: {params_b: 8.03, layers: 32, attention_heads: 32, kv_heads: 8, head_dim: 128,
                   hidden_size: 4096, vocab_size: 128256, max_context_tokens: 16384}
    weights: {uri: "s3://my-models/meta-llama/Llama-3.1-8B-Instruct"}
    slo: {ttft_p99_s: 2.0, itl_p99_s: 0.08, request_timeout_s: 60}
    workload: {base_rps: 1, peak_rps: 5, prompt_tokens: {mean: 800, p99: 3000}, output_tokens: {mean: 200, p99: 800}}
    queue: team-b
    node_pool: l40s
"""
spec = PlatformSpec.model_validate(yaml.safe_load(SPEC))
sizing = checked_sizing(spec)  # refuses a model the pool or the team's quota cannot hold, naming the field to change

config = pulumi.Config()
on_cluster = pulumi.ResourceOptions(provider=k8s.Provider("existing-cluster", context=config.require("kubeContext")))
namespace = k8s.core.v1.Namespace(
    "team-b-llm", metadata={"name": config.get("namespace") or "team-b-llm"}, opts=on_cluster,
)
queues = QueueTree("team-b-queues", QueueTreeArgs.from_spec(spec), opts=on_cluster)

# the namespace is an Output of the Namespace above: every object lands in it and waits for it
service = VllmService(
    "llama-8b",
    VllmServiceArgs.from_platform(spec, sizing, "llama-8b", namespace=namespace.metadata.name,
                                  cluster_name=config.require("clusterName")),
    opts=pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(depends_on=[queues])),
)
for role in spec.models[0].serving.roles:
    RoleAutoscaler(
        f"llama-8b-{role}",
        RoleAutoscalerArgs.from_platform(spec, sizing, "llama-8b", role, namespace=namespace.metadata.name,
                                         prometheus_url=config.get("prometheusUrl")),
        opts=pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(depends_on=[service.workloads[role]])),
    )
pulumi.export("endpoint", service.endpoint)
