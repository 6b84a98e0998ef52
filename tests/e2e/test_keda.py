"""The real KEDA operator, metrics server and HPA controller over the emitted ScaledObjects (``e2e.scaling`` says
what is changed in them: the Prometheus address, the cooldown/stabilisation windows, and, to have Ready pods, the
role's NodePool on kwok and the default scheduler; nothing else).

Two roles: the dev stack's ``llama-8b/aggregated`` (minimum 0, a front door) and the prod stack's
``llama-70b-fp8/prefill`` (minimum 2), both served on nodes Karpenter's kwok provider launches, so their pods are
Running and Ready as on a serving cluster (KEDA's fallback and the HPA's ``Value`` metrics count Ready pods). Each
scenario asserts the Deployment's replicas over time; the promise, not today's behaviour: the idle case (no
finished request, so every histogram mean is 0/0) is expected to fail on objects whose queries turn that into an
error (``GPUSCALE_E2E_SYNTH_DIR`` runs the scenarios on another commit's ``gpuscale synth --out``).

The scenarios run side by side, each in a lane of its own (``e2e.lanes``: its namespace, NodePool and Prometheus;
``Role.isolate``): each body below is a plain function, run in its lane's thread; its test, marked ``runs(body)``,
waits for the lane and gives its verdict.
"""

from __future__ import annotations

import datetime
import functools
import math
import time
from collections.abc import Callable
from typing import Any

import pytest

from e2e.exporter import COUNTERS, HISTOGRAMS
from e2e.lanes import Lane, Lanes
from e2e.report import Timeline
from e2e.scaling import FAST_WINDOW_S, Role, scaled_object_status, watch
from gpuscale.signals import promql
from gpuscale.signals import vllm_metrics as vm
from tests.e2e.conftest import scenario_name

ROLES = {
    "zero-min": ("dev", "llama-8b", "aggregated", True),
    "warm-min": ("prod", "llama-70b-fp8", "prefill", True),
    "zero-min-no-node": ("dev", "llama-8b", "aggregated", False),
}
"""stack, model, role, and whether the role is served on kwok nodes (else its pods stay Pending)."""
SCALE_DOWN_PERIOD_S = 60
"""The emitted scale-down policy: one pod per 60 s (``autoscaling.hpa_behavior``); not shortened."""
REACT_S = 150
"""Scrape (15 s) + 1 m rate window + KEDA polling + HPA sync: the longest a first reaction may take."""
SERVE_S = 240
"""Karpenter's batching, the kwok launch and registration, scheduling and kwok's Ready stage on a loaded machine."""
WINDOWS_EMPTY_S = 150
"""The 1 m windows of the finished-request histograms emptying: 60 s + a 15 s scrape + Prometheus' lookback slack."""


def lane_role(harness: Any, synth_dir: Any, lane: Lane, key: str) -> Role:
    """The role ``key`` names (``ROLES``) as emitted, in ``lane``: its own namespace, NodePool and Prometheus, with
    ``e2e.scaling``'s changes (the address, the windows, the nodes); registered with the lane's Prometheus."""
    stack, model, role_name, on_nodes = ROLES[key]
    r = Role.from_synth_dir(synth_dir(stack), model, role_name)
    r.isolate(lane.key)
    r.point_at(lane.prometheus.url)
    r.shorten_windows()
    if on_nodes:
        harness.ensure_karpenter(r.zones)
        r.on_kwok_nodes()
    else:
        r.default_scheduled()
    r.register(lane.exporter, lane.prometheus)
    return r


def runs(body: Callable[[Role, Any, Any], None]) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Mark a test as the verdict of ``body`` run in a lane (``lanes`` starts every selected one at once)."""
    def mark(test: Callable[..., None]) -> Callable[..., None]:
        test.lane_body = body  # type: ignore[attr-defined]
        return test
    return mark


def start_lanes(session: pytest.Session, harness: Any, synth_dir: Any) -> Lanes:
    """Every selected KEDA scenario of this module started side by side, each in its lane (``e2e.lanes``): the
    ``keda_lanes`` fixture (conftest) calls this once, before the Karpenter scenarios, which run meanwhile."""
    exporter = harness.ensure_exporter()
    harness.ensure_keda()
    runner = Lanes(harness.supervisor, harness.work, harness.kubectl, exporter, harness.dump)
    planned = []
    for item in session.items:
        body = getattr(getattr(item, "function", None), "lane_body", None)
        if body is None or getattr(getattr(item, "module", None), "__name__", None) != __name__:
            continue
        lane = runner.lane(scenario_name(item.name))
        planned.append((lane, body, lane_role(harness, synth_dir, lane, item.callspec.params["role"])))
    for lane, body, r in planned:
        runner.run(lane, functools.partial(body, r, lane, lane), functools.partial(r.remove, harness.kubectl,
                                                                                  wait_nodes=False))
    return runner


def test_keda_scenarios_start_in_their_lanes(keda_lanes: Lanes) -> None:
    """Run right after acceptance (conftest orders it so: acceptance must not see KEDA act on its objects), so the
    KEDA scenarios' timers run while the Karpenter scenarios do; each scenario's own test below gives its verdict."""
    assert keda_lanes.lanes, "no KEDA scenario selected"
    assert all(lane.prometheus.child is not None or lane.done.is_set() for lane in keda_lanes.lanes.values())


test_keda_scenarios_start_in_their_lanes.starts_lanes = True  # type: ignore[attr-defined]


def verdict(lanes: Lanes, scenario: Any) -> None:
    """The scenario's lane's outcome (what it observed, and its error if it failed)."""
    lanes.join(scenario.name, scenario.observed)


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


def _answer(harness: Any, query: str) -> float | None:
    """The query's value now (None: an empty result)."""
    result = harness.prometheus.query(query)
    return float(result[0]["value"][1]) if result else None


def trigger_values(harness: Any, role: Role) -> dict[str, float | None]:
    """Each Prometheus trigger's query evaluated by the local Prometheus now (what KEDA's scaler reads)."""
    return {t["name"]: _answer(harness, t["metadata"]["query"]) for t in role.spec["triggers"]
            if t["type"] == "prometheus"}


def expected_replicas(role: Role, values: dict[str, float | None], current: int, ready: int) -> int:
    """What the HPA should settle on: the largest proposal over the triggers, ``ceil(value / target)`` for an
    ``AverageValue`` one and ``ceil(value / target x ready pods)`` for a ``Value`` one (``replica_calculator.go``
    ``GetExternalPerPodMetricReplicas`` / ``GetExternalMetricReplicas``), within the ScaledObject's bounds."""
    proposals = []
    for name, v in values.items():
        if v is None or not math.isfinite(v):
            continue
        target = float(role.trigger(name)["metadata"]["threshold"])
        per_pod = role.trigger(name).get("metricType", "AverageValue") == "AverageValue"
        proposals.append(math.ceil(v / target - 1e-9) if per_pod or current == 0 else math.ceil(v / target * ready - 1e-9))
    spec = role.spec
    return max(int(spec["minReplicaCount"]), 1, min(int(spec["maxReplicaCount"]), max(proposals, default=0)))


def prompt_size_observed(harness: Any, role: Role) -> bool:
    """Whether Prometheus has the prompt-size histogram's 5 m rate: until it has, the backlog's per-request cost
    uses the query's stand-in mean (``or on() vector(<p50>)``: 800 or 1500 tokens), not the exporter's 800."""
    series = promql.Series(f"{vm.REQUEST_PROMPT_TOKENS}_count", (("pod", "=", role.pod_name()),), "5m")
    return (_answer(harness, series.render()) or 0.0) > 0


def drive_to(harness: Any, role: Role, target: int, timeline: Timeline) -> int:
    """Queue enough requests that the HPA's answer is ``target`` replicas; wait until the Deployment has them.

    The per-request value of the ``prompt-backlog`` query is probed with one request queued once the prompt-size
    mean is in Prometheus (the failed 2-not-4 run took it while the query still used its 1500-token stand-in, so
    the backlog it set read 1.84, not 3.5, once the observed 800-token mean replaced it)."""
    backlog = role.trigger("prompt-backlog")
    threshold = float(backlog["metadata"]["threshold"])
    busy(harness, role, 1.0)
    deadline = time.monotonic() + REACT_S
    while not prompt_size_observed(harness, role) and time.monotonic() < deadline:
        time.sleep(3)
    assert prompt_size_observed(harness, role), "Prometheus never saw the prompt-size histogram's rate"
    time.sleep(20)  # a scrape with the queued request after the mean is known
    per_request = _answer(harness, backlog["metadata"]["query"]) or 0.0
    assert per_request > 0, "the prompt-backlog query never saw the queued request"
    busy(harness, role, (target - 0.5) * threshold / per_request)
    time.sleep(20)  # a scrape at the new value
    values = trigger_values(harness, role)
    current = role.replicas(harness.kubectl)
    want = expected_replicas(role, values, current, role.ready(harness.kubectl))
    got = watch(lambda: role.replicas(harness.kubectl), timeline, "scale-up", duration_s=REACT_S,
                until=lambda n: n >= want)
    assert got == want, f"replicas {got}, the triggers' values {values} call for {want}: {timeline.samples}"
    return got


def floor(role: Role) -> int:
    """The HPA's lower bound: ``minReplicaCount``, at least 1 (``scaledobject_types.go`` L303-309)."""
    return max(int(role.spec["minReplicaCount"]), 1)


def start_at_floor(harness: Any, role: Role, timeline: Timeline) -> int:
    """Apply the role with finite signals at zero queue, and wait until it sits at its floor with every pod Ready
    (when served on nodes)."""
    busy(harness, role, 0.0)  # finite signals at zero load, so the starting state does not depend on the NaN case
    # a scrape of the empty queue before the ScaledObject exists: the last sample of an earlier scenario's queue
    # would otherwise be the new HPA's first answer (scale-up has no stabilisation window)
    backlog = role.trigger("prompt-backlog")["metadata"]["query"]
    deadline = time.monotonic() + REACT_S
    while (_answer(harness, backlog) or 0.0) > 0 and time.monotonic() < deadline:
        time.sleep(3)
    assert (_answer(harness, backlog) or 0.0) == 0, "Prometheus still holds an earlier scenario's queue"
    role.apply(harness.kubectl)
    low = floor(role)
    got = watch(lambda: role.replicas(harness.kubectl), timeline, "settle", duration_s=REACT_S,
                until=lambda n: n == low)
    if role.node_pool is not None:
        wait_ready(harness, role, low, timeline)
    return got


def wait_ready(harness: Any, role: Role, replicas: int, timeline: Timeline) -> None:
    ready = watch(lambda: role.ready(harness.kubectl), timeline, "ready", duration_s=SERVE_S,
                  until=lambda n: n >= replicas, interval_s=3)
    assert ready >= replicas, f"{ready} of {replicas} pods Ready on kwok nodes after {SERVE_S} s"


def serving_one_above_min(harness: Any, role: Role, scenario: Any) -> tuple[Timeline, int, int]:
    """The role applied at its floor, then driven to one replica above it, every pod Ready: the start of the idle
    and outage cases. Returns the timeline (recorded in the report), the minimum and the replicas reached."""
    timeline = Timeline()
    scenario.observed.update(role=f"{role.model}/{role.role}", changes=role.changes, replicas=timeline.samples)
    start_at_floor(harness, role, timeline)
    low = int(role.spec["minReplicaCount"])
    high = drive_to(harness, role, floor(role) + 1, timeline)
    # from the minimum the idle case has nothing to show and a drop in the outage case is bounded by it
    assert high > low, f"the role never rose above its minimum {low}: {timeline.samples}"
    wait_ready(harness, role, high, timeline)
    scenario.observed["ready_when_serving"] = role.ready(harness.kubectl)
    return timeline, low, high


def windows_state(harness: Any, role: Role) -> dict[str, Any]:
    """Per guard histogram: its finished-request rate and its bare mean (``sum / count``), as Prometheus answers."""
    out: dict[str, Any] = {}
    for total, count in role.guard_windows():
        rate = _answer(harness, count.render())
        mean = _answer(harness, (total / count).render())
        out[count.metric.removesuffix("_count")] = {"finished_per_s": rate, "mean": mean}
    return out


def windows_empty(state: dict[str, Any]) -> bool:
    """No request finished inside any guard's window: each rate is 0 and each bare mean 0/0 (NaN) or absent."""
    return bool(state) and all(w["finished_per_s"] in (None, 0.0) and (w["mean"] is None or math.isnan(w["mean"]))
                               for w in state.values())


def scales_up_when_the_queue_rises(role: Role, harness: Any, scenario: Any) -> None:
    """From the floor (the minimum, or 1 for a role that may scale to zero: the HPA's lower bound) to two above it
    on the queued prompts alone, with the emitted scale-up policy (100 % or 4 pods per 15 s)."""
    timeline = Timeline()
    scenario.observed.update(role=f"{role.model}/{role.role}", changes=role.changes, replicas=timeline.samples)
    start = start_at_floor(harness, role, timeline)
    assert start == floor(role), timeline.samples
    target = floor(role) + 2
    got = drive_to(harness, role, target, timeline)
    scenario.observed.update(target=target, reached=got, triggers=trigger_values(harness, role),
                             ready=role.ready(harness.kubectl))
    assert got == target


def scales_down_when_traffic_stops(role: Role, harness: Any, scenario: Any) -> None:
    """No finished request: the histogram means are 0/0. Held until Prometheus says so (each guard's 1 m window
    empty, its bare mean NaN) with the role still above its minimum; then it must return to its minimum."""
    timeline, low, _ = serving_one_above_min(harness, role, scenario)
    harness.exporter.idle(role.pod_name())
    stopped = wait_windows_empty(harness, role, scenario)
    at_empty = role.replicas(harness.kubectl)
    scenario.observed["replicas_when_empty"] = at_empty
    # below this the case is vacuous: the role would have reached its minimum before any mean was 0/0
    assert at_empty > low, f"at {low} (its minimum) before the windows emptied: {timeline.samples}"
    budget = FAST_WINDOW_S + SCALE_DOWN_PERIOD_S * (at_empty - low) + REACT_S
    got = watch(lambda: role.replicas(harness.kubectl), timeline, "idle", duration_s=budget,
                until=lambda n: n == low)
    scenario.observed["scaled_object"] = scaled_object_status(harness.kubectl, role)
    scenario.observed["idle_to_min_s"] = round(time.monotonic() - stopped, 1)
    assert got == low, f"idle for {budget} s after the windows emptied: replicas {got}, minimum {low}"


def holds_replicas_while_prometheus_is_unreachable(role: Role, harness: Any, scenario: Any) -> None:
    """Serving above its minimum with every pod Ready, then Prometheus gone: every trigger errors, and after
    ``failureThreshold`` failures the fallback (``currentReplicasIfHigher``) must hold the replicas."""
    timeline, _, serving = serving_one_above_min(harness, role, scenario)
    harness.prometheus.stop()
    # as long as the idle case may take to act, and then some: a drop would show within it
    hold = FAST_WINDOW_S + SCALE_DOWN_PERIOD_S + 60
    watch(lambda: role.replicas(harness.kubectl), timeline, "outage", duration_s=hold)
    scenario.observed["scaled_object"] = scaled_object_status(harness.kubectl, role)
    scenario.observed["ready_during_outage"] = role.ready(harness.kubectl)
    harness.prometheus.start()
    during = timeline.values("outage")
    scenario.observed.update(serving=serving, min_during_outage=min(during))
    fallback = [c for c in scenario.observed["scaled_object"]["conditions"] if c["type"] == "Fallback"]
    assert min(during) >= serving, f"replicas fell from {serving} to {min(during)} while Prometheus was down"
    assert fallback and fallback[0]["status"] == "True", f"KEDA's fallback never engaged: {fallback}"


def wait_windows_empty(harness: Any, role: Role, scenario: Any) -> float:
    """After ``exporter.idle``: wait until every guard's 1 m window is empty (Prometheus' answer), record it, and
    return when the traffic stopped (``time.monotonic``)."""
    stopped = time.monotonic()
    state = windows_state(harness, role)
    deadline = stopped + WINDOWS_EMPTY_S
    while not windows_empty(state) and time.monotonic() < deadline:
        time.sleep(3)
        state = windows_state(harness, role)
    scenario.observed.update(windows_when_empty=state, windows_empty_after_s=round(time.monotonic() - stopped, 1),
                             triggers_when_empty=trigger_values(harness, role))
    assert windows_empty(state), f"the guards' windows still held finished requests {WINDOWS_EMPTY_S} s on: {state}"
    return stopped


def holds_replicas_when_prometheus_goes_down_as_the_cooldown_ends(role: Role, harness: Any, scenario: Any) -> None:
    """A role that may scale to zero, idle and inside its cooldown, loses Prometheus just before the poll at which
    its cooldown ends. Until more than ``failureThreshold`` failures no fallback applies (fallback.go L142-170), so
    at that poll every trigger is an error, none active, and only a non-zero ``fallback.replicas`` keeps
    ``RequestScale`` off ``scaleToZeroOrIdle`` (scale_scaledobjects.go L86-101, v2.20.2). The replicas it has then
    must be held through the outage.

    When: KEDA's scale loop polls every ``pollingInterval`` (a timer per loop, ``scale_handler.go``
    ``startScaleLoop``) and ``lastActiveTime`` is the last active poll's time, stored to the second; the cooldown
    ends at the first poll later than ``lastActiveTime + cooldownPeriod``, which lies within a second after it
    (``cooldownPeriod`` a multiple of ``pollingInterval``, as emitted and as shortened). Prometheus goes
    ``outage_lead_s`` before then: half a poll, so the poll before still saw it and the one at the end is the
    first to fail, with at most one HPA read (every ``HPA_SYNC_PERIOD_S``) failing before it: two failures at most
    at the poll that decides, under the emitted ``failureThreshold`` of 3. (Going down a whole poll and more
    early, as this case first did, gave the HPA's reads and the loop time to pass the threshold: the fallback
    engaged before the cooldown ended and objects with ``fallback.replicas: 0`` passed too.)"""
    timeline, _, _ = serving_one_above_min(harness, role, scenario)
    harness.exporter.idle(role.pod_name())
    wait_windows_empty(harness, role, scenario)

    def inactive() -> bool:
        conditions = scaled_object_status(harness.kubectl, role)["conditions"]
        return any(c["type"] == "Active" and c["status"] == "False" for c in conditions)

    deadline = time.monotonic() + REACT_S
    while not inactive() and time.monotonic() < deadline:
        time.sleep(2)
    status = scaled_object_status(harness.kubectl, role)
    scenario.observed["scaled_object_idle"] = status
    assert inactive(), f"the idle role never went inactive (Active=False): {status}"
    last = datetime.datetime.fromisoformat(str(status["lastActiveTime"]).replace("Z", "+00:00"))
    cooldown, poll = int(role.spec["cooldownPeriod"]), int(role.spec["pollingInterval"])
    threshold = int(role.spec["fallback"]["failureThreshold"])
    assert cooldown % poll == 0, f"cooldownPeriod {cooldown} is not a multiple of pollingInterval {poll}"
    assert threshold >= 2, f"failureThreshold {threshold}: the fallback could engage at the deciding poll itself"
    lead = poll / 2
    down_at = last + datetime.timedelta(seconds=cooldown + 0.5 - lead)  # + 0.5: lastActiveTime is truncated
    scenario.observed.update(outage_lead_s=lead, failure_threshold=threshold, polling_interval_s=poll)
    wait = (down_at - datetime.datetime.now(datetime.UTC)).total_seconds()
    assert wait > 0, f"the cooldown ({cooldown} s from {last}) ended before the outage could start"
    watch(lambda: role.replicas(harness.kubectl), timeline, "cooling-down", duration_s=max(0.0, wait - 3))
    time.sleep(max(0.0, (down_at - datetime.datetime.now(datetime.UTC)).total_seconds()))  # on time, not a sample late
    at_outage = role.replicas(harness.kubectl)
    assert at_outage > 0, f"the role reached zero before its cooldown ended: {timeline.samples}"
    harness.prometheus.stop()
    went_down = datetime.datetime.now(datetime.UTC)
    hold = 2 * FAST_WINDOW_S
    watch(lambda: role.replicas(harness.kubectl), timeline, "outage", duration_s=hold)
    scenario.observed["scaled_object"] = scaled_object_status(harness.kubectl, role)
    harness.prometheus.start()
    during = timeline.values("outage")
    scenario.observed.update(at_outage=at_outage, min_during_outage=min(during), outage_s=hold,
                             down_before_cooldown_end_s=round((last + datetime.timedelta(seconds=cooldown)
                                                               - went_down).total_seconds(), 1))
    assert min(during) >= at_outage, f"replicas fell from {at_outage} to {min(during)} while Prometheus was down"


def wakes_from_zero_on_the_front_door_queue(role: Role, harness: Any, scenario: Any) -> None:
    """At zero no vLLM pod exists, so no vLLM series does: only the door's queue can wake the model. No NodePool is
    applied, so the woken GPU pod stays Pending, marked Unschedulable by kube-scheduler: the dump
    ``tests/doctor/test_e2e_dump.py`` runs ``gpuscale doctor`` on."""
    timeline = Timeline()
    scenario.observed.update(role=f"{role.model}/{role.role}", changes=role.changes, replicas=timeline.samples)
    harness.prometheus.targets = [t for t in harness.prometheus.targets if not t.path.startswith("/pods/")]
    harness.prometheus.reload()
    role.deployment["spec"]["replicas"] = 0
    role.changes.append("Deployment spec.replicas 0 (start at zero)")
    role.apply(harness.kubectl)
    assert watch(lambda: role.replicas(harness.kubectl), timeline, "at-zero", duration_s=30) == 0, timeline.samples
    door = role.door_key()
    harness.exporter.doors[door].waiting = 1.0
    got = watch(lambda: role.replicas(harness.kubectl), timeline, "door-queue", duration_s=REACT_S,
                until=lambda n: n >= 1)
    scenario.observed["scaled_object"] = scaled_object_status(harness.kubectl, role)
    harness.exporter.doors[door].waiting = 0.0
    assert got >= 1, f"one request held at the door for {REACT_S} s did not wake {role.name}"
    pending = watch(lambda: len(role.pods(harness.kubectl)), timeline, "pod-created", duration_s=60,
                    until=lambda n: n >= 1)
    assert pending >= 1, "the woken Deployment created no pod"

    def unschedulable() -> int:
        return sum(1 for p in role.pods(harness.kubectl) if any(
            c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
            for c in p.get("status", {}).get("conditions", [])))

    # kube-scheduler's verdict on the pod (PodScheduled=False/Unschedulable and its FailedScheduling event): what
    # gpuscale doctor reads from this scenario's dump
    marked = watch(unschedulable, timeline, "unschedulable", duration_s=60, until=lambda n: n >= 1)
    scenario.observed["pods"] = [{"name": p["metadata"]["name"], "phase": p.get("status", {}).get("phase"),
                                  "scheduler": p["spec"].get("schedulerName", "default-scheduler")}
                                 for p in role.pods(harness.kubectl)]
    assert marked >= 1, f"kube-scheduler never marked the woken pod Unschedulable: {scenario.observed['pods']}"


@runs(scales_up_when_the_queue_rises)
@pytest.mark.parametrize("role", ["zero-min", "warm-min"])
def test_keda_scales_up_when_the_queue_rises(role: str, keda_lanes: Lanes, scenario: Any) -> None:
    verdict(keda_lanes, scenario)


@runs(scales_down_when_traffic_stops)
@pytest.mark.parametrize("role", ["zero-min", "warm-min"])
def test_keda_scales_down_when_traffic_stops(role: str, keda_lanes: Lanes, scenario: Any) -> None:
    verdict(keda_lanes, scenario)


@runs(holds_replicas_while_prometheus_is_unreachable)
@pytest.mark.parametrize("role", ["zero-min", "warm-min"])
def test_keda_holds_replicas_while_prometheus_is_unreachable(role: str, keda_lanes: Lanes, scenario: Any) -> None:
    verdict(keda_lanes, scenario)


@runs(holds_replicas_when_prometheus_goes_down_as_the_cooldown_ends)
@pytest.mark.parametrize("role", ["zero-min"])
def test_keda_holds_replicas_when_prometheus_goes_down_as_the_cooldown_ends(role: str, keda_lanes: Lanes, scenario: Any) -> None:
    verdict(keda_lanes, scenario)


@runs(wakes_from_zero_on_the_front_door_queue)
@pytest.mark.parametrize("role", ["zero-min-no-node"])
def test_keda_wakes_from_zero_on_the_front_door_queue(role: str, keda_lanes: Lanes, scenario: Any) -> None:
    verdict(keda_lanes, scenario)
