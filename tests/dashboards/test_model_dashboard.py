"""Each dashboard panel reads exactly the query its trigger or its alert reads, and every threshold equals its source.

The sources are read here independently of the builder: the emitted autoscaler objects (``autoscaler_body``), the
emitted PrometheusRules (``rule_objects``), the spec's SLO and limits, and sizing's fields."""

from __future__ import annotations

from typing import Any

import pytest

from gpuscale import sizing as sizing_mod
from gpuscale.alerts.prometheus_rule import rule_objects
from gpuscale.dashboards.grafana import Panel
from gpuscale.dashboards.model_dashboard import model_dashboard
from gpuscale.feasibility import checked_sizing
from gpuscale.manifests import autoscaling, front_door
from gpuscale.manifests.vllm import workload_name
from gpuscale.signals.base import adapter_metric_name, quantity
from gpuscale.sizing import PlatformSizing, gpu_bounds
from gpuscale.spec.platform import PlatformSpec
from tests.conftest import STACKS


@pytest.fixture(params=STACKS)
def stack(request: pytest.FixtureRequest, stack_specs: dict[str, PlatformSpec]) -> tuple[PlatformSpec, PlatformSizing]:
    spec = stack_specs[request.param]
    return spec, checked_sizing(spec)


def role_of(panel: Panel) -> str:
    return panel.title.split(":", 1)[0]


def emitted_autoscaler(spec: PlatformSpec, sizing: PlatformSizing, model: str, role: str) -> dict[str, Any]:
    args = autoscaling.AutoscalerSettings.from_platform(spec, sizing, model, role)  # type: ignore[arg-type]
    return autoscaling.autoscaler_body(args)


def test_every_signal_panel_reads_its_triggers_query(stack: tuple[PlatformSpec, PlatformSizing]) -> None:
    spec, sizing = stack
    seen = 0
    for model in spec.models:
        board = model_dashboard(spec, sizing, model.name)
        for role in model.serving.roles:
            body = emitted_autoscaler(spec, sizing, model.name, role)
            panels = [p for p in board.graphs() if role_of(p) == role and p.queries[0].source.startswith("trigger:")]
            rs = sizing.model(model.name).role(role)
            assert len(panels) == len(rs.signals)  # one panel per signal the role scales on, none made up
            if body["kind"] == "ScaledObject":
                triggers = {t["name"]: t["metadata"] for t in body["spec"]["triggers"] if t["type"] == "prometheus"}
                for panel in panels:
                    name = panel.queries[0].source.rsplit("/", 1)[1]
                    assert panel.queries[0].source == f"trigger:{body['metadata']['name']}/{name}"
                    assert panel.queries[0].expr == triggers[name]["query"]
                    (target,) = panel.thresholds
                    assert f"{target.value:g}" == triggers[name]["threshold"]
                    seen += 1
            else:  # an HPA reads prometheus-adapter's per-pod metric of the same vLLM series
                metrics = [m_["pods"] for m_ in body["spec"]["metrics"]]
                for panel, sig, metric in zip(panels, rs.signals, metrics, strict=True):
                    assert panel.queries[0].expr == autoscaling.signal_query(sig, model.serving.namespace, model.name, role)
                    assert metric["metric"]["name"] == adapter_metric_name(sig.metric, sig.kind)
                    (target,) = panel.thresholds
                    assert quantity(target.value) == metric["target"]["averageValue"]
                    seen += 1
    assert seen


def test_the_door_panel_reads_the_wake_trigger(stack: tuple[PlatformSpec, PlatformSizing]) -> None:
    spec, sizing = stack
    for model in spec.models:
        door = sizing.model(model.name).front_door
        panels = [p for p in model_dashboard(spec, sizing, model.name).graphs() if p.title == "Requests held at the door"]
        if door is None:
            assert panels == []
            continue
        (panel,) = panels
        for role in model.serving.roles:
            body = emitted_autoscaler(spec, sizing, model.name, role)
            (wake,) = [t for t in body["spec"]["triggers"] if t["name"] == front_door.TRIGGER_NAME]
            assert panel.queries[0].expr == wake["metadata"]["query"]
        assert {t.field: t.value for t in panel.thresholds}["front_door.queue_bound"] == door.queue_bound


def test_panels_that_mirror_an_alert_read_its_query(stack: tuple[PlatformSpec, PlatformSizing]) -> None:
    spec, sizing = stack
    alerts = {r.alert: r for o in rule_objects(spec, sizing) for r in o.rules()}
    mirrored = 0
    for model in spec.models:
        for panel in model_dashboard(spec, sizing, model.name).graphs():
            for q in panel.queries:
                if not q.source.startswith("alert:"):
                    continue
                rule = alerts[q.source.removeprefix("alert:")]
                inner = q.expr.removeprefix("max(").removesuffix(")") if q.expr.startswith("max(") else q.expr
                assert inner in rule.expr, (panel.title, rule.alert)
                # the alert's threshold is drawn on the panel with the same value
                lines = {t.value for t in panel.thresholds}
                assert set(rule.thresholds.values()) & lines, (panel.title, rule.alert)
                mirrored += 1
    assert mirrored


def test_every_threshold_equals_its_spec_or_sizing_source(stack: tuple[PlatformSpec, PlatformSizing]) -> None:
    spec, sizing = stack
    pools = {p.name: p for p in spec.topology.gpu_pools}
    queues = {q.name: q for q, _ in spec.queues()}
    for model in spec.models:
        ms = sizing.model(model.name)
        bounds = [b for b in gpu_bounds(spec) if any(n == model.name for n, _ in b.roles)]
        for panel in model_dashboard(spec, sizing, model.name).graphs():
            role = role_of(panel)
            rs = ms.role(role) if role in model.serving.roles else None  # type: ignore[arg-type]
            for t in panel.thresholds:
                name = panel.title.split(" ")[2].rstrip(":") if panel.title.startswith(("Queue", "Node pool")) else ""
                pool_name = panel.title.split(" ")[2].rstrip(":") if panel.title.startswith("Node pool") else ""
                queue_name = panel.title.split(" ")[1].rstrip(":") if panel.title.startswith("Queue") else ""
                smallest = min(it.gpus_per_node for it in pools[pool_name].instances) if pool_name else 0
                want: dict[str, float] = {
                    "slo.ttft_p99_s": model.slo.ttft_p99_s,
                    "slo.itl_p99_s": model.slo.itl_p99_s,
                    "cold_start.total_s": ms.cold_start.total_s,
                    "sizing.KV_TARGET_UTILISATION": sizing_mod.KV_TARGET_UTILISATION,
                    "front_door.queue_bound": ms.front_door.queue_bound if ms.front_door else -1,
                    "front_door_alerts.HELD_SHARE x front_door.queue_bound":
                        0.8 * ms.front_door.queue_bound if ms.front_door else -1,
                }
                if rs is not None:
                    want |= {"role.max_replicas": rs.max_replicas, "role.min_replicas": rs.min_replicas}
                    want |= {f"signals[{s.trigger_name}].target": s.target for s in rs.signals}
                if pool_name:
                    want |= {"topology.gpu_pools.gpu_limit": pools[pool_name].gpu_limit,
                             "gpu_limit - instance.gpus_per_node": pools[pool_name].gpu_limit - smallest,
                             "gpu_limit // instance.gpus_per_node": pools[pool_name].gpu_limit // smallest}
                if queue_name:
                    q = queues[queue_name]
                    (b,) = [b for b in bounds if b.name == queue_name and b.kind != "pool_gpu_limit"]
                    want |= {"teams.gpu_quota": q.gpu_quota, "teams.gpu_limit": q.gpu_limit}
                    assert b.gpus == t.value
                assert t.field in want, f"{panel.title}: threshold {t.field} has no known source"
                assert t.value == pytest.approx(want[t.field]), (panel.title, t.field, name)


def test_the_page_covers_the_three_layers(stack: tuple[PlatformSpec, PlatformSizing]) -> None:
    spec, sizing = stack
    for model in spec.models:
        titles = [p.title for p in model_dashboard(spec, sizing, model.name).graphs()]
        for role in model.serving.roles:
            assert f"{role}: replicas" in titles
            assert f"{role}: KV cache use per replica" in titles
            assert f"{role}: pods not Ready, seconds since creation" in titles
        assert any(t.endswith("TTFT p99") for t in titles) and any(t.endswith("ITL p99") for t in titles)
        assert f"Node pool {model.node_pool}: GPUs" in titles
        assert f"Queue {model.queue}: GPUs allocated" in titles
        if sizing.model(model.name).front_door is not None:
            assert "Requests held at the door" in titles


def test_replicas_panel_reads_the_roles_hpa_and_pods(stack: tuple[PlatformSpec, PlatformSizing]) -> None:
    spec, sizing = stack
    for model in spec.models:
        for role in model.serving.roles:
            body = emitted_autoscaler(spec, sizing, model.name, role)
            hpa = (f"keda-hpa-{body['metadata']['name']}" if body["kind"] == "ScaledObject" else body["metadata"]["name"])
            (panel,) = [p for p in model_dashboard(spec, sizing, model.name).graphs() if p.title == f"{role}: replicas"]
            desired, ready = panel.queries
            assert f'horizontalpodautoscaler="{hpa}"' in desired.expr
            assert f'pod=~"{workload_name(model.name, role)}-.+"' in ready.expr
            for sig_panel in [p for p in model_dashboard(spec, sizing, model.name).graphs()
                              if role_of(p) == role and p.replicas]:
                assert f'horizontalpodautoscaler="{hpa}"' in sig_panel.replicas
