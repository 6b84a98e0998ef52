"""The real KEDA operator, metrics server and HPA controller over the emitted ScaledObjects (``e2e.scaling`` says
what is changed in them: the Prometheus address and the cooldown/stabilisation windows, nothing else).

Two roles: the dev stack's ``llama-8b/aggregated`` (minimum 0, a front door) and the prod stack's
``llama-70b-fp8/prefill`` (minimum 2). Each scenario asserts the Deployment's replicas over time; the promise, not
today's behaviour: the idle (no finished request, so every histogram mean is 0/0) and outage cases are expected to
fail on objects whose queries or fallback do not hold them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.acceptance import manifest_objects
from e2e.exporter import COUNTERS, HISTOGRAMS
from e2e.report import Timeline
from e2e.scaling import FAST_WINDOW_S, Role, scaled_object_status, watch
from gpuscale.manifests import front_door
from gpuscale.signals import vllm_metrics as vm

ROLES = {
    "zero-min": ("dev", "llama-8b", "aggregated"),
    "warm-min": ("prod", "llama-70b-fp8", "prefill"),
}
SCALE_DOWN_PERIOD_S = 60
"""The emitted scale-down policy: one pod per 60 s (``autoscaling.hpa_behavior``); not shortened."""
REACT_S = 150
"""Scrape (15 s) + 1 m rate window + KEDA polling + HPA sync: the longest a first reaction may take."""


@pytest.fixture
def role(request: pytest.FixtureRequest, harness: Any, synth_dir: Any) -> Iterator[Role]:
    stack, model, role_name = ROLES[request.param]
    prometheus = harness.ensure_prometheus()
    harness.ensure_keda()
    r = Role.from_synth(manifest_objects(synth_dir(stack)), model, role_name)
    r.point_at(prometheus.url)
    r.shorten_windows()
    r.remove(harness.kubectl)
    r.register(harness.exporter, prometheus)
    yield r
    if prometheus.child is None:
        prometheus.start()
    r.remove(harness.kubectl)


def busy(harness: Any, role: Role, waiting: float) -> None:
    """Traffic: ``waiting`` requests queued; requests finishing at 0.5/s (800-token prompts, 0.5 s in the queue),
    tokens flowing, a little KV in use: every query of the role has a finite value."""
    prompt = 800.0
    harness.exporter.update(
        role.pod_name(),
        gauges={vm.QUEUE: waiting, vm.RUNNING: 4.0, vm.KV_CACHE: 0.05},
        counter_rates={vm.PROMPT_TOKENS: 0.5 * prompt, vm.GENERATION_TOKENS: 20.0},
        observe={vm.REQUEST_PROMPT_TOKENS: (0.5, prompt), vm.QUEUE_TIME: (0.5, 0.5),
                 vm.INTER_TOKEN_LATENCY: (20.0, 0.02), vm.TIME_TO_FIRST_TOKEN: (0.5, 0.3)},
    )
    assert set(COUNTERS) >= {vm.PROMPT_TOKENS, vm.GENERATION_TOKENS}
    assert vm.QUEUE_TIME in HISTOGRAMS


def trigger_values(harness: Any, role: Role) -> dict[str, float | None]:
    """Each Prometheus trigger's query evaluated by the local Prometheus now (what KEDA's scaler reads)."""
    out: dict[str, float | None] = {}
    for t in role.spec["triggers"]:
        if t["type"] != "prometheus":
            continue
        result = harness.prometheus.query(t["metadata"]["query"])
        out[t["name"]] = float(result[0]["value"][1]) if result else None
    return out


def expected_replicas(role: Role, values: dict[str, float | None]) -> int:
    """What the HPA should settle on: the largest ``ceil(value / target)`` of the AverageValue triggers (the
    Value triggers divide by ready pods, of which there are none here), within the ScaledObject's bounds."""
    proposals = [math.ceil(v / float(role.trigger(name)["metadata"]["threshold"]))
                 for name, v in values.items()
                 if v is not None and math.isfinite(v) and role.trigger(name).get("metricType") == "AverageValue"]
    spec = role.spec
    return max(int(spec["minReplicaCount"]), 1, min(int(spec["maxReplicaCount"]), max(proposals, default=0)))


def drive_to(harness: Any, role: Role, target: int, timeline: Timeline) -> int:
    """Queue enough requests that the HPA's answer is ``target`` replicas; wait until the Deployment has them."""
    backlog = role.trigger("prompt-backlog")
    threshold = float(backlog["metadata"]["threshold"])
    busy(harness, role, 1.0)
    per_request = watch(lambda: _value(harness, backlog["metadata"]["query"]), Timeline(), "probe",
                        duration_s=REACT_S, until=lambda v: v > 0, interval_s=3)
    assert per_request > 0, "the prompt-backlog query never saw the queued request"
    busy(harness, role, (target - 0.5) * threshold / per_request)
    time.sleep(20)  # a scrape at the new value
    want = expected_replicas(role, trigger_values(harness, role))
    got = watch(lambda: role.replicas(harness.kubectl), timeline, "scale-up", duration_s=REACT_S,
                until=lambda n: n >= want)
    assert got == want, f"replicas {got}, the triggers' values call for {want}: {timeline.samples}"
    return got


def _value(harness: Any, query: str) -> float:
    result = harness.prometheus.query(query)
    return float(result[0]["value"][1]) if result else 0.0


def idle(harness: Any, role: Role) -> None:
    harness.exporter.idle(role.pod_name())


def start_at_min(harness: Any, role: Role, timeline: Timeline) -> int:
    busy(harness, role, 0.0)  # finite signals at zero load, so the starting state does not depend on the NaN case
    role.apply(harness.kubectl)
    low = int(role.spec["minReplicaCount"])
    return watch(lambda: role.replicas(harness.kubectl), timeline, "settle", duration_s=REACT_S,
                 until=lambda n: n == low)


def serving_one_above_min(harness: Any, role: Role, scenario: Any) -> tuple[Timeline, int, int]:
    """The role applied at its minimum, then driven to one replica above it (at least 2): the start of the idle and
    outage cases. Returns the timeline (recorded in the report), the minimum and the replicas reached."""
    timeline = Timeline()
    scenario.observed.update(role=f"{role.model}/{role.role}", changes=role.changes, replicas=timeline.samples)
    start_at_min(harness, role, timeline)
    low = int(role.spec["minReplicaCount"])
    high = drive_to(harness, role, max(low, 1) + 1, timeline)
    # from the minimum the idle case has nothing to show and a drop in the outage case is bounded by it
    assert high > low, f"the role never rose above its minimum {low}: {timeline.samples}"
    return timeline, low, high


@pytest.mark.parametrize("role", list(ROLES), indirect=True)
def test_keda_scales_up_when_the_queue_rises(role: Role, harness: Any, scenario: Any) -> None:
    timeline = Timeline()
    scenario.observed.update(role=f"{role.model}/{role.role}", changes=role.changes, replicas=timeline.samples)
    start = start_at_min(harness, role, timeline)
    assert start == int(role.spec["minReplicaCount"]), timeline.samples
    target = int(role.spec["minReplicaCount"]) + 2
    got = drive_to(harness, role, target, timeline)
    scenario.observed.update(target=target, reached=got, triggers=trigger_values(harness, role))
    assert got == target


@pytest.mark.parametrize("role", list(ROLES), indirect=True)
def test_keda_scales_down_when_traffic_stops(role: Role, harness: Any, scenario: Any) -> None:
    """No finished request: the histogram means are 0/0. The role must still return to its minimum."""
    timeline, low, high = serving_one_above_min(harness, role, scenario)
    idle(harness, role)
    time.sleep(20)
    scenario.observed["triggers_when_idle"] = trigger_values(harness, role)
    budget = REACT_S + FAST_WINDOW_S + SCALE_DOWN_PERIOD_S * (high - low) + 60
    got = watch(lambda: role.replicas(harness.kubectl), timeline, "idle", duration_s=budget,
                until=lambda n: n == low)
    scenario.observed["scaled_object"] = scaled_object_status(harness.kubectl, role)
    assert got == low, f"idle for {budget} s: replicas {got}, minimum {low}"


@pytest.mark.parametrize("role", list(ROLES), indirect=True)
def test_keda_holds_replicas_while_prometheus_is_unreachable(role: Role, harness: Any, scenario: Any) -> None:
    timeline, _, serving = serving_one_above_min(harness, role, scenario)
    harness.prometheus.stop()
    # as long as the idle case may take to act, and then some: a drop would show within it
    hold = FAST_WINDOW_S + SCALE_DOWN_PERIOD_S + 60
    watch(lambda: role.replicas(harness.kubectl), timeline, "outage", duration_s=hold)
    scenario.observed["scaled_object"] = scaled_object_status(harness.kubectl, role)
    harness.prometheus.start()
    during = timeline.values("outage")
    scenario.observed.update(serving=serving, min_during_outage=min(during))
    assert min(during) >= serving, f"replicas fell from {serving} to {min(during)} while Prometheus was down"


@pytest.mark.parametrize("role", ["zero-min"], indirect=True)
def test_keda_wakes_from_zero_on_the_front_door_queue(role: Role, harness: Any, scenario: Any) -> None:
    """At zero no vLLM pod exists, so no vLLM series does: only the door's queue can wake the model."""
    timeline = Timeline()
    scenario.observed.update(role=f"{role.model}/{role.role}", changes=role.changes, replicas=timeline.samples)
    harness.prometheus.targets = [t for t in harness.prometheus.targets if not t.path.startswith("/pods/")]
    harness.prometheus.reload()
    role.deployment["spec"]["replicas"] = 0
    role.changes.append("Deployment spec.replicas 0 (start at zero)")
    role.apply(harness.kubectl)
    assert watch(lambda: role.replicas(harness.kubectl), timeline, "at-zero", duration_s=30) == 0, timeline.samples
    door = front_door.epp_name(role.model)
    harness.exporter.doors[door].waiting = 1.0
    got = watch(lambda: role.replicas(harness.kubectl), timeline, "door-queue", duration_s=REACT_S,
                until=lambda n: n >= 1)
    scenario.observed["scaled_object"] = scaled_object_status(harness.kubectl, role)
    harness.exporter.doors[door].waiting = 0.0
    assert got >= 1, f"one request held at the door for {REACT_S} s did not wake {role.name}"
