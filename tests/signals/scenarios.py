"""The five situations every emitted ScaledObject must survive, as worlds for ``gpuscale.signals.keda_model``, each
with the promise the docs make (``docs/layer3-serving.md``, "Thresholds and bounds" and "Monitoring").

``check(body, case)`` returns the broken promises (empty: the ScaledObject keeps them). The worlds are built from the
role's sizing, so the load at "steady" is the workload's peak and the replicas it should hold are sizing's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from gpuscale.manifests import front_door
from gpuscale.manifests.autoscaling import AutoscalerSettings, autoscaler_body
from gpuscale.signals.keda_model import ScaledObjectModel, Step, World
from gpuscale.signals.promql import Matcher, Samples
from gpuscale.sim.policies import ObservedSeries, RoleObservation
from gpuscale.sizing import ModelSizing, PlatformSizing, RoleSizing, size_platform
from gpuscale.spec.model import ModelDeployment
from gpuscale.spec.platform import PlatformSpec


def scrape(**values: float) -> RoleObservation:
    """The role's series in Prometheus, summed over its pods (the simulator's scrape; unset values 0)."""
    fields = {"queue": 0.0, "gateway": 0.0, "kv_sum": 0.0, "running": 0.0, "duty_sum": 0.0, **values}
    return RoleObservation(role="", current=0, ready=0, **fields)


class Tsdb(ObservedSeries):
    """The simulator's view of a scrape (``sim.policies.ObservedSeries``) where the role's vLLM series exist only
    while a pod reports (``ready > 0``); the door's EPP series (``gateway``: requests it holds) always exist."""

    def __init__(self, s: RoleObservation, ready: int) -> None:
        super().__init__(s)
        self.ready = ready

    def gauge_sum(self, metric: str, matchers: tuple[Matcher, ...]) -> float | None:
        if metric != front_door.QUEUE_METRIC and self.ready == 0:
            return None
        return super().gauge_sum(metric, matchers)

    def rate_sum(self, metric: str, matchers: tuple[Matcher, ...], window: str) -> float | None:
        return super().rate_sum(metric, matchers, window) if self.ready > 0 else None


@dataclass(frozen=True)
class Role:
    """One emitted ScaledObject with the numbers its worlds are built from."""

    stack: str
    model: ModelDeployment
    sizing: ModelSizing
    scaling: RoleSizing
    body: Mapping[str, Any]

    @property
    def key(self) -> str:
        return f"{self.stack}/{self.model.name}/{self.scaling.role}"

    @property
    def peak(self) -> int:
        return min(max(self.scaling.replicas_at_peak, self.scaling.min_replicas, 1), self.scaling.max_replicas)

    @property
    def floor(self) -> int:
        return max(self.scaling.min_replicas, 1)

    def load(self, rps: float, replicas: int) -> RoleObservation:
        """The role's series at ``rps`` requests per second of the workload's mix: latencies well inside the SLO,
        the running sequences half the ITL batch of ``replicas`` replicas, KV per sequence at the mean context."""
        w, slo, ms = self.model.workload, self.model.slo, self.sizing
        running = 0.5 * max(replicas, 1) * max(ms.decode_batch_at_slo, 1) if rps > 0 else 0.0
        ctx_share = (w.prompt_tokens.mean + w.output_tokens.mean / 2) / ms.kv_capacity_tokens
        gen = rps * w.output_tokens.mean
        return scrape(
            prompt_rate=rps * w.prompt_tokens.mean, generation_rate=gen, kv_sum=running * ctx_share, running=running,
            queue_time_rate=rps * 0.1 * slo.ttft_p99_s, done_rate=rps,
            itl_rate=gen * 0.5 * slo.itl_p99_s, itl_count_rate=gen,
            done_prompt_rate_5m=rps * w.prompt_tokens.mean, done_rate_5m=rps,
        )


def shipped_roles(stack_specs: Mapping[str, PlatformSpec], bodies: Callable[[AutoscalerSettings], Mapping[str, Any]] | None = None) -> Iterator[Role]:
    """Every ScaledObject the shipped stacks emit (``bodies``: how a body is obtained, default the builder)."""
    for stack, spec in sorted(stack_specs.items()):
        sized: PlatformSizing = size_platform(spec)
        for model in spec.models:
            if model.autoscaling.backend != "keda":
                continue
            for role in model.serving.roles:
                args = AutoscalerSettings.from_platform(spec, sized, model.name, role)
                body = bodies(args) if bodies is not None else autoscaler_body(args)
                yield Role(stack, model, sized.model(model.name), sized.model(model.name).role(role), body)


# ---------------------------------------------------------------- the five cases

def _run(r: Role, world: World, horizon_s: float) -> list[Step]:
    return ScaledObjectModel(r.body).run(world, horizon_s)


def _polls(steps: list[Step]) -> list[Step]:
    return [s for s in steps if s.triggers]


def _errors(steps: list[Step], after: float = -1.0) -> list[str]:
    return sorted({f"{tr.name}: {tr.error}" for s in _polls(steps) if s.t >= after for tr in s.triggers if tr.error})


def steady(r: Role) -> list[str]:
    """Steady peak load: the load signal holds the replicas sizing plans for the peak, and no trigger errors."""
    rps = r.model.workload.peak_rps
    steps = _run(r, World(samples=lambda t, ready: Tsdb(r.load(rps, r.peak), ready), start_replicas=r.floor), 1800)
    out = [f"trigger error at steady load: {e}" for e in _errors(steps)]
    if steps[-1].replicas != r.peak:
        out.append(f"holds {steps[-1].replicas} replicas at steady peak load, sizing plans {r.peak}")
    return out


STOP_S = 600.0


def traffic_stops(r: Role) -> list[str]:
    """Traffic stops (no request finishes any more): the role comes down to its warm minimum, and a role that may
    scale to zero reaches zero one cooldown after the last request, and stays there."""
    rps = r.model.workload.peak_rps

    def samples(t: float, ready: int) -> Samples:
        return Tsdb(r.load(rps, r.peak) if t < STOP_S else scrape(), ready)

    so = ScaledObjectModel(r.body)
    steps = so.run(World(samples=samples, start_replicas=r.peak), STOP_S + 5400)
    out = [f"trigger error once traffic stopped: {e}" for e in _errors(steps, after=STOP_S + so.polling_s)]
    final = steps[-1].replicas
    if final != r.scaling.min_replicas:
        out.append(f"idle role holds {final} replicas, its warm minimum is {r.scaling.min_replicas}")
    if r.scaling.min_replicas == 0:
        zero = next((s.t for s in steps if s.replicas == 0), None)
        if zero is not None and zero < STOP_S + so.cooldown_s:
            out.append(f"reached zero {zero - STOP_S:.0f} s after the last request, before its {so.cooldown_s} s cooldown")
        if zero is not None and any(s.replicas > 0 for s in steps if s.t > zero):
            back = next(s for s in steps if s.t > zero and s.replicas > 0)
            out.append(f"woke from zero at {back.t - STOP_S:.0f} s with no request ({back.branch})")
    return out


def idle_at_zero(r: Role) -> list[str]:
    """A role that may scale to zero, at zero with no request: it stays at zero (its vLLM triggers have no series)."""
    if r.scaling.min_replicas > 0:
        return []
    steps = _run(r, World(samples=lambda t, ready: Tsdb(scrape(), ready), start_replicas=0), 1800)
    woke = next((s for s in steps if s.replicas > 0), None)
    return [f"woke from zero at {woke.t:.0f} s with no request ({woke.branch})"] if woke is not None else []


def prometheus_down(r: Role) -> list[str]:
    """Prometheus unreachable: every ScaledObject holds its replicas (never fewer, never zero)."""
    rps = r.model.workload.peak_rps

    def samples(t: float, ready: int) -> Samples | None:
        return Tsdb(r.load(rps, r.peak), ready) if t < STOP_S else None

    steps = _run(r, World(samples=samples, start_replicas=r.peak), STOP_S + 3600)
    during = [s for s in steps if s.t >= STOP_S]
    low = min(s.replicas for s in during)
    if low < r.peak:
        at = next(s for s in during if s.replicas == low)
        return [f"a Prometheus outage took the role from {r.peak} to {low} replicas ({at.branch or at.hpa})"]
    return []


def prometheus_down_idle(r: Role) -> list[str]:
    """Prometheus goes down just before an idle role's cooldown ends: the role still holds its replicas for the whole
    outage (during the first ``failureThreshold`` polls only a non-zero ``fallback.replicas`` keeps ``RequestScale``
    off ``scaleToZeroOrIdle``)."""
    so = ScaledObjectModel(r.body)
    down_at = STOP_S + so.cooldown_s - so.polling_s
    rps = r.model.workload.peak_rps

    def samples(t: float, ready: int) -> Samples | None:
        if t >= down_at:
            return None
        return Tsdb(r.load(rps, r.peak) if t < STOP_S else scrape(), ready)

    steps = so.run(World(samples=samples, start_replicas=r.peak), down_at + 1800)
    at_start = next(s.replicas for s in steps if s.t >= down_at)
    during = [s for s in steps if s.t >= down_at]
    low = min(s.replicas for s in during)
    if low < at_start:
        at = next(s for s in during if s.replicas == low)
        return [f"an outage at the end of the idle window took the role from {at_start} to {low} ({at.branch or at.hpa})"]
    return []


def prometheus_down_at_zero(r: Role) -> list[str]:
    """A role at zero when Prometheus goes down: KEDA's fallback counts as active after failureThreshold polls, so
    the role is woken to its fallback count (one replica; the door cannot wake it meanwhile) and no further."""
    if r.scaling.min_replicas > 0:
        return []
    steps = _run(r, World(samples=lambda t, ready: None, start_replicas=0), 1800)
    top = max(s.replicas for s in steps)
    if top != 1 or steps[-1].replicas != 1:
        return [f"at zero during an outage the role went to {top} (ends at {steps[-1].replicas}); the docs say one replica"]
    return []


def door_only(r: Role) -> list[str]:
    """Only the door's queue is non-zero (the model at zero, or idle, and requests held): the role wakes and grows
    to the held requests' replicas."""
    if not any(t["name"] == front_door.TRIGGER_NAME for t in r.body["spec"]["triggers"]):
        return []
    assert r.sizing.front_door is not None
    per = r.sizing.front_door.per_replica
    want = min(max(3, r.scaling.min_replicas), r.scaling.max_replicas)
    world = World(
        samples=lambda t, ready: Tsdb(scrape(gateway=3.0 * per), ready),
        ready_delay_s=r.sizing.cold_start.total_s, start_replicas=r.scaling.min_replicas,
    )
    so = ScaledObjectModel(r.body)
    steps = so.run(world, 2 * r.sizing.cold_start.total_s + 600)
    out: list[str] = []
    first = next((s.t for s in steps if s.replicas > 0), None)
    if first is None or first > 2 * so.polling_s:
        out.append(f"held requests did not wake the role within two polls (first replica at {first})")
    if steps[-1].replicas != want:
        out.append(f"with {3 * per} held requests the role has {steps[-1].replicas} replicas, {want} serve them")
    return out


PERIOD_S, GENERATE_S = 600.0, 480.0


def sparse_long_generations(r: Role) -> list[str]:
    """One request every 10 minutes, each generating for 8 (a request finishes in one minute of ten): no trigger
    errors; a role that decodes keeps its replica while a sequence holds KV and never grows past one."""
    w = r.model.workload
    tps = 1.0 / max(r.sizing.itl_light_s, 1e-3)

    def samples(t: float, ready: int) -> Samples:
        phase = t % PERIOD_S
        generating = phase < GENERATE_S
        finished = GENERATE_S <= phase < GENERATE_S + 60
        s = scrape(
            prompt_rate=w.prompt_tokens.mean / 60 if phase < 60 else 0.0,
            generation_rate=tps if generating else 0.0,
            running=1.0 if generating else 0.0,
            kv_sum=(w.prompt_tokens.mean + tps * phase) / r.sizing.kv_capacity_tokens if generating else 0.0,
            itl_rate=tps * r.sizing.itl_light_s if generating else 0.0, itl_count_rate=tps if generating else 0.0,
            queue_time_rate=0.01 / 60 if finished else 0.0, done_rate=1 / 60 if finished else 0.0,
            done_prompt_rate_5m=w.prompt_tokens.mean / 300 if t >= GENERATE_S else 0.0,
            done_rate_5m=1 / 300 if t >= GENERATE_S else 0.0,
        )
        return Tsdb(s, ready)

    steps = _run(r, World(samples=samples, start_replicas=r.floor), 3 * PERIOD_S)
    out = [f"trigger error on a sparse stream: {e}" for e in _errors(steps)]
    if r.scaling.role != "prefill":
        counts = {s.replicas for s in steps}
        if counts != {r.floor}:
            out.append(f"a decoding role went through {sorted(counts)} replicas for one sequence at a time (expected {r.floor})")
    return out


CASES: dict[str, Callable[[Role], list[str]]] = {
    "steady": steady,
    "traffic-stops": traffic_stops,
    "idle-at-zero": idle_at_zero,
    "prometheus-down": prometheus_down,
    "prometheus-down-idle": prometheus_down_idle,
    "prometheus-down-at-zero": prometheus_down_at_zero,
    "door-only": door_only,
    "sparse-long-generations": sparse_long_generations,
}


def check(r: Role, case: str) -> list[str]:
    return CASES[case](r)


def fmt_failures(failures: Mapping[str, list[str]]) -> str:
    return "\n".join(f"{k}: {m}" for k, ms in sorted(failures.items()) for m in ms) or "none"
