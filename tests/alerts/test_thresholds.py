"""Each alert's numbers equal their source in the spec or the sizing, and appear in the rule as emitted.

The sources are read here independently of the builders (the SLO, sizing's fields, ``gpu_bounds``), so a builder that
types a number, or reads the wrong field, fails."""

from __future__ import annotations

import re

import pytest

from gpuscale import sizing as sizing_mod
from gpuscale.alerts import front_door_alerts
from gpuscale.alerts.prometheus_rule import model_groups, platform_groups
from gpuscale.alerts.rule import AlertRule
from gpuscale.feasibility import checked_sizing
from gpuscale.manifests import autoscaling
from gpuscale.signals import vllm_metrics
from gpuscale.sizing import PlatformSizing
from gpuscale.spec.base import duration_seconds
from gpuscale.spec.platform import PlatformSpec
from tests.conftest import STACKS


def alerts(spec: PlatformSpec) -> dict[str, AlertRule]:
    sizing = checked_sizing(spec)
    groups = platform_groups(spec, sizing) + [g for m in spec.models for g in model_groups(spec, sizing, m.name)]
    return {r.alert: r for g in groups for r in g.rules}


@pytest.fixture(params=STACKS)
def stack(request: pytest.FixtureRequest, stack_specs: dict[str, PlatformSpec]) -> tuple[PlatformSpec, PlatformSizing, dict[str, AlertRule]]:
    """Each shipped stack's spec, its sizing and its alerts by name."""
    spec = stack_specs[request.param]
    return spec, checked_sizing(spec), alerts(spec)


def only(rules: dict[str, AlertRule], *parts: str) -> list[AlertRule]:
    return [r for name, r in rules.items() if all(p in name for p in parts)]


@pytest.mark.parametrize("stack", STACKS)
def test_latency_burn_reads_the_slo(stack_specs: dict[str, PlatformSpec], stack: str) -> None:
    spec = stack_specs[stack]
    rules = alerts(spec)
    for model in spec.models:
        burns = [r for r in rules.values() if r.labels.get("model") == model.name and ("SloFastBurn" in r.alert or "SloSlowBurn" in r.alert)]
        assert len(burns) == 2 * 2  # TTFT and ITL, each a page and a ticket (on the roles that observe them)
        for r in burns:
            ttft = "Ttft" in r.alert
            target = model.slo.ttft_p99_s if ttft else model.slo.itl_p99_s
            assert r.thresholds[f"slo.{'ttft_p99_s' if ttft else 'itl_p99_s'}"] == target
            assert r.thresholds["slo.goodput_target"] == model.slo.goodput_target
            # the good bucket: the largest vLLM bound at or under the target, as the client writes it
            buckets = vllm_metrics.TTFT_BUCKETS_S if ttft else vllm_metrics.ITL_BUCKETS_S
            bound = max(b for b in buckets if b <= target)
            assert set(re.findall(r'[{,]le="([^"]+)"', r.expr)) == {repr(float(bound))}
            budget = 1 - model.slo.goodput_target
            rates = (14.4, 6.0) if "Fast" in r.alert else (1.0,)
            assert {float(x) for x in re.findall(r"\) > ([0-9.e+-]+)", r.expr)} == {round(k * budget, 6) for k in rates}


def test_role_alerts_read_the_sizing(stack: tuple[PlatformSpec, PlatformSizing, dict[str, AlertRule]]) -> None:
    spec, sizing, rules = stack
    for model in spec.models:
        ms = sizing.model(model.name)
        for role in model.serving.roles:
            rs = ms.role(role)
            mine = [r for r in rules.values() if r.labels.get("model") == model.name and r.labels.get("role") == role]
            (kv,) = [r for r in mine if r.alert.endswith("KvCacheSaturated")]
            assert kv.expr.endswith(f"> {sizing_mod.KV_TARGET_UTILISATION:g}")
            assert kv.for_s == -(-ms.cold_start.total_s // 1)
            (cold,) = [r for r in mine if r.alert.endswith("ColdStartSlow")]
            assert cold.expr.endswith(f") > {ms.cold_start.total_s:.6g}")
            assert cold.thresholds == {"cold_start.total_s": ms.cold_start.total_s}
            pinned = [r for r in mine if r.alert.endswith("ReplicasPinnedAtMax")]
            if rs.max_replicas > rs.min_replicas:
                assert pinned[0].expr.endswith(f">= {rs.max_replicas}")
                assert pinned[0].for_s == max(rs.scale_down_stabilization_s, 60)
            else:
                assert pinned == []
            failing = [r for r in mine if r.alert.endswith("AutoscalerInputFailing")]
            if model.autoscaling.backend == "keda":
                assert failing[0].expr.endswith(f"> {autoscaling.FALLBACK_FAILURE_THRESHOLD}")
                (nan,) = [r for r in mine if r.alert.endswith("AutoscalerInputNaN")]
                assert nan.for_s == autoscaling.FALLBACK_FAILURE_THRESHOLD * rs.polling_interval_s
            else:  # the HPA's ScalingActive condition, held for as many syncs as KEDA's failureThreshold polls
                assert failing[0].for_s == autoscaling.FALLBACK_FAILURE_THRESHOLD * 15  # the HPA sync period's default
                (stale,) = [r for r in mine if r.alert.endswith("AutoscalerInputStale")]
                assert stale.for_s == max((autoscaling.FALLBACK_FAILURE_THRESHOLD + 1) * 15,
                                          4 * spec.observability.scrape_interval_s)
                (nan,) = [r for r in mine if r.alert.endswith("AutoscalerInputNaN")]
                for sig in rs.signals:  # every metric the HPA reads is checked
                    assert sig.metric in nan.expr and sig.metric in stale.expr


def test_front_door_alerts_read_the_door_sizing(stack: tuple[PlatformSpec, PlatformSizing, dict[str, AlertRule]]) -> None:
    spec, sizing, rules = stack
    for model in spec.models:
        door = sizing.model(model.name).front_door
        near = only(rules, "FrontDoorNearQueueBound")
        mine = [r for r in near if r.labels["model"] == model.name]
        if door is None:
            assert mine == []
            continue
        assert mine[0].expr.endswith(f"> {front_door_alerts.HELD_SHARE * door.queue_bound:.6g}")
        assert mine[0].for_s == door.retry_after_s
        (held,) = [r for r in only(rules, "FrontDoorHeldPastHoldLimit") if r.labels["model"] == model.name]
        assert f"[{door.hold_limit_s + door.poll_s}s]" in held.expr
        assert held.thresholds["front_door.hold_limit_s"] == door.hold_limit_s


@pytest.mark.parametrize("stack", STACKS)
def test_platform_alerts_read_the_bounds_sizing_uses(stack_specs: dict[str, PlatformSpec], stack: str) -> None:
    spec = stack_specs[stack]
    rules = alerts(spec)
    bounds = sizing_mod.gpu_bounds(spec)
    pools = [r for r in rules.values() if r.alert.endswith("AtGpuLimit") and r.alert.startswith("GpuPool")]
    assert len(pools) == sum(b.kind == "pool_gpu_limit" for b in bounds)
    for pool in spec.topology.gpu_pools:
        (r,) = [r for r in pools if r.labels["nodepool"] == pool.name]
        smallest = min(it.gpus_per_node for it in pool.instances)
        assert r.expr.endswith(f"> {pool.gpu_limit - smallest:g}")
        assert r.thresholds["topology.gpu_pools.gpu_limit"] == pool.gpu_limit
        drain = [r for r in rules.values() if r.alert.endswith("NodeDrainingPastDriftWindow") and r.labels["nodepool"] == pool.name]
        if pool.drift_window is None:
            assert drain == []
        else:
            assert drain[0].for_s == duration_seconds(pool.drift_window.duration)
    queues = [r for r in rules.values() if r.alert.startswith("Queue")]
    assert len(queues) == sum(b.kind != "pool_gpu_limit" for b in bounds)
    for b in (b for b in bounds if b.kind != "pool_gpu_limit"):
        (r,) = [r for r in queues if r.labels["queue"] == b.name and ("Quota" in r.alert) == (b.kind == "gpu_quota")]
        assert f'queue_name="{b.name}"}} >= {b.gpus:g} ' in r.expr
        for model, role in b.roles:
            assert f"{model}-{role}" in r.expr  # its pending pods are the ones counted
