"""Each alert under Prometheus' own evaluator (``promtool test rules``): synthetic series it must fire on, and series
it must not fire on. Series are built from the same numbers the rule was (read from the spec and sizing here), so a
threshold moved in the builder without the source moving fails here."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuscale import sizing as sizing_mod
from gpuscale.alerts import burn_rate, front_door_alerts
from gpuscale.alerts import exporter_metrics as m
from gpuscale.alerts.prometheus_rule import model_groups, platform_groups
from gpuscale.alerts.rule import AlertRule
from gpuscale.feasibility import checked_sizing
from gpuscale.manifests import autoscaling
from gpuscale.signals import vllm_metrics
from gpuscale.sizing import PlatformSizing
from gpuscale.spec.platform import PlatformSpec
from tests.alerts.promtool import Case, promtool_test, requires_promtool

pytestmark = requires_promtool


@pytest.fixture(scope="module")
def dev(stack_specs: dict[str, PlatformSpec]) -> tuple[PlatformSpec, PlatformSizing]:
    spec = stack_specs["dev"]
    return spec, checked_sizing(spec)


@pytest.fixture(scope="module")
def prod(stack_specs: dict[str, PlatformSpec]) -> tuple[PlatformSpec, PlatformSizing]:
    spec = stack_specs["prod"]
    return spec, checked_sizing(spec)


def rule(groups: list[object], suffix: str) -> AlertRule:
    rules = [r for g in groups for r in g.rules if r.alert.endswith(suffix)]  # type: ignore[attr-defined]
    assert len(rules) == 1, [r.alert for r in rules]
    return rules[0]


def sel(ns: str, model: str, role: str) -> str:
    return f'namespace="{ns}",gpuscale_io_model="{model}",gpuscale_io_role="{role}"'


def passes(tmp_path: Path, r: AlertRule, cases: list[Case], interval: str = "15s") -> None:
    result = promtool_test(tmp_path, r, cases, interval)
    assert result.returncode == 0, result.stdout + result.stderr


def burn_cases(histogram: str, s: str, bound: float, bad: float, ok: float, minutes: int) -> list[Case]:
    """Requests at 100/min; ``bad`` (then ``ok``) of them above the good bucket, for ``minutes``."""
    le = burn_rate.le_value(bound)

    def series(bad_share: float) -> dict[str, str]:
        good = round(100 * (1 - bad_share))
        return {f"{histogram}_count{{{s}}}": f"0+100x{minutes}", f'{histogram}_bucket{{{s},le="{le}"}}': f"0+{good}x{minutes}"}

    return [Case("burning", series(bad), f"{minutes}m", True), Case("within budget", series(ok), f"{minutes}m", False)]


@pytest.mark.parametrize("stack,model,role,histogram", [
    ("dev", "llama-8b", "aggregated", vllm_metrics.TIME_TO_FIRST_TOKEN),
    ("dev", "llama-8b", "aggregated", vllm_metrics.INTER_TOKEN_LATENCY),
    ("prod", "llama-70b-fp8", "prefill", vllm_metrics.TIME_TO_FIRST_TOKEN),
    ("prod", "llama-70b-fp8", "decode", vllm_metrics.INTER_TOKEN_LATENCY),
])
def test_slo_burn_pages_on_a_fast_burn_and_tickets_a_slow_one(
    tmp_path: Path, stack_specs: dict[str, PlatformSpec], stack: str, model: str, role: str, histogram: str,
) -> None:
    spec = stack_specs[stack]
    sizing = checked_sizing(spec)
    mdl = next(x for x in spec.models if x.name == model)
    target = mdl.slo.ttft_p99_s if histogram == vllm_metrics.TIME_TO_FIRST_TOKEN else mdl.slo.itl_p99_s
    budget = 1 - mdl.slo.goodput_target
    bound, _ = burn_rate.good_bound(histogram, target)
    short = "Ttft" if histogram == vllm_metrics.TIME_TO_FIRST_TOKEN else "Itl"
    groups = model_groups(spec, sizing, model)
    s = sel(mdl.serving.namespace, model, role)
    # the page: every request bad fires (the 6 h pair reaches 6x the budget below 100% bad on every stack); just under
    # the lowest page rate does not, after 7 h (both page pairs see it)
    lowest_page = min(w.rate for w in burn_rate.PAGE) * budget
    assert lowest_page < 1
    (tmp_path / "page").mkdir()
    passes(tmp_path / "page", rule(groups, f"{short}SloFastBurn"),
           burn_cases(histogram, s, bound, bad=1.0, ok=0.9 * lowest_page, minutes=420), interval="1m")
    # the ticket: 1.5x the budget for 7 h fires; half of it does not
    (tmp_path / "ticket").mkdir()
    passes(tmp_path / "ticket", rule(groups, f"{short}SloSlowBurn"),
           burn_cases(histogram, s, bound, bad=1.5 * budget, ok=0.5 * budget, minutes=420), interval="1m")


def test_no_burn_alert_where_the_role_does_not_observe_the_latency(prod: tuple[PlatformSpec, PlatformSizing]) -> None:
    spec, sizing = prod
    names = {g.name: [r.alert for r in g.rules] for g in model_groups(spec, sizing, "llama-70b-fp8")}
    assert not any("Itl" in a for a in names["gpuscale.llama-70b-fp8.prefill"])
    assert not any("Ttft" in a for a in names["gpuscale.llama-70b-fp8.decode"])


def test_kv_saturated(tmp_path: Path, dev: tuple[PlatformSpec, PlatformSizing]) -> None:
    spec, sizing = dev
    r = rule(model_groups(spec, sizing, "llama-8b"), "KvCacheSaturated")
    s = sel("inference", "llama-8b", "aggregated")
    ceiling = sizing_mod.KV_TARGET_UTILISATION
    after = f"{r.for_s // 60 + 3}m"

    def two_pods(a: float, b: float) -> dict[str, str]:
        return {f'{vllm_metrics.KV_CACHE}{{{s},pod="p1"}}': f"{a}x100", f'{vllm_metrics.KV_CACHE}{{{s},pod="p2"}}': f"{b}x100"}

    passes(tmp_path, r, [
        Case("mean above the ceiling for a cold start", two_pods(ceiling + 0.15, ceiling + 0.05), after, True),
        Case("one pod above, the mean below", two_pods(ceiling + 0.15, ceiling - 0.25), after, False),
        Case("above, but not yet for a cold start", two_pods(ceiling + 0.15, ceiling + 0.05), f"{max(r.for_s - 60, 0)}s", False),
    ])


def test_cold_start_slower_than_sized(tmp_path: Path, dev: tuple[PlatformSpec, PlatformSizing]) -> None:
    spec, sizing = dev
    r = rule(model_groups(spec, sizing, "llama-8b"), "ColdStartSlow")
    cold = sizing.model("llama-8b").cold_start.total_s
    pod = {"namespace": "inference", "pod": "llama-8b-aggregated-5d8f-x2p"}
    pl = 'namespace="inference",pod="llama-8b-aggregated-5d8f-x2p"'
    eval_s = int(cold) + 120

    def pod_series(created: int, ready: int) -> dict[str, str]:
        return {f"{m.KSM_POD_CREATED}{{{pl}}}": f"{created}x100", f'{m.KSM_POD_READY}{{{pl},condition="true"}}': f"{ready}x100"}

    passes(tmp_path, r, [
        Case("not Ready past the sized cold start", pod_series(0, 0), f"{eval_s}s", True, pod),
        Case("Ready", pod_series(0, 1), f"{eval_s}s", False),
        Case("not Ready, younger than the cold start", pod_series(eval_s - int(cold) + 30, 0), f"{eval_s}s", False),
        Case("another model's pod", {f'{m.KSM_POD_CREATED}{{namespace="inference",pod="other-aggregated-1"}}': "0x100",
                                     f'{m.KSM_POD_READY}{{namespace="inference",pod="other-aggregated-1",condition="true"}}': "0x100"},
             f"{eval_s}s", False),
    ])


def test_autoscaler_input_failing(tmp_path: Path, dev: tuple[PlatformSpec, PlatformSizing]) -> None:
    spec, sizing = dev
    r = rule(model_groups(spec, sizing, "llama-8b"), "AutoscalerInputFailing")
    so = autoscaling.scaled_object_name("llama-8b", "aggregated")
    errors = f'{m.KEDA_SCALER_ERRORS}{{namespace="inference",scaledObject="{so}",scaler="prometheusScaler",triggerIndex="0",metric="s0-prometheus",type="scaledobject"}}'
    empty = f'{m.KEDA_EMPTY_UPSTREAM}{{namespace="inference",scaledResource="{so}",triggerName="decode-load"}}'
    passes(tmp_path, r, [
        Case("every poll fails", {errors: "0+2x20"}, "4m", True),
        Case("every poll answers empty (no error series at all)", {empty: "0+2x20"}, "4m", True),
        Case("one failed poll", {errors: "0x10 1x10"}, "4m", False),
        Case("another ScaledObject fails", {errors.replace(so, "other-aggregated"): "0+2x20"}, "4m", False),
    ])


def test_autoscaler_input_nan(tmp_path: Path, dev: tuple[PlatformSpec, PlatformSizing]) -> None:
    spec, sizing = dev
    r = rule(model_groups(spec, sizing, "llama-8b"), "AutoscalerInputNaN")
    so = autoscaling.scaled_object_name("llama-8b", "aggregated")
    labels = {"namespace": "inference", "scaledObject": so, "scaler": "prometheusScaler", "triggerIndex": "1",
              "metric": "s1-prometheus", "type": "scaledobject"}
    series = m.KEDA_METRIC_VALUE + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"
    passes(tmp_path, r, [
        Case("a trigger reads NaN", {series: " ".join(["NaN"] * 20)}, "3m", True, labels),
        Case("a trigger reads a number", {series: "3x20"}, "3m", False),
    ])


def test_replicas_pinned_at_max(tmp_path: Path, dev: tuple[PlatformSpec, PlatformSizing]) -> None:
    spec, sizing = dev
    r = rule(model_groups(spec, sizing, "llama-8b"), "ReplicasPinnedAtMax")
    top = sizing.model("llama-8b").role("aggregated").max_replicas
    hpa = {"namespace": "inference", "horizontalpodautoscaler": f"keda-hpa-{autoscaling.scaled_object_name('llama-8b', 'aggregated')}"}
    series = m.KSM_HPA_DESIRED + "{" + ",".join(f'{k}="{v}"' for k, v in hpa.items()) + "}"
    after = f"{r.for_s // 60 + 3}m"
    passes(tmp_path, r, [
        Case("at max_replicas past the scale-down window", {series: f"{top}x100"}, after, True, hpa),
        Case("one below max_replicas", {series: f"{top - 1}x100"}, after, False),
    ])


def test_front_door_near_its_queue_bound(tmp_path: Path, dev: tuple[PlatformSpec, PlatformSizing]) -> None:
    spec, sizing = dev
    r = rule(model_groups(spec, sizing, "llama-8b"), "FrontDoorNearQueueBound")
    door = sizing.model("llama-8b").front_door
    assert door is not None
    q = f'{m.EPP_QUEUE_SIZE}{{namespace="inference",service="llama-8b-door-epp",fairness_id="a"}}'
    near = round(door.queue_bound * (front_door_alerts.HELD_SHARE + 0.05))
    after = f"{door.retry_after_s // 60 + 3}m"
    passes(tmp_path, r, [
        Case("held above the share for a wake", {q: f"{near}x100"}, after, True),
        Case("held below the share", {q: f"{round(door.queue_bound * (front_door_alerts.HELD_SHARE - 0.1))}x100"}, after, False),
    ])


def test_front_door_held_past_the_hold_limit(tmp_path: Path, dev: tuple[PlatformSpec, PlatformSizing]) -> None:
    spec, sizing = dev
    r = rule(model_groups(spec, sizing, "llama-8b"), "FrontDoorHeldPastHoldLimit")
    base = 'namespace="inference",service="llama-8b-door-epp",priority="0",inference_pool="llama-8b"'
    passes(tmp_path, r, [
        Case("a request evicted at its TTL", {f'{m.EPP_REQUESTS}{{{base},outcome="{m.EPP_OUTCOME_TTL}"}}': "0x10 1x20"}, "4m", True),
        Case("one refused at the bound", {f'{m.EPP_REQUESTS}{{{base},outcome="{m.EPP_OUTCOME_CAPACITY}"}}': "0x10 1x20"}, "4m", True),
        Case("every request dispatched", {f'{m.EPP_REQUESTS}{{{base},outcome="Dispatched"}}': "0+5x30"}, "4m", False),
    ])


def test_gpu_pool_at_its_limit(tmp_path: Path, dev: tuple[PlatformSpec, PlatformSizing]) -> None:
    spec, sizing = dev
    groups = platform_groups(spec, sizing)
    for pool in spec.topology.gpu_pools:
        r = rule(groups, f"GpuPool{''.join(p.capitalize() for p in pool.name.split('-'))}AtGpuLimit")
        smallest = min(it.gpus_per_node for it in pool.instances)
        labels = {"nodepool": pool.name, "resource_type": m.KARPENTER_GPU_RESOURCE_TYPE}
        series = m.KARPENTER_NODEPOOL_USAGE + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"
        after = f"{r.for_s // 60 + 3}m"
        (tmp_path / pool.name).mkdir()
        passes(tmp_path / pool.name, r, [
            Case("the next node would pass the limit", {series: f"{pool.gpu_limit - smallest + 1}x100"}, after, True, labels),
            Case("room for one more node", {series: f"{pool.gpu_limit - smallest}x100"}, after, False),
            Case("the CPU resource at the same number", {series.replace(m.KARPENTER_GPU_RESOURCE_TYPE, "cpu"): f"{pool.gpu_limit}x100"}, after, False),
        ])


def test_queue_at_quota_with_pending_pods(tmp_path: Path, dev: tuple[PlatformSpec, PlatformSizing]) -> None:
    spec, sizing = dev
    bound = next(b for b in sizing_mod.gpu_bounds(spec) if b.kind == "gpu_quota")
    r = rule(platform_groups(spec, sizing), f"Queue{bound.name.capitalize()}AtGpuQuotaWithPendingPods")
    kai = {"queue_name": bound.name, "queue_metadata_name": bound.name, "queue_display_name": ""}
    allocated = m.KAI_QUEUE_ALLOCATED_GPUS + "{" + ",".join(f'{k}="{v}"' for k, v in kai.items()) + "}"
    model, role = bound.roles[0]
    pending = f'{m.KSM_POD_PHASE}{{namespace="inference",pod="{model}-{role}-7c9-abc",phase="Pending"}}'
    after = f"{r.for_s // 60 + 3}m"
    passes(tmp_path, r, [
        Case("at quota, a replica Pending", {allocated: f"{bound.gpus:g}x100", pending: "1x100"}, after, True,
             {"queue_name": bound.name, "queue_metadata_name": bound.name}),
        Case("at quota, nothing Pending", {allocated: f"{bound.gpus:g}x100", pending: "0x100"}, after, False),
        Case("below quota, a replica Pending", {allocated: f"{bound.gpus - 1:g}x100", pending: "1x100"}, after, False),
    ])


def test_node_draining_past_the_drift_window(tmp_path: Path, dev: tuple[PlatformSpec, PlatformSizing]) -> None:
    spec, sizing = dev
    pool = next(p for p in spec.topology.gpu_pools if p.drift_window is not None)
    r = rule(platform_groups(spec, sizing), f"GpuPool{''.join(p.capitalize() for p in pool.name.split('-'))}NodeDrainingPastDriftWindow")
    taint = f'{m.KSM_NODE_TAINT}{{node="ip-10-0-1-7",key="{m.KARPENTER_DISRUPTED_TAINT}",effect="NoSchedule"}}'
    node = f'{m.KARPENTER_NODE_ALLOCATABLE}{{node_name="ip-10-0-1-7",nodepool="{pool.name}",resource_type="{m.KARPENTER_GPU_RESOURCE_TYPE}"}}'
    minutes = r.for_s // 60 + 10
    after = f"{minutes - 2}m"
    passes(tmp_path, r, [
        Case("tainted longer than the window", {taint: f"1x{minutes}", node: f"1x{minutes}"}, after, True, {"node": "ip-10-0-1-7"}),
        Case("tainted, but within the window", {taint: f"1x{minutes}", node: f"1x{minutes}"}, f"{r.for_s // 60 - 5}m", False),
        Case("a node of another pool", {taint: f"1x{minutes}", node.replace(pool.name, "cpu"): f"1x{minutes}"}, after, False),
    ], interval="1m")


def test_gpu_xid_and_ecc(tmp_path: Path, dev: tuple[PlatformSpec, PlatformSizing]) -> None:
    spec, sizing = dev
    groups = platform_groups(spec, sizing)
    gpu = {"gpu": "0", "UUID": "GPU-1", "Hostname": "ip-10-0-1-7", "pod": "llama-8b-aggregated-1", "namespace": "inference"}
    lab = ",".join(f'{k}="{v}"' for k, v in gpu.items())
    (tmp_path / "xid").mkdir()
    passes(tmp_path / "xid", rule(groups, "GpuXidError"), [
        Case("XID 79 (fallen off the bus)", {f"{m.DCGM_XID}{{{lab}}}": "0x5 79x10"}, "2m", True, gpu),
        Case("no XID", {f"{m.DCGM_XID}{{{lab}}}": "0x20"}, "2m", False),
    ])
    (tmp_path / "ecc").mkdir()
    passes(tmp_path / "ecc", rule(groups, "GpuUncorrectableEccError"), [
        Case("a new double-bit error", {f"{m.DCGM_ECC_UNCORRECTABLE}{{{lab}}}": "0x5 1x10"}, "2m", True, gpu),
        Case("old errors only", {f"{m.DCGM_ECC_UNCORRECTABLE}{{{lab}}}": "3x60"}, "14m", False),
    ])


# ---------------------------------------------------------------- backend hpa (prometheus-adapter): staging's llama-70b


@pytest.fixture(scope="module")
def staging(stack_specs: dict[str, PlatformSpec]) -> tuple[PlatformSpec, PlatformSizing]:
    spec = stack_specs["staging"]
    assert {mdl.autoscaling.backend for mdl in spec.models} == {"hpa"}
    return spec, checked_sizing(spec)


HPA_POD = "llama-70b-aggregated-7c9d-q4z"


def test_hpa_input_failing(tmp_path: Path, staging: tuple[PlatformSpec, PlatformSizing]) -> None:
    spec, sizing = staging
    r = rule(model_groups(spec, sizing, "llama-70b"), "AutoscalerInputFailing")
    hpa = 'namespace="inference",horizontalpodautoscaler="llama-70b-aggregated"'

    def condition(false: str, true: str) -> dict[str, str]:
        return {f'{m.KSM_HPA_CONDITION}{{{hpa},condition="ScalingActive",status="false"}}': false,
                f'{m.KSM_HPA_CONDITION}{{{hpa},condition="ScalingActive",status="true"}}': true}

    syncs = r.for_s // 15  # samples every 15 s
    passes(tmp_path, r, [
        Case("ScalingActive False for longer than the failure threshold", condition("1x40", "0x40"), "3m", True,
             {"horizontalpodautoscaler": "llama-70b-aggregated", "condition": "ScalingActive", "status": "false"}),
        Case("ScalingActive True", condition("0x40", "1x40"), "3m", False),
        Case("False for fewer syncs than the threshold", condition(f"0x{40 - syncs + 1} 1x{syncs - 2}", "0x40"), "10m", False),
        Case("another HPA", {k.replace("llama-70b-aggregated", "other"): v for k, v in condition("1x40", "0x40").items()},
             "3m", False),
    ])


def test_hpa_input_nan_which_the_adapter_would_serve_as_zero(tmp_path: Path, staging: tuple[PlatformSpec, PlatformSizing]) -> None:
    spec, sizing = staging
    r = rule(model_groups(spec, sizing, "llama-70b"), "AutoscalerInputNaN")
    s = sel("inference", "llama-70b", "aggregated") + f',pod="{HPA_POD}"'
    labels = {"namespace": "inference", "gpuscale_io_model": "llama-70b", "gpuscale_io_role": "aggregated", "pod": HPA_POD}
    kv = f"{vllm_metrics.KV_CACHE}{{{s}}}"
    passes(tmp_path, r, [
        Case("the KV gauge reads NaN", {kv: " ".join(["NaN"] * 20)}, "4m", True, labels),
        Case("the KV gauge reads a number", {kv: "0.4x20"}, "4m", False),
        Case("NaN for one scrape only", {kv: "0.4x10 NaN 0.4x9"}, "4m", False),
        Case("another model's gauge reads NaN", {kv.replace("llama-70b", "other"): " ".join(["NaN"] * 20)}, "4m", False),
    ])


def test_hpa_input_stale_a_ready_pod_without_series(tmp_path: Path, staging: tuple[PlatformSpec, PlatformSizing]) -> None:
    spec, sizing = staging
    r = rule(model_groups(spec, sizing, "llama-70b"), "AutoscalerInputStale")
    rs = sizing.model("llama-70b").role("aggregated")
    ready = f'{m.KSM_POD_READY}{{namespace="inference",pod="{HPA_POD}",condition="true"}}'
    s = sel("inference", "llama-70b", "aggregated") + f',pod="{HPA_POD}"'
    every = {f"{sig.metric}{{{s}}}": "1+1x40" for sig in rs.signals}
    missing_one = dict(list(every.items())[1:])
    passes(tmp_path, r, [
        Case("Ready, every metric scraped", {ready: "1x40", **every}, "5m", False),
        Case("Ready, one metric the HPA reads missing", {ready: "1x40", **missing_one}, "5m", True,
             {"namespace": "inference", "pod": HPA_POD, "condition": "true"}),
        Case("Ready, no series at all", {ready: "1x40"}, "5m", True,
             {"namespace": "inference", "pod": HPA_POD, "condition": "true"}),
        Case("not Ready yet (loading), no series", {ready: "0x40"}, "5m", False),
        Case("Ready only just now, not yet scraped", {ready: "0x16 1x24"}, "5m", False),
    ])


def test_custom_metrics_api_unavailable(tmp_path: Path, staging: tuple[PlatformSpec, PlatformSizing],
                                        dev: tuple[PlatformSpec, PlatformSizing]) -> None:
    spec, sizing = staging
    r = rule(platform_groups(spec, sizing), "CustomMetricsApiUnavailable")
    api = f'{m.AGGREGATOR_UNAVAILABLE}{{name="{m.CUSTOM_METRICS_APISERVICE}",instance="10.0.0.1:443"}}'
    passes(tmp_path, r, [
        Case("marked unavailable", {api: "1x40"}, "3m", True),
        Case("available", {api: "0x40"}, "3m", False),
        Case("another APIService unavailable", {api.replace("custom", "external"): "1x40"}, "3m", False),
    ])
    assert [x for g in platform_groups(*dev) for x in g.rules if x.alert == "CustomMetricsApiUnavailable"] == []
