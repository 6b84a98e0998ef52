"""Every pinned upstream version, in one place, each naming the release it matches.

Bumping a version is a one-line change here; the synth diff then shows every object it touches. Every chart, image and
AMI pin is checked against an upstream release list kept as data in ``gpuscale/upstream/`` (each file names where the
list was read and when): ``tests/test_versions.py`` refuses a pin that is not a real release, and ``gpuscale versions``
prints them all. Sources: ``research/upstream-facts.md``, ``upstream-facts-2.md`` and ``serving-facts.md``.
"""

from __future__ import annotations

import datetime
import tomllib
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

from gpuscale.signals import vllm_metrics
from gpuscale.spec.base import Spec


class HelmChartPin(Spec):
    """A Helm chart at an exact version."""

    chart: str
    """Chart name, or a full ``oci://`` reference."""
    version: str
    """Exact chart version (no ranges)."""
    repo: str | None = None
    """Classic Helm repository URL; ``None`` for OCI charts."""
    upstream_release: str
    """The upstream release this chart version ships."""


class ImagePin(Spec):
    """A container image at an exact tag."""

    repository: str
    tag: str
    upstream_release: str

    @property
    def ref(self) -> str:
        return f"{self.repository}:{self.tag}"


KARPENTER = HelmChartPin(
    chart="oci://public.ecr.aws/karpenter/karpenter",
    version="1.14.1",
    upstream_release="aws/karpenter-provider-aws v1.14.1 (bde00654, 2026-08-20)",
)
KAI_SCHEDULER = HelmChartPin(
    chart="oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler",
    version="v0.17.0",
    upstream_release="kai-scheduler/KAI-Scheduler v0.17.0 (f218c69b, 2026-08-03); v0.20.0/v0.20.1 are retracted upstream",
)
KEDA = HelmChartPin(
    chart="keda",
    repo="https://kedacore.github.io/charts",
    version="2.20.2",
    upstream_release="kedacore/keda v2.20.2 (68a5b502, 2026-07-31)",
)
LWS = HelmChartPin(
    chart="oci://registry.k8s.io/lws/charts/lws",
    version="0.10.0",
    upstream_release="kubernetes-sigs/lws v0.10.0 (2161f38f, 2026-08-11)",
)
NVIDIA_DEVICE_PLUGIN = HelmChartPin(
    chart="nvidia-device-plugin",
    repo="https://nvidia.github.io/k8s-device-plugin",
    version="0.20.0",
    upstream_release="NVIDIA/k8s-device-plugin v0.20.0 (1b826acc, 2026-08-19)",
)
PROMETHEUS_ADAPTER = HelmChartPin(
    chart="prometheus-adapter",
    repo="https://prometheus-community.github.io/helm-charts",
    version="5.3.0",
    upstream_release="prometheus-community/helm-charts prometheus-adapter-5.3.0 (app v0.12.0)",
)
KUBE_PROMETHEUS_STACK = HelmChartPin(
    chart="kube-prometheus-stack",
    repo="https://prometheus-community.github.io/helm-charts",
    version="88.0.0",
    upstream_release=(
        "prometheus-community/helm-charts kube-prometheus-stack-88.0.0 (PR #7152, 2026-07-31): appVersion "
        "prometheus-operator v0.93.0, the release whose CRDs ../shared/crds/prometheus-operator holds"
    ),
)

LLM_D_ROUTER = HelmChartPin(
    chart="oci://ghcr.io/llm-d/charts/llm-d-router-standalone",
    version="v0.10.0",
    upstream_release=(
        "llm-d/llm-d-router v0.10.0 (71f4f099, 2026-08-17): hack/push-chart.sh packages config/charts/"
        "llm-d-router-standalone with the git tag as the chart version and pushes it to oci://ghcr.io/llm-d/charts"
    ),
)
LLM_D_ROUTER_EPP = ImagePin(
    repository="ghcr.io/llm-d/llm-d-router-endpoint-picker",
    tag="v0.10.0",
    upstream_release="llm-d/llm-d-router v0.10.0: the release image hack/push-chart.sh writes into the chart's values",
)
LLM_D_ROUTER_ENVOY = ImagePin(
    repository="docker.io/envoyproxy/envoy",
    tag="distroless-v1.33.2",
    upstream_release="the Envoy of llm-d-router-standalone v0.10.0's envoy preset (values.yaml router.proxy.presets.envoy)",
)

VLLM = ImagePin(
    repository="vllm/vllm-openai",
    tag="v0.33.0",
    upstream_release="vllm-project/vllm v0.33.0 (PyPI 2026-11-02)",
)
VLLM_ROUTER = ImagePin(
    repository="vllm/vllm-router",
    tag="v0.1.17",
    upstream_release="vllm-project/router 0.1.17 (PyPI vllm-router 2026-11-04)",
)

DCGM_EXPORTER = HelmChartPin(
    chart="dcgm-exporter",
    repo="https://nvidia.github.io/dcgm-exporter/helm-charts",
    version="4.8.2",
    upstream_release="NVIDIA/dcgm-exporter 4.5.3-4.8.2 (691c927, 2026-05-06): deployment/Chart.yaml version 4.8.2",
)
AWS_EFA_DEVICE_PLUGIN = HelmChartPin(
    chart="aws-efa-k8s-device-plugin",
    repo="https://aws.github.io/eks-charts",
    version="v0.5.30",
    upstream_release="aws/eks-charts stable/aws-efa-k8s-device-plugin v0.5.30 (bfe91c4, 2026-07-21): image v0.5.20",
)

EKS_AL2023_AMI_ALIAS = "al2023@v20260714"
"""EC2NodeClass AMI alias: amazon-eks-ami release v20260714, the newest release whose CHANGELOG lists the AL2023 NVIDIA
AMI for every supported Kubernetes minor (1.30-1.36); the alias picks the NVIDIA variant on GPU types."""

# the metric names of the pinned vLLM, spelled once in gpuscale.signals.vllm_metrics
VLLM_METRICS: frozenset[str] = vllm_metrics.GAUGES
"""vLLM gauges an autoscaler may target with the pinned vLLM (``vllm/v1/metrics/loggers.py``)."""
VLLM_RATE_METRICS: frozenset[str] = vllm_metrics.COUNTERS
"""vLLM Counters an autoscaler may ``rate()`` (scraped with the ``_total`` suffix; upstream-facts.md section 7)."""
VLLM_HISTOGRAMS: frozenset[str] = vllm_metrics.HISTOGRAMS
"""vLLM Histograms whose ``_sum``/``_count`` the autoscaler queries read."""
VLLM_REMOVED_METRICS: Mapping[str, str] = vllm_metrics.REMOVED
"""Metric names that the pinned vLLM no longer exposes, with the replacement."""

ALL_CHARTS: Mapping[str, HelmChartPin] = {
    "karpenter": KARPENTER,
    "kai-scheduler": KAI_SCHEDULER,
    "keda": KEDA,
    "lws": LWS,
    "nvidia-device-plugin": NVIDIA_DEVICE_PLUGIN,
    "prometheus-adapter": PROMETHEUS_ADAPTER,
    "kube-prometheus-stack": KUBE_PROMETHEUS_STACK,
    "aws-efa-k8s-device-plugin": AWS_EFA_DEVICE_PLUGIN,
    "llm-d-router-standalone": LLM_D_ROUTER,
    "dcgm-exporter": DCGM_EXPORTER,
}
ALL_IMAGES: Mapping[str, ImagePin] = {
    "vllm": VLLM, "vllm-router": VLLM_ROUTER, "llm-d-router-endpoint-picker": LLM_D_ROUTER_EPP,
    "envoy": LLM_D_ROUTER_ENVOY,
}

EKS_STANDARD_SUPPORT_ENDS: Mapping[str, datetime.date] = {
    "1.34": datetime.date(2026, 12, 2),
    "1.35": datetime.date(2027, 3, 27),
    "1.36": datetime.date(2027, 8, 2),
}
"""End of EKS standard support per Kubernetes minor (upstream-facts-2.md B6: EKS user guide, endoflife.date). After it EKS
bills extended support and finally upgrades the control plane itself; 1.33 and older had left it by 2026-11-30."""
SUPPORTED_KUBERNETES_VERSIONS: tuple[str, ...] = tuple(EKS_STANDARD_SUPPORT_ENDS)
"""EKS Kubernetes minors in standard support that the pinned Karpenter supports."""
DEFAULT_KUBERNETES_VERSION = "1.36"
"""The newest minor in EKS standard support that Karpenter v1.14.1 supports."""
KARPENTER_KUBERNETES_RANGE: tuple[str, str] = ("1.26", "1.36")
"""Kubernetes minors the pinned Karpenter supports: ``MinK8sVersion``/``MaxK8sVersion`` in aws/karpenter-provider-aws
v1.14.1 ``pkg/providers/version/version.go``; outside it the controller logs "not compatible"."""


def today() -> datetime.date:
    """The date support windows are judged on (a function so tests can fix it)."""
    return datetime.date.today()


def minor(version: str) -> tuple[int, int]:
    """``"1.36"`` -> ``(1, 36)``."""
    major, _, rest = version.partition(".")
    return int(major), int(rest)


def ami_release(alias: str) -> str:
    """The release part of an EC2NodeClass alias: ``al2023@v20260714`` -> ``v20260714``."""
    return alias.partition("@")[2]


@cache
def eks_ami_releases() -> Mapping[str, frozenset[str] | None]:
    """amazon-eks-ami releases (``gpuscale/upstream/eks_ami_releases.tsv``) -> the Kubernetes minors each built the
    AL2023 NVIDIA AMI for; ``None`` for a real release whose CHANGELOG entry is missing (its minors are unknown)."""
    text = resources.files("gpuscale").joinpath("upstream/eks_ami_releases.tsv").read_text(encoding="utf-8")
    out: dict[str, frozenset[str] | None] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        release, _, minors = line.partition("\t")
        out[release] = None if minors.strip() == "-" else frozenset(minors.split())
    return out


@cache
def eks_addon_registries() -> Mapping[str, str]:
    """AWS Region -> the ECR registry of EKS-built images there (``gpuscale/upstream/eks_addon_registries.tsv``)."""
    text = resources.files("gpuscale").joinpath("upstream/eks_addon_registries.tsv").read_text(encoding="utf-8")
    rows = (line.split("\t") for line in text.splitlines() if line.strip() and not line.startswith("#"))
    return {region: registry for region, registry in rows}


EFA_DEVICE_PLUGIN_REPOSITORY = "eks/aws-efa-k8s-device-plugin"
"""The plugin's repository in every region's EKS registry (the chart's ``image.repository`` minus its us-west-2 host)."""


def efa_device_plugin_repository(region: str) -> str | None:
    """The EFA device plugin image of the cluster's region; ``None`` for a region with no documented EKS registry."""
    registry = eks_addon_registries().get(region)
    return f"{registry}/{EFA_DEVICE_PLUGIN_REPOSITORY}" if registry else None


@cache
def upstream_releases() -> Mapping[str, Mapping[str, Any]]:
    """Upstream release lists of every chart and image pin (``gpuscale/upstream/releases.toml``), keyed
    ``charts.<name>`` / ``images.<name>`` as in ``ALL_CHARTS`` / ``ALL_IMAGES``."""
    doc = tomllib.loads(resources.files("gpuscale").joinpath("upstream/releases.toml").read_text(encoding="utf-8"))
    return {f"{kind}.{name}": entry for kind in ("charts", "images") for name, entry in doc.get(kind, {}).items()}



class BinaryPin(Spec):
    """A controller binary the real-controllers test tier (``make e2e``) builds from the Go module proxy.

    Its wrapper module ``e2e/modules/<name>/go.mod`` requires ``module`` at ``version`` and lists ``packages`` as tools;
    ``tests/test_versions.py`` checks both agree with this pin and with the chart gpuscale deploys."""

    name: str
    """The wrapper module's folder under ``e2e/modules/`` and the cache folder's stem (``<name>-<version>``)."""
    module: str
    version: str
    packages: tuple[str, ...]
    """The main packages built."""
    binaries: tuple[str, ...]
    """The file each package is built to (``go build -o``), one per package in the same order; the harness runs these."""
    ldflags: tuple[str, ...] = ()
    """``go build -ldflags`` the upstream release build sets and a controller reads (e.g. the version it reports)."""
    data: tuple[str, ...] = ()
    """Files of the upstream module at the pinned version the harness reads (CRDs, kwok's stages), as globs relative to
    the module root; copied beside the binaries under ``data/`` when they are built."""
    generated_json: tuple[tuple[str, str, str | None], ...] = ()
    """Files a main package embeds that upstream's ``go generate`` writes and the module zip lacks, as
    ``(target, source, version)`` paths relative to the module root: ``target`` is ``source`` re-serialized compactly,
    with its top-level ``"version"`` set to ``version`` when that is not ``None``. The build compiles a copy of the
    module with these files added (outside the work tree), never upstream source kept here."""
    deploys_as: str | None
    """The ``ALL_CHARTS`` key whose app version this binary must equal, or ``None`` (no chart deploys it)."""
    skew: str | None = None
    """Why this binary differs from the chart's version, when it does; ``None`` means it must equal it."""
    upstream_release: str


E2E_KUBERNETES = BinaryPin(
    name="kubernetes",
    module="k8s.io/kubernetes",
    version="v1.36.3",
    packages=tuple(f"k8s.io/kubernetes/cmd/{c}" for c in
                   ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")),
    binaries=("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"),
    # what hack/lib/version.sh sets: without it the apiserver reports v0.0.0-master and Karpenter's version check
    # (MinK8sVersion) refuses the cluster
    ldflags=tuple(f"-X k8s.io/component-base/version.{k}={v}" for k, v in
                  (("gitVersion", "v1.36.3"), ("gitMajor", "1"), ("gitMinor", "36"), ("gitTreeState", "clean"))),
    deploys_as=None,
    upstream_release="kubernetes/kubernetes v1.36.3, the newest patch of the stacks' minor (DEFAULT_KUBERNETES_VERSION)",
)
E2E_ETCD = BinaryPin(
    name="etcd",
    module="go.etcd.io/etcd/server/v3",
    version="v3.7.3",
    packages=("go.etcd.io/etcd/server/v3",),
    binaries=("etcd",),
    deploys_as=None,
    upstream_release="etcd-io/etcd v3.7.3 (EKS runs etcd itself; any etcd the apiserver supports will do)",
)
E2E_KWOK = BinaryPin(
    name="kwok",
    module="sigs.k8s.io/kwok",
    version="v0.8.0",
    packages=("sigs.k8s.io/kwok/cmd/kwok",),
    binaries=("kwok",),
    data=("kustomize/stage/node/fast/node-initialize.yaml",
          "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
          "kustomize/stage/pod/fast/pod-*.yaml"),
    deploys_as=None,
    upstream_release="kubernetes-sigs/kwok v0.8.0: stands in for kubelets (node heartbeats, pods Running)",
)
E2E_KARPENTER = BinaryPin(
    name="karpenter-kwok",
    module="sigs.k8s.io/karpenter",
    version="v1.14.1",
    packages=("sigs.k8s.io/karpenter/kwok",),
    binaries=("karpenter-kwok",),
    data=("kwok/apis/crds/*.yaml", "kwok/charts/crds/*.yaml"),
    deploys_as="karpenter",
    upstream_release="kubernetes-sigs/karpenter v1.14.1 (6e7eab7a), the core the aws provider v1.14.1 chart runs",
)
E2E_KEDA = BinaryPin(
    name="keda",
    module="github.com/kedacore/keda/v2",
    version="v2.20.2",
    packages=("github.com/kedacore/keda/v2/cmd/operator", "github.com/kedacore/keda/v2/cmd/adapter"),
    binaries=("keda-operator", "keda-adapter"),
    # the operator watches ScaledJobs and (Cluster)CloudEventSources too and exits when their CRDs are missing
    data=("config/crd/bases/keda.sh_scaledjobs.yaml", "config/crd/bases/eventing.keda.sh_*.yaml"),
    deploys_as="keda",
    upstream_release="kedacore/keda v2.20.2 (68a5b502): the operator and the metrics server of the chart",
)
E2E_LWS = BinaryPin(
    name="lws",
    module="sigs.k8s.io/lws",
    version="v0.9.0",
    packages=("sigs.k8s.io/lws/cmd",),
    binaries=("lws-controller",),
    data=("config/webhook/manifests.yaml", "config/webhook/*-patch.yaml"),
    deploys_as="lws",
    skew="the Go module proxy refuses sigs.k8s.io/lws v0.10.0 (403); v0.9.0 is the newest it serves",
    upstream_release="kubernetes-sigs/lws v0.9.0 (f056f611, 2026-06-17)",
)
E2E_BINARIES: Mapping[str, BinaryPin] = {
    p.name: p for p in (E2E_ETCD, E2E_KUBERNETES, E2E_KWOK, E2E_KARPENTER, E2E_KEDA, E2E_LWS)
}
"""Every binary ``make e2e`` builds, in build order (the control plane first)."""

E2E_PULUMI = BinaryPin(
    name="pulumi",
    module="github.com/pulumi/pulumi/pkg/v3",
    version="v3.274.1",
    packages=("github.com/pulumi/pulumi/pkg/v3/cmd/pulumi",),
    binaries=("pulumi",),
    # what the release build (pulumi/pulumi scripts/ and .goreleaser.yml at v3.274.1) sets: the Automation API reads
    # `pulumi version` and refuses a CLI older than its minimum, and an unset Version reads as 0.0.0
    ldflags=("-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v3.274.1",),
    deploys_as=None,
    skew="the pip SDK is pulumi 3.272.0; the CLI is the newest pkg/v3 the Go module proxy serves (the engine accepts "
         "older SDKs of the same major)",
    upstream_release="pulumi/pulumi v3.274.1: the engine and `pulumi login --local`'s file backend",
)
E2E_PULUMI_KUBERNETES = BinaryPin(
    name="pulumi-kubernetes",
    module="github.com/pulumi/pulumi-kubernetes/provider/v4",
    version="v4.0.0-20260115033456-f47bc2d6f199",
    packages=("github.com/pulumi/pulumi-kubernetes/provider/v4/cmd/pulumi-resource-kubernetes",),
    binaries=("pulumi-resource-kubernetes",),
    # the release build's ldflag and go:generate step (provider Makefile and cmd/pulumi-resource-kubernetes/
    # generate.go at f47bc2d6): the version reported is the pseudo-version's own, as no release tag names this commit
    ldflags=("-X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=4.0.0-20260115033456-f47bc2d6f199",),
    generated_json=(
        ("cmd/pulumi-resource-kubernetes/schema-embed.json", "cmd/pulumi-resource-kubernetes/schema.json",
         "4.0.0-20260115033456-f47bc2d6f199"),
        ("cmd/pulumi-resource-kubernetes/terraform-mapping-embed.json",
         "cmd/pulumi-resource-kubernetes/terraform-mapping.json", None),
    ),
    deploys_as=None,
    skew="the Go module proxy serves only this pseudo-version of provider/v4 (about v4.25.0, 2026-01-15); the pip "
         "pulumi-kubernetes SDK is 4.34.2, so resources the SDK knows and this provider does not would be refused",
    upstream_release="pulumi/pulumi-kubernetes f47bc2d6 (2026-01-15): the provider the Kubernetes SDK's resources run on",
)
E2E_PULUMI_BINARIES: Mapping[str, BinaryPin] = {p.name: p for p in (E2E_PULUMI, E2E_PULUMI_KUBERNETES)}
"""What ``make e2e-pulumi`` builds beside the control plane: the engine and the one provider its programs use."""
