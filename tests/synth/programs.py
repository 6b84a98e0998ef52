"""Small Pulumi programs for the synth, diff, CLI and policy tests (the platform program is composed elsewhere).

``platform_program(knobs)`` registers what the real program does, in miniature: components with nested children,
a Kubernetes provider with a secret kubeconfig, a Namespace, a Secret with secret data, an AWS IAM role, a Helm v4
Chart, a GPU NodePool + EC2NodeClass (CustomResources), a prefill Deployment and a multi-node decode
LeaderWorkerSet, one KEDA ScaledObject per role, and stack exports (one of them secret). Every Kubernetes object is
valid against the upstream CRDs / kubernetes-validate, so tests can hold the synth output to crdcheck's standard.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

SECRET_TOKEN = "hunter2-do-not-leak"
SECRET_KUBECONFIG = "kubeconfig-with-a-token-do-not-leak"


@dataclass(frozen=True)
class Knobs:
    """What a change in a PR could touch."""

    ami_alias: str = "al2023@v20260625"
    consolidation_policy: str = "WhenEmpty"
    consolidate_after: str = "1h"
    gpu_limit: int = 64
    taint_value: str = "true"
    prefill_threshold: str = "4"
    decode_max_replicas: int = 8
    vllm_tag: str = "v0.33.0"
    keda_version: str = "2.20.2"
    decode_scheduler: str = "kai-scheduler"
    extra_models: int = 0
    """Extra aggregated models (a Deployment + ScaledObject each), to make large synths and diffs."""
    extra_args: tuple[str, ...] = ()
    """Extra vLLM arguments on every model, to change many resources at once."""
    budgets_json: str = '[{"nodes": "1"}]'
    """The GPU NodePool's disruption budgets (JSON, so the knobs stay hashable)."""
    termination_grace_period: str | None = None
    """``spec.template.spec.terminationGracePeriod`` of the GPU NodePool (gpuscale never sets it)."""


def _opts(parent: pulumi.Resource, **kw: Any) -> pulumi.ResourceOptions:
    return pulumi.ResourceOptions(parent=parent, **kw)


def nodepool_body(k: Knobs) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "h100", "labels": {"app.kubernetes.io/managed-by": "gpuscale"}},
        "spec": {
            "template": {
                "metadata": {"labels": {"gpuscale.io/node-pool": "h100", "nvidia.com/gpu.present": "true"}},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "h100"},
                    "requirements": [
                        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["p5.48xlarge"]},
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                    ],
                    "taints": [{"key": "nvidia.com/gpu", "value": k.taint_value, "effect": "NoSchedule"}],
                    "expireAfter": "Never",
                    **({"terminationGracePeriod": k.termination_grace_period} if k.termination_grace_period else {}),
                },
            },
            "disruption": {
                "consolidationPolicy": k.consolidation_policy,
                "consolidateAfter": k.consolidate_after,
                "budgets": json.loads(k.budgets_json),
            },
            "limits": {"nvidia.com/gpu": k.gpu_limit},
        },
    }


def ec2nodeclass_body(k: Knobs) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "h100"},
        "spec": {
            "amiSelectorTerms": [{"alias": k.ami_alias}],
            "role": "gpuscale-test-node",
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "gpuscale-test"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "gpuscale-test"}}],
            "metadataOptions": {"httpEndpoint": "enabled", "httpTokens": "required", "httpPutResponseHopLimit": 1},
            "blockDeviceMappings": [{
                "deviceName": "/dev/xvda",
                "ebs": {"volumeSize": "500Gi", "volumeType": "gp3", "encrypted": True},
            }],
        },
    }


def vllm_pod(model: str, role: str, k: Knobs, *, scheduler: str = "kai-scheduler", gpus: int = 4) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"gpuscale.io/model": model, "gpuscale.io/role": role, "kai.scheduler/queue": "chat"}},
        "spec": {
            "schedulerName": scheduler,
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "nodeSelector": {"gpuscale.io/node-pool": "h100"},
            "containers": [{
                "name": "vllm",
                "image": f"vllm/vllm-openai:{k.vllm_tag}",
                "args": ["--port", "8000", "--tensor-parallel-size", str(gpus), *k.extra_args],
                "resources": {"limits": {"nvidia.com/gpu": str(gpus)}, "requests": {"nvidia.com/gpu": str(gpus)}},
                "env": [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}}],
            }],
        },
    }


def scaledobject_body(name: str, target_kind: str, target: str, query: str, threshold: str, max_replicas: int,
                      target_api: str = "apps/v1") -> dict[str, Any]:
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": name, "namespace": "inference"},
        "spec": {
            "scaleTargetRef": {"apiVersion": target_api, "kind": target_kind, "name": target},
            "minReplicaCount": 1,
            "maxReplicaCount": max_replicas,
            "triggers": [{
                "type": "prometheus",
                "metadata": {
                    "serverAddress": "http://prometheus.monitoring.svc:9090",
                    "query": query,
                    "threshold": threshold,
                },
            }],
        },
    }


def lws_body(k: Knobs) -> dict[str, Any]:
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "llama-decode", "namespace": "inference", "labels": {"kai.scheduler/queue": "chat"}},
        "spec": {
            "leaderWorkerTemplate": {
                "size": 2,
                "workerTemplate": vllm_pod("llama", "decode", k, scheduler=k.decode_scheduler, gpus=8),
            },
        },
    }


class TestPool(pulumi.ComponentResource):
    """A GPU pool: EC2NodeClass + NodePool."""

    def __init__(self, name: str, k: Knobs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuscale:index:TestPool", name, None, opts)
        nc = k8s.apiextensions.CustomResource(f"{name}-nodeclass", **_cr(ec2nodeclass_body(k)), opts=_opts(self))
        k8s.apiextensions.CustomResource(f"{name}-nodepool", **_cr(nodepool_body(k)), opts=_opts(self, depends_on=[nc]))
        self.register_outputs({})


class TestModel(pulumi.ComponentResource):
    """A disaggregated model: prefill Deployment, decode LeaderWorkerSet, one ScaledObject per role."""

    def __init__(self, name: str, k: Knobs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuscale:index:TestModel", name, None, opts)
        labels = {"gpuscale.io/model": "llama", "gpuscale.io/role": "prefill"}
        prefill = k8s.apps.v1.Deployment(
            f"{name}-prefill",
            metadata={"name": "llama-prefill", "namespace": "inference", "labels": {"kai.scheduler/queue": "chat"}},
            spec={"selector": {"matchLabels": labels}, "template": vllm_pod("llama", "prefill", k)},
            opts=_opts(self),
        )
        decode = k8s.apiextensions.CustomResource(f"{name}-decode", **_cr(lws_body(k)), opts=_opts(self))
        k8s.apiextensions.CustomResource(f"{name}-prefill-scaler", **_cr(scaledobject_body(
            "llama-prefill", "Deployment", "llama-prefill",
            'sum(vllm:num_requests_waiting{gpuscale_io_model="llama",gpuscale_io_role="prefill"})',
            k.prefill_threshold, 16,
        )), opts=_opts(self, depends_on=[prefill]))
        k8s.apiextensions.CustomResource(f"{name}-decode-scaler", **_cr(scaledobject_body(
            "llama-decode", "LeaderWorkerSet", "llama-decode",
            'avg(vllm:kv_cache_usage_perc{gpuscale_io_model="llama",gpuscale_io_role="decode"})',
            "0.8", k.decode_max_replicas, target_api="leaderworkerset.x-k8s.io/v1",
        )), opts=_opts(self, depends_on=[decode]))
        self.register_outputs({})


class TestPlatform(pulumi.ComponentResource):
    """The composition root of the test program."""

    endpoint: pulumi.Output[str]

    def __init__(self, name: str, k: Knobs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuscale:index:TestPlatform", name, None, opts)
        provider = k8s.Provider(f"{name}-k8s", kubeconfig=pulumi.Output.secret(SECRET_KUBECONFIG), opts=_opts(self))
        role = aws.iam.Role(
            f"{name}-node-role",
            assume_role_policy=json.dumps({
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"},
                               "Action": "sts:AssumeRole"}],
            }),
            opts=_opts(self),
        )
        k8s_opts = _opts(self, provider=provider)
        ns = k8s.core.v1.Namespace(f"{name}-ns", metadata={"name": "inference"}, opts=k8s_opts)
        k8s.core.v1.Secret(
            f"{name}-hf-token",
            metadata={"name": "hf-token", "namespace": "inference"},
            string_data={"token": pulumi.Output.secret(SECRET_TOKEN)},
            opts=_opts(self, provider=provider, depends_on=[ns]),
        )
        chart = k8s.helm.v4.Chart(
            f"{name}-keda",
            chart="keda",
            version=k.keda_version,
            namespace="keda",
            repository_opts={"repo": "https://kedacore.github.io/charts"},
            values={"resources": {"operator": {"requests": {"cpu": "100m"}}}, "podIdentity": {"aws": {"irsa": {
                "enabled": False}}}},
            opts=k8s_opts,
        )
        child_opts = _opts(self, provider=provider, depends_on=[chart, ns])
        TestPool(f"{name}-h100", k, opts=child_opts)
        TestModel(f"{name}-llama", k, opts=child_opts)
        for i in range(k.extra_models):
            model = f"extra-{i:03d}"
            labels = {"gpuscale.io/model": model, "gpuscale.io/role": "aggregated"}
            k8s.apps.v1.Deployment(
                f"{name}-{model}",
                metadata={"name": model, "namespace": "inference"},
                spec={"selector": {"matchLabels": labels}, "template": vllm_pod(model, "aggregated", k, gpus=1)},
                opts=child_opts,
            )
            k8s.apiextensions.CustomResource(f"{name}-{model}-scaler", **_cr(scaledobject_body(
                model, "Deployment", model, f'sum(vllm:num_requests_waiting{{gpuscale_io_model="{model}"}})',
                k.prefill_threshold, 4,
            )), opts=child_opts)
        self.endpoint = pulumi.Output.from_input("https://test.example")
        self.node_role_arn = role.arn
        self.register_outputs({"endpoint": self.endpoint, "node_role_arn": role.arn})


def _cr(body: dict[str, Any]) -> dict[str, Any]:
    """CustomResource keyword arguments from a manifest body."""
    rest = {k: v for k, v in body.items() if k not in ("apiVersion", "kind", "metadata")}
    return {"api_version": body["apiVersion"], "kind": body["kind"], "metadata": body["metadata"], **rest}


def platform_program(knobs: Knobs | None = None) -> Callable[[], None]:
    """The program function ``synthesize`` runs."""

    k = knobs or Knobs()

    def run() -> None:
        p = TestPlatform("test", k)
        pulumi.export("endpoint", p.endpoint)
        pulumi.export("nodeRoleArn", p.node_role_arn)
        pulumi.export("kubeconfig", pulumi.Output.secret(SECRET_KUBECONFIG))

    return run
