"""Bounds that upstream validators put on values gpuscale emits: one table, each bound named with its source.

A value past one of these is refused by the controller that reads it (the API server refuses the object, Envoy its
bootstrap, KEDA its ScaledObject), after ``gpuscale validate`` said the stack was fine. Builders cap or refuse with
these constants; ``tests/test_upstream_bounds.py`` synthesizes stacks at the extremes of the spec's ranges and checks
every emitted field listed in ``EMITTED`` against its bound.

Sources are read at the pinned tags (``gpuscale.versions``) unless a note says otherwise; ``docs/upstream-readings.md``
records how each was read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Bound:
    """An inclusive numeric range (seconds, or characters of a name) an upstream validator enforces."""

    name: str
    low: int
    high: int
    source: str

    def problem(self, value: float) -> str | None:
        """Why ``value`` is refused upstream, or ``None``."""
        if self.low <= value <= self.high:
            return None
        return f"{value:g} is outside {self.name} [{self.low}, {self.high}] ({self.source})"


@dataclass(frozen=True)
class PatternBound:
    """A pattern an upstream CRD validates a string field with (``+kubebuilder:validation:Pattern``)."""

    name: str
    pattern: str
    source: str

    def problem(self, value: str) -> str | None:
        if re.fullmatch(self.pattern, value):
            return None
        return f"{value!r} does not match {self.name} {self.pattern} ({self.source})"


# ------------------------------------------------------------------------------------------ Envoy (v1.33.2)

ENVOY_EXT_PROC_MESSAGE_TIMEOUT_S = Bound(
    "Envoy ext_proc message_timeout", 0, 3600,
    "envoyproxy/envoy api/envoy/extensions/filters/http/ext_proc/v3/ext_proc.proto: message_timeout and "
    "max_message_timeout [(validate.rules).duration = {lte {seconds: 3600} gte {}}], added in PR #27260 (2023-05) "
    "and unchanged through v1.33.2 (go-control-plane's mirror ext_proc.pb.validate.go: 'value must be inside range "
    "[0s, 1h0m0s]')",
)
PROTOBUF_DURATION_S = Bound(
    "protobuf Duration", 0, 315_576_000_000,
    "protocolbuffers/protobuf src/google/protobuf/duration.proto: seconds within +-315,576,000,000 (10,000 years); "
    "Envoy's durations below are non-negative",
)

# ------------------------------------------------------------------------------------------ Kubernetes

HPA_STABILIZATION_WINDOW_S = Bound(
    "HPA behavior stabilizationWindowSeconds", 0, 3600,
    "kubernetes/kubernetes pkg/apis/autoscaling/validation/validation.go MaxStabilizationWindowSeconds = 3600",
)
HPA_POLICY_PERIOD_S = Bound(
    "HPA behavior policy periodSeconds", 1, 1800,
    "kubernetes/kubernetes pkg/apis/autoscaling/validation/validation.go MaxPeriodSeconds = 1800 (and > 0)",
)
INT32_S = Bound(
    "an int32 field", 0, 2**31 - 1,
    "the CRD's format: int32 (KEDA v2.20.2 apis/keda/v1alpha1/scaledobject_types.go PollingInterval, "
    "CooldownPeriod, InitialCooldownPeriod *int32)",
)
INT64_S = Bound(
    "an int64 field", 0, 2**63 - 1,
    "k8s.io/api core/v1 types.go TerminationGracePeriodSeconds *int64",
)
LABEL_VALUE_CHARS = Bound(
    "a label value", 0, 63, "k8s.io/apimachinery pkg/util/validation/validation.go LabelValueMaxLength = 63",
)
LABEL_NAME_CHARS = Bound(
    "a label key's name part", 1, 63, "k8s.io/apimachinery pkg/util/validation/validation.go qualifiedNameMaxLength = 63",
)
DNS1123_LABEL_CHARS = Bound(
    "a DNS-1123/1035 label (Service, Namespace names)", 1, 63,
    "k8s.io/apimachinery pkg/util/validation/validation.go DNS1123LabelMaxLength / DNS1035LabelMaxLength = 63",
)
DNS1123_SUBDOMAIN_CHARS = Bound(
    "a DNS-1123 subdomain (most object names)", 1, 253,
    "k8s.io/apimachinery pkg/util/validation/validation.go DNS1123SubdomainMaxLength = 253",
)
KEDA_HPA_NAME_PREFIX = "keda-hpa-"
"""What KEDA v2.20.2 puts before a ScaledObject's name to name the HPA it creates."""
KEDA_SCALED_OBJECT_NAME_CHARS = Bound(
    "a ScaledObject name", 1, DNS1123_LABEL_CHARS.high - len(KEDA_HPA_NAME_PREFIX),
    "KEDA v2.20.2 names the HPA it creates keda-hpa-<name>, a DNS label of at most 63 characters "
    "(gpuscale.manifests.autoscaling.KEDA_NAME_LIMIT)",
)
HELM_RELEASE_NAME_CHARS = Bound(
    "a Helm release name", 1, 53, "helm/helm pkg/chartutil/validate_name.go maxReleaseNameLen = 53",
)

# ------------------------------------------------------------------------------------------ Karpenter (v1.14.1)

KARPENTER_NILLABLE_DURATION = PatternBound(
    "Karpenter consolidateAfter/expireAfter", r"(([0-9]+(s|m|h))+|Never)",
    "kubernetes-sigs/karpenter v1.14.1 pkg/apis/v1/nodepool.go ConsolidateAfter and ExpireAfter "
    "+kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`",
)
KARPENTER_BUDGET_DURATION = PatternBound(
    "Karpenter budget duration", r"((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)",
    "kubernetes-sigs/karpenter v1.14.1 pkg/apis/v1/nodepool.go Budget.Duration "
    "+kubebuilder:validation:Pattern=`^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$`",
)
KARPENTER_TERMINATION_GRACE_PERIOD = PatternBound(
    "Karpenter terminationGracePeriod", r"([0-9]+(s|m|h))+",
    "kubernetes-sigs/karpenter v1.14.1 pkg/apis/v1/nodepool.go TerminationGracePeriod "
    "+kubebuilder:validation:Pattern=`^([0-9]+(s|m|h))+$`",
)


# ------------------------------------------------------------------------------------------ where they apply

EMITTED: tuple[tuple[str, str, Bound | PatternBound], ...] = (
    # (kind, field path with [] for every list item, bound); ``*`` is any object kind
    ("ScaledObject", "spec.pollingInterval", INT32_S),
    ("ScaledObject", "spec.cooldownPeriod", INT32_S),
    ("ScaledObject", "spec.initialCooldownPeriod", INT32_S),
    ("ScaledObject", "spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleDown.stabilizationWindowSeconds",
     HPA_STABILIZATION_WINDOW_S),
    ("ScaledObject", "spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleUp.stabilizationWindowSeconds",
     HPA_STABILIZATION_WINDOW_S),
    ("ScaledObject", "spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleDown.policies[].periodSeconds",
     HPA_POLICY_PERIOD_S),
    ("ScaledObject", "spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleUp.policies[].periodSeconds",
     HPA_POLICY_PERIOD_S),
    ("HorizontalPodAutoscaler", "spec.behavior.scaleDown.stabilizationWindowSeconds", HPA_STABILIZATION_WINDOW_S),
    ("HorizontalPodAutoscaler", "spec.behavior.scaleUp.stabilizationWindowSeconds", HPA_STABILIZATION_WINDOW_S),
    ("HorizontalPodAutoscaler", "spec.behavior.scaleDown.policies[].periodSeconds", HPA_POLICY_PERIOD_S),
    ("HorizontalPodAutoscaler", "spec.behavior.scaleUp.policies[].periodSeconds", HPA_POLICY_PERIOD_S),
    ("NodePool", "spec.disruption.consolidateAfter", KARPENTER_NILLABLE_DURATION),
    ("NodePool", "spec.template.spec.expireAfter", KARPENTER_NILLABLE_DURATION),
    ("NodePool", "spec.template.spec.terminationGracePeriod", KARPENTER_TERMINATION_GRACE_PERIOD),
    ("NodePool", "spec.disruption.budgets[].duration", KARPENTER_BUDGET_DURATION),
    ("Deployment", "spec.template.spec.terminationGracePeriodSeconds", INT64_S),
    ("LeaderWorkerSet", "spec.leaderWorkerTemplate.workerTemplate.spec.terminationGracePeriodSeconds", INT64_S),
    ("LeaderWorkerSet", "spec.leaderWorkerTemplate.leaderTemplate.spec.terminationGracePeriodSeconds", INT64_S),
    ("Service", "metadata.name", DNS1123_LABEL_CHARS),
    ("Namespace", "metadata.name", DNS1123_LABEL_CHARS),
    ("ScaledObject", "metadata.name", KEDA_SCALED_OBJECT_NAME_CHARS),
    ("*", "metadata.name", DNS1123_SUBDOMAIN_CHARS),
)
"""Every emitted Kubernetes field an upstream validator bounds (labels: ``LABEL_NAME_CHARS``/``LABEL_VALUE_CHARS`` on
every ``labels`` map, checked separately; Envoy's durations inside the front door's bootstrap:
``ENVOY_EXT_PROC_MESSAGE_TIMEOUT_S``, ``PROTOBUF_DURATION_S``)."""
