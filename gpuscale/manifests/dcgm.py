"""Values of NVIDIA's ``dcgm-exporter`` chart: GPU health (XID, ECC, remapped rows) from every GPU node, for alerts.

Health, never scaling: these are device counters. The duty cycle (``DCGM_FI_DEV_GPU_UTIL``) and framebuffer use are
exported for dashboards only; the spec and the policy pack keep refusing them (and any non-vLLM name) as an
autoscaler input (``gpuscale.spec.model``, ``gpuscale.policy.rules``).

Every key set here exists in ``deployment/values.yaml`` of NVIDIA/dcgm-exporter at tag 4.5.3-4.8.2 (chart 4.8.2,
``versions.DCGM_EXPORTER``); ``tests/components/test_dcgm_exporter.py`` checks them, with their types, against a digest
of that file (``tests/components/data/dcgm-exporter-4.8.2-values.json``: key paths, overridden defaults, documented
counters).
"""

from __future__ import annotations

from typing import Any, Literal

from gpuscale import labels
from gpuscale.spec.base import Spec

CounterType = Literal["gauge", "counter"]


class DcgmCounter(Spec):
    """One line of the exporter's metrics CSV (``DCGM FIELD, Prometheus metric type, help message``)."""

    field: str
    """DCGM field name; the exporter publishes it under the same name."""
    type: CounterType
    help: str


def _c(field: str, type_: CounterType, help_: str) -> DcgmCounter:
    return DcgmCounter(field=field, type=type_, help=help_)


HEALTH_COUNTERS: tuple[DcgmCounter, ...] = (
    # the chart's default list (deployment/templates/metrics-configmap.yaml at 4.5.3-4.8.2) less the DCP profiling
    # fields, which need SYS_ADMIN (values.yaml securityContext note), plus the ECC and retired-page counters it
    # leaves commented out: an uncorrectable ECC error is the health signal the alerts need most
    _c("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    _c("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    _c("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    _c("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    _c("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    _c("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."),
    _c("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
    _c("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    _c("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    _c("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    _c("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    _c("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    _c("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors."),
    _c("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors."),
    _c("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "counter", "Total number of single-bit persistent ECC errors."),
    _c("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "counter", "Total number of double-bit persistent ECC errors."),
    _c("DCGM_FI_DEV_RETIRED_SBE", "counter", "Total number of retired pages due to single-bit errors."),
    _c("DCGM_FI_DEV_RETIRED_DBE", "counter", "Total number of retired pages due to double-bit errors."),
    _c("DCGM_FI_DEV_RETIRED_PENDING", "counter", "Total number of pages pending retirement."),
    _c("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "counter", "Total number of NVLink flow-control CRC errors."),
    _c("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "counter", "Total number of NVLink data CRC errors."),
    _c("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for uncorrectable errors"),
    _c("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors"),
    _c("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed"),
)
"""What the exporter publishes on gpuscale's GPU nodes (its ``customMetrics``: the complete list, not additive)."""

XID_METRIC = "DCGM_FI_DEV_XID_ERRORS"
"""The last XID error a GPU raised (a gauge; 0 while none has)."""
ECC_UNCORRECTABLE_METRIC = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
"""Double-bit (uncorrectable) ECC errors since the driver loaded."""
METRICS_PORT = 9400
"""The chart's ``service.port`` (and the exporter's listen address ``:9400``)."""


def metrics_csv(counters: tuple[DcgmCounter, ...] = HEALTH_COUNTERS) -> str:
    """The CSV the exporter reads (``-f /etc/dcgm-exporter/default-counters.csv``, the chart's ConfigMap)."""
    return "".join(f"{c.field}, {c.type}, {c.help}\n" for c in counters)


def dcgm_exporter_values(*, servicemonitor: bool) -> dict[str, Any]:
    """The chart's values: on every GPU node, past the GPU taint, without the profiling capability.

    ``servicemonitor``: the chart's ServiceMonitor needs prometheus-operator's CRD, so only with the stack gpuscale
    installs (its Prometheus selects every ServiceMonitor, ``autoscaling.prometheus_stack_values``).
    """
    return {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": labels.GPU_PRESENT_LABEL, "operator": "In", "values": ["true"]},
                ]}]}
            }
        },
        # the chart's only default toleration is the control plane's; gpuscale GPU nodes carry nvidia.com/gpu
        "tolerations": [{"key": labels.GPU_TAINT_KEY, "operator": "Exists", "effect": labels.GPU_TAINT_EFFECT}],
        "priorityClassName": "system-node-critical",
        # root (to read the kubelet's pod-resources socket, which maps GPUs to pods) but with no capability: the
        # default adds SYS_ADMIN only for the DCP profiling fields, which HEALTH_COUNTERS leaves out. Helm merges
        # maps key by key, so the default's ``add`` must be emptied, not left out
        "securityContext": {
            "runAsNonRoot": False, "runAsUser": 0, "allowPrivilegeEscalation": False,
            "capabilities": {"add": [], "drop": ["ALL"]},
        },
        "customMetrics": metrics_csv(),
        "serviceMonitor": {"enabled": servicemonitor},
    }
