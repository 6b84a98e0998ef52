"""DcgmExporter under Pulumi mocks: the pinned chart on every GPU node, values the chart knows, health not scaling."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
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
CHART_VALUES = Path(__file__).parent / "data" / "dcgm-exporter-4.8.2-values.json"
"""What the pinned chart's values.yaml holds (its key paths and their types, the defaults gpuscale overrides, the
counters it documents), read at NVIDIA/dcgm-exporter tag 4.5.3-4.8.2."""


def chart() -> dict[str, Any]:
    loaded = json.loads(CHART_VALUES.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def key_paths(values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted path -> value of every key a values dict sets (maps and their keys; lists are leaves: Helm replaces
    them)."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        path = f"{prefix}{key}"
        out[path] = value
        if isinstance(value, dict) and value:
            out |= key_paths(value, f"{path}.")
    return out


YAML_TYPES = {"dict": dict, "list": list, "str": str, "bool": bool, "int": int}


def test_the_pin_is_the_chart_the_values_are_checked_against() -> None:
    assert versions.ALL_CHARTS["dcgm-exporter"] is versions.DCGM_EXPORTER
    assert f"chart {versions.DCGM_EXPORTER.version} = versions.DCGM_EXPORTER" in chart()["source"]


def test_every_value_gpuscale_sets_is_a_key_of_the_pinned_chart_with_its_type() -> None:
    keys = chart()["keys"]
    ours = key_paths(dcgm.dcgm_exporter_values(servicemonitor=True))
    # customMetrics is documented (commented out) rather than set in values.yaml; the chart's metrics-configmap.yaml
    # reads it (`if .Values.customMetrics`); affinity is a map the chart passes through whole (`toYaml .Values.affinity`)
    assert chart()["custom_metrics_documented"] and keys["affinity"] == "dict"
    checked = {p: v for p, v in ours.items() if p != "customMetrics" and not p.startswith("affinity.")}
    unknown = sorted(p for p in checked if p not in keys)
    assert unknown == [], f"not keys of dcgm-exporter {versions.DCGM_EXPORTER.version}: {unknown}"
    for path, value in checked.items():
        assert isinstance(value, YAML_TYPES[keys[path]]), f"{path}: {value!r} where the chart has a {keys[path]}"


def test_the_profiling_capability_is_removed_not_merged_back() -> None:
    defaults = chart()["defaults"]["securityContext"]
    assert defaults["capabilities"]["add"] == ["SYS_ADMIN"]  # what Helm's map merge would keep if we left "add" out
    ours = dcgm.dcgm_exporter_values(servicemonitor=False)["securityContext"]
    merged_caps = {**defaults["capabilities"], **ours["capabilities"]}
    assert merged_caps == {"add": [], "drop": ["ALL"]}
    assert ours["allowPrivilegeEscalation"] is False
    assert not any(c.field.startswith("DCGM_FI_PROF_") for c in dcgm.HEALTH_COUNTERS)  # the fields SYS_ADMIN is for


def test_the_chart_defaults_would_not_land_on_gpuscale_gpu_nodes() -> None:
    defaults = chart()["defaults"]
    assert defaults["affinity"] == {}
    assert [t["key"] for t in defaults["tolerations"]] == ["node-role.kubernetes.io/control-plane"]
    assert labels.GPU_TAINT_KEY in {t["key"] for t in dcgm.dcgm_exporter_values(servicemonitor=True)["tolerations"]}


def test_every_exported_counter_is_one_the_chart_documents_with_its_type() -> None:
    documented = chart()["documented_counters"]
    assert len(documented) > 40
    for counter in dcgm.HEALTH_COUNTERS:
        assert documented.get(counter.field) == counter.type, counter.field
    csv = dcgm.metrics_csv().splitlines()
    assert len(csv) == len(dcgm.HEALTH_COUNTERS) and csv[0].startswith("DCGM_FI_DEV_SM_CLOCK, gauge, ")
    fields = {c.field for c in dcgm.HEALTH_COUNTERS}
    assert {dcgm.XID_METRIC, dcgm.ECC_UNCORRECTABLE_METRIC} <= fields
    assert chart()["defaults"]["service.port"] == dcgm.METRICS_PORT


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
