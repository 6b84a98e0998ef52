"""DcgmExporter under Pulumi mocks: the pinned chart on every GPU node, values the chart knows, health not scaling."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from gpuscale import labels, versions
from gpuscale.components.dcgm_exporter import DcgmExporter, DcgmExporterArgs
from gpuscale.components.inference_platform import InferencePlatform, InferencePlatformArgs
from gpuscale.manifests import dcgm, karpenter
from gpuscale.spec.model import AutoscalingSpec
from gpuscale.spec.platform import PlatformSpec
from gpuscale.synth.mocks import RecordedResource

Run = Callable[..., list[RecordedResource]]
CHART = "kubernetes:helm.sh/v4:Chart"
CHART_VALUES = Path(__file__).parent / "data" / "dcgm-exporter-4.8.2-values.yaml"


def chart_defaults() -> dict[str, Any]:
    loaded = yaml.safe_load(CHART_VALUES.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def key_paths(values: dict[str, Any], prefix: str = "") -> set[str]:
    """Dotted paths of the leaves (and of the maps) a values dict sets; lists are leaves (Helm replaces them)."""
    out: set[str] = set()
    for key, value in values.items():
        path = f"{prefix}{key}"
        out.add(path)
        if isinstance(value, dict) and value:
            out |= key_paths(value, f"{path}.")
    return out


def test_the_pin_is_the_file_the_values_are_checked_against() -> None:
    assert versions.ALL_CHARTS["dcgm-exporter"] is versions.DCGM_EXPORTER
    assert f"chart {versions.DCGM_EXPORTER.version}" in CHART_VALUES.read_text(encoding="utf-8").splitlines()[0]


def test_every_value_gpuscale_sets_is_a_key_of_the_pinned_chart() -> None:
    defaults = chart_defaults()
    ours = dcgm.dcgm_exporter_values(servicemonitor=True)
    # customMetrics is documented (commented out) rather than set in values.yaml; the templates read it
    # (deployment/templates/metrics-configmap.yaml: `if .Values.customMetrics`)
    assert "# customMetrics: |" in CHART_VALUES.read_text(encoding="utf-8")
    settable = key_paths(defaults) | {"customMetrics"}
    unknown = {p for p in key_paths(ours) if p not in settable and not p.startswith("affinity.")}
    assert unknown == set(), f"not keys of dcgm-exporter {versions.DCGM_EXPORTER.version}: {sorted(unknown)}"
    assert defaults["affinity"] == {}  # a map the chart passes through whole (daemonset.yaml `toYaml .Values.affinity`)
    for path in key_paths(ours) - {"customMetrics"} - {p for p in key_paths(ours) if p.startswith("affinity")}:
        default, value = defaults, ours
        for part in path.split("."):
            default, value = default[part], value[part]
        assert type(value) is type(default), f"{path}: {type(value).__name__} where the chart has {default!r}"


def test_the_profiling_capability_is_removed_not_merged_back() -> None:
    defaults = chart_defaults()["securityContext"]
    assert defaults["capabilities"]["add"] == ["SYS_ADMIN"]  # what Helm's map merge would keep if we left "add" out
    ours = dcgm.dcgm_exporter_values(servicemonitor=False)["securityContext"]
    merged_caps = {**defaults["capabilities"], **ours["capabilities"]}
    assert merged_caps == {"add": [], "drop": ["ALL"]}
    assert ours["allowPrivilegeEscalation"] is False
    assert not any(c.field.startswith("DCGM_FI_PROF_") for c in dcgm.HEALTH_COUNTERS)  # the fields SYS_ADMIN is for


def chart_documented_counters() -> dict[str, str]:
    """``field -> type`` of every counter line the chart's values.yaml documents under customMetrics."""
    rows = re.findall(r"^\s*#\s*(DCGM_FI_[A-Z0-9_]+)\s*,\s*(gauge|counter)\s*,", CHART_VALUES.read_text(), re.M)
    return dict(rows)


def test_every_exported_counter_is_one_the_chart_documents_with_its_type() -> None:
    documented = chart_documented_counters()
    assert len(documented) > 40
    for counter in dcgm.HEALTH_COUNTERS:
        assert documented.get(counter.field) == counter.type, counter.field
    csv = dcgm.metrics_csv().splitlines()
    assert len(csv) == len(dcgm.HEALTH_COUNTERS) and csv[0].startswith("DCGM_FI_DEV_SM_CLOCK, gauge, ")
    fields = {c.field for c in dcgm.HEALTH_COUNTERS}
    assert {dcgm.XID_METRIC, dcgm.ECC_UNCORRECTABLE_METRIC} <= fields
    assert chart_defaults()["service"]["port"] == dcgm.METRICS_PORT


@pytest.mark.parametrize("field", [c.field for c in dcgm.HEALTH_COUNTERS])
def test_no_exported_counter_is_accepted_as_an_autoscaling_signal(field: str) -> None:
    with pytest.raises(ValidationError):
        AutoscalingSpec.model_validate({"metric": field})


def test_chart_is_pinned_and_lands_on_gpu_nodes_past_the_taint(run_pulumi: Run, prod_spec: PlatformSpec) -> None:
    args = DcgmExporterArgs.from_spec(prod_spec)
    assert args.servicemonitor is prod_spec.observability.install_prometheus_stack is True
    records = run_pulumi(lambda: DcgmExporter("dcgm", args))
    (chart,) = [r for r in records if r.type == CHART]
    (ns,) = [r for r in records if r.type == "kubernetes:core/v1:Namespace"]
    (component,) = [r for r in records if r.type == "gpuscale:index:DcgmExporter"]
    assert (chart.inputs["chart"], chart.inputs["version"]) == ("dcgm-exporter", "4.8.2")
    assert chart.inputs["repositoryOpts"] == {"repo": "https://nvidia.github.io/dcgm-exporter/helm-charts"}
    assert chart.inputs["namespace"] == ns.inputs["metadata"]["name"] == "dcgm-exporter"
    assert chart.parent_urn == ns.parent_urn == component.urn and ns.urn in chart.dependencies
    values = chart.inputs["values"]
    (term,) = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}]
    gpu_taint = karpenter.gpu_taint()
    assert values["tolerations"] == [{"key": gpu_taint["key"], "operator": "Exists", "effect": gpu_taint["effect"]}]
    for pool in prod_spec.topology.gpu_pools:  # every GPU pool's nodes carry the label the affinity requires
        assert karpenter.gpu_node_labels(pool)[labels.GPU_PRESENT_LABEL] == "true"
    assert values["serviceMonitor"] == {"enabled": True}
    assert values["customMetrics"] == dcgm.metrics_csv()


def test_no_servicemonitor_without_prometheus_operator(dev_spec: PlatformSpec) -> None:
    observability = dev_spec.observability.model_copy(update={"install_prometheus_stack": False})
    args = DcgmExporterArgs.from_spec(dev_spec.model_copy(update={"observability": observability}))
    assert dcgm.dcgm_exporter_values(servicemonitor=args.servicemonitor)["serviceMonitor"] == {"enabled": False}


def test_the_platform_installs_it_after_prometheus_operator(run_pulumi: Run, dev_spec: PlatformSpec) -> None:
    records = run_pulumi(lambda: InferencePlatform("gpuscale", InferencePlatformArgs(spec=dev_spec)))
    by_name = {r.name: r for r in records}
    exporter, platform = by_name["gpuscale-dcgm-exporter"], by_name["gpuscale"]
    assert exporter.type == "gpuscale:index:DcgmExporter" and exporter.parent_urn == platform.urn
    chart = by_name["gpuscale-dcgm-exporter-chart"]
    assert by_name["gpuscale-prometheus-chart"].urn in chart.dependencies
