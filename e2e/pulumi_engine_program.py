"""The Kubernetes half of the platform program, for the real Pulumi engine on a cluster that already exists.

``InferencePlatform`` creates the EKS cluster and everything in it through one provider made from that cluster; here
the cluster is the local control plane, so the in-cluster pieces are registered on a provider made from a kubeconfig
(with the settings of the one ``EksCluster`` makes, ``components/kubernetes_provider.py``): everything in the cluster
is ``InferencePlatform``'s own composition (``components/platform_layers.py``, called by both), with
``charts=False, aws=False``. Left out (``platform_layers`` names each, with the reason), and why:

- every component that installs a Helm chart (Karpenter, the device plugins, DCGM exporter, kube-prometheus-stack, KAI,
  LWS, KEDA, prometheus-adapter, and a model's ``FrontDoor``, whose router is the llm-d chart): the chart repositories
  cannot be reached from here, so they stay under mocks (``gpuscale synth``); the CRDs those charts would bring are
  installed from ``../shared/crds`` instead;
- every AWS resource (no AWS endpoint): a model's S3 Pod Identity role (``VllmService`` gets no ``cluster_name``, so it
  creates none and warns) and a pool's EC2 cluster placement group (a pool with ``cluster_placement`` is left out
  whole: its ``GpuNodePool`` creates the group first).

Which objects were left out is returned, so the synth-vs-preview comparison accounts for each.

No kubelet runs and KAI is not installed, so the serving pods are never scheduled: every object gets
``pulumi.com/skipAwait: "true"`` (pulumi-kubernetes ``pkg/metadata/annotations.go`` at f47bc2d6), without which the
provider waits for a Deployment's replicas and a Service's endpoints (10 minutes, then fails). It is the only thing
this program adds to what the components emit, and the comparison ignores exactly that annotation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from gpuscale.components.children import Refused
from gpuscale.components.inference_platform import default_cluster_name
from gpuscale.components.kubernetes_provider import kubernetes_provider
from gpuscale.components.platform_layers import PlatformLayersArgs, aws_left_out, platform_layers
from gpuscale.feasibility import checked_sizing
from gpuscale.problems import Problems, Refusal
from gpuscale.spec.platform import PlatformSpec
from gpuscale.stackfile import load_from_pulumi_config

PLATFORM_NAME = "gpuscale"
"""The name ``gpuscale.program.deploy`` gives ``InferencePlatform``: the prefix of every child's logical name."""
SKIP_AWAIT = "pulumi.com/skipAwait"
NODE_ROLE_NAME = "gpuscale-e2e-node-role"
"""The node role the EC2NodeClasses name. ``InferencePlatform`` passes Karpenter's IAM role (an AWS resource)."""
KUBECONFIG_KEY = "kubeconfig"
"""The stack config key (``gpuscale-e2e:kubeconfig``, a secret) holding the kubeconfig of the local cluster."""


@dataclass
class ClusterHalf:
    """What the program registered, and which of the platform's components it left out (with the reason)."""

    provider: k8s.Provider
    left_out: dict[str, str] = field(default_factory=dict)
    """Logical name of a left-out component -> why."""


def skip_await(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
    """Add ``pulumi.com/skipAwait: "true"`` to every Kubernetes object (see the module docstring)."""
    if not args.custom or not args.type_.startswith("kubernetes:") or "metadata" not in args.props:
        return None
    props = dict(args.props)
    props["metadata"] = pulumi.Output.from_input(props["metadata"]).apply(with_skip_await)
    return pulumi.ResourceTransformResult(props=props, opts=args.opts)


def with_skip_await(meta: Any) -> dict[str, Any]:
    """An object's ``metadata`` with ``pulumi.com/skipAwait: "true"`` added to its annotations."""
    out: dict[str, Any] = dict(meta or {})
    out["annotations"] = {**(out.get("annotations") or {}), SKIP_AWAIT: "true"}
    return out


def left_out(spec: PlatformSpec) -> dict[str, str]:
    """The platform's components (logical names) with AWS children that ``cluster_half`` leaves out, and why (the
    chart components it also leaves out are known from the synth: each has a Helm chart child there)."""
    out: dict[str, str] = aws_left_out(PLATFORM_NAME, spec)
    return out


def cluster_half(spec: PlatformSpec, provider: k8s.Provider) -> ClusterHalf:
    """The in-cluster components of ``InferencePlatform`` for ``spec``, through ``provider``: its own composition
    (``platform_layers``) without charts or AWS resources; refusals as ``InferencePlatform`` raises them (a spec whose
    layers disagree is refused before anything registers)."""
    try:
        sizing = checked_sizing(spec)
    except Problems as exc:
        raise Refused(exc.problems, exc.source) from None
    layers = platform_layers(PLATFORM_NAME, PlatformLayersArgs(
        spec=spec, sizing=sizing, cluster_name=default_cluster_name(PLATFORM_NAME, spec), charts=False, aws=False,
        node_role_name=NODE_ROLE_NAME,
    ), lambda *after: pulumi.ResourceOptions(provider=provider, depends_on=list(after)))
    return ClusterHalf(provider, layers.left_out)


def provider_from_config() -> k8s.Provider:
    """The Kubernetes provider of the local cluster, from the stack's secret ``kubeconfig`` config."""
    kubeconfig = pulumi.Config().require_secret(KUBECONFIG_KEY)
    provider: k8s.Provider = kubernetes_provider("local-cluster", kubeconfig)  # the settings EksCluster's has
    return provider


def stack_program(
    edit: Callable[[PlatformSpec], PlatformSpec] | None = None,
    transforms: Sequence[pulumi.ResourceTransform] = (),
) -> Callable[[], None]:
    """The inline program: the stack's ``gpuscale:*`` config read and validated as ``gpuscale.program.main`` does,
    ``edit`` applied (a scenario's change to the spec), ``transforms`` registered (what a user's own program might do
    to the emitted objects), then ``cluster_half``. A refusal ends the run as a ``pulumi.RunError``, which the
    Automation API's language server reports as its message alone."""

    def program() -> None:
        for transform in (skip_await, *transforms):
            pulumi.runtime.register_resource_transform(transform)
        try:
            spec = load_from_pulumi_config()
            if edit is not None:
                spec = edit(spec)
            half = cluster_half(spec, provider_from_config())
        except Refusal as exc:
            raise pulumi.RunError(str(exc)) from None
        pulumi.export("left_out", half.left_out)

    return program


def config_map_program(name: str, data: str, *, gpuscale_provider: bool,
                       kubeconfig: str | None = None) -> Callable[[], None]:
    """One ConfigMap ``name`` in ``default`` holding ``data``, through a provider made as gpuscale makes its own
    (``gpuscale_provider``) or with the provider's defaults: where the replace-on-data rule is checked against the
    engine. ``kubeconfig`` defaults to the stack's secret (``None``); the synth passes any string."""

    def program() -> None:
        config = kubeconfig if kubeconfig is not None else pulumi.Config().require_secret(KUBECONFIG_KEY)
        provider = (kubernetes_provider(f"{name}-cluster", config) if gpuscale_provider
                    else k8s.Provider(f"{name}-cluster", kubeconfig=config))
        k8s.core.v1.ConfigMap(name, metadata={"name": name, "namespace": "default"}, data={"board.json": data},
                              opts=pulumi.ResourceOptions(provider=provider))

    return program

