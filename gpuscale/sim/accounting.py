"""Accounting of one run: the ledgers the actors write (request fates, GPU time, events) and the result built from them.

* Every arrived request ends in exactly one outcome (completed, timed out, rejected, lost in flight, refused); the run
  drains after the last arrival until all are decided, so ``arrived = completed + timed out + rejected + lost +
  refused`` holds in every run and is checked when the result is built (a violation raises, it is never papered over).
* A request is on time when it completed with TTFT <= the TTFT target and a mean inter-token gap <= the ITL target; it
  is a miss from the moment its deadline passes, whatever happens later.
* Servable: within the context and on time alone on an idle replica (``replica.servable_mask``).
* GPU time is integrated piecewise between cluster changes by what each GPU is doing (provisioning, loading, waiting
  for its gang, empty, serving), up to the drain's end; free GPUs on nodes shared with other tenants are not the
  model's cost. ``GpuLedger`` observes the changes: nodes, pods and replicas tell it before they change
  (``nodes.StateWatch``), so no actor reports anything.
* ``policy_result`` is a pure function of the run's ``RunRecord`` (the ledgers and counters, frozen at the drain's end).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gpuscale.sim import metrics as M
from gpuscale.sim.context import RunContext
from gpuscale.sim.events import Environment
from gpuscale.sim.inputs import SimSetup
from gpuscale.sim.nodes import Node
from gpuscale.sim.pods import Replica
from gpuscale.sim.states import (
    MISS_CAUSE_NAMES,
    OUTCOME_NAMES,
    LossReason,
    MissCause,
    NodeState,
    Outcome,
    ReplicaState,
    RequestFlag,
)

MAX_EVENTS_LOGGED = 300
_IN_SYSTEM, _COMPLETED, _TIMED_OUT, _REJECTED, _LOST, _REFUSED = (
    int(Outcome.IN_SYSTEM), int(Outcome.COMPLETED), int(Outcome.TIMED_OUT), int(Outcome.REJECTED), int(Outcome.LOST),
    int(Outcome.REFUSED),
)


@dataclass
class GpuStates:
    """GPUs (or GPU-seconds, when integrated) by what they are doing."""

    provisioning: float = 0.0
    """Node launched, not yet allocatable."""
    empty: float = 0.0
    """Free GPUs of the model's nodes."""
    gang_wait: float = 0.0
    """Bound to a replica whose other pods are not placed yet."""
    loading: float = 0.0
    """Replica placed: image, weights, engine start."""
    serving: float = 0.0
    reload: float = 0.0
    """Of the above, held by replicas reloading after an eviction."""
    reserved: float = 0.0
    """Of the above, GPUs inside the pool's capacity reservations (at most the reserved instances' GPUs): paid by the
    reservation's bill, not again at the pool's rate."""

    def add(self, rate: GpuStates, dt: float) -> None:
        self.provisioning += rate.provisioning * dt
        self.empty += rate.empty * dt
        self.gang_wait += rate.gang_wait * dt
        self.loading += rate.loading * dt
        self.serving += rate.serving * dt
        self.reload += rate.reload * dt
        self.reserved += rate.reserved * dt

    @property
    def total(self) -> float:
        return self.provisioning + self.empty + self.gang_wait + self.loading + self.serving


def gpu_states(nodes: Sequence[Node], replicas: Sequence[Replica], reserved_gpus: int = 0) -> GpuStates:
    """What every GPU of the model's nodes is doing now; ``reserved_gpus``: the GPUs of the reserved instances (a node
    launches into a reservation while one is free, so the first ``reserved_gpus`` of them are covered)."""
    prov = empty = gang = loading = serving = reload = 0.0
    for n in nodes:
        if n.state == NodeState.READY:
            if n.foreign == 0:  # free GPUs of a shared node stay available to its other tenants
                empty += n.free
        else:
            prov += n.gpus - n.foreign
    for r in replicas:
        bound = r.bound_gpus()
        if r.state == ReplicaState.PENDING:
            gang += bound
        elif r.state == ReplicaState.LOADING:
            loading += bound
        else:
            serving += bound
        if r.evicted:
            reload += bound
    states = GpuStates(prov, empty, gang, loading, serving, reload)
    states.reserved = min(states.total, float(reserved_gpus))
    return states


class GpuLedger:
    """The GPU-time integral, an observer of the cluster (a ``nodes.StateWatch``).

    Told before any node, pod or replica changes, it marks the instant; the first time the clock has moved past that
    instant it recounts (``count``) and, when the counts changed, closes the interval the old counts held. Many changes
    at one instant cost one recount."""

    def __init__(self, env: Environment) -> None:
        self.env = env
        self._count: Callable[[], GpuStates] = GpuStates
        self._rates = GpuStates()
        """GPUs in each state since ``_since``."""
        self._since = 0.0
        self._seconds = GpuStates()
        """GPU-seconds in each state up to ``_since``."""
        self._dirty = False
        self._changed_at = 0.0

    def connect(self, count: Callable[[], GpuStates]) -> None:
        """``count`` tells what every GPU is doing now (``gpu_states`` over the run's nodes and replicas)."""
        self._count = count

    def will_change(self) -> None:
        t = self.env.now
        if self._dirty and t > self._changed_at:
            self._flush()
        self._dirty = True
        self._changed_at = t

    def _flush(self) -> None:
        self._dirty = False
        rates = self._count()
        if rates != self._rates:
            self._seconds.add(self._rates, self._changed_at - self._since)
            self._since = self._changed_at
            self._rates = rates

    def gpus_now(self) -> int:
        if self._dirty:
            self._flush()
        return int(self._rates.total)

    def integral(self, end_t: float) -> GpuStates:
        """GPU-seconds in each state up to ``end_t`` (the drain's end)."""
        if self._dirty:
            self._flush()
        out = replace(self._seconds)
        out.add(self._rates, max(end_t - self._since, 0.0))
        return out


class EventLog:
    """The first ``MAX_EVENTS_LOGGED`` notable events of a run (launches, evictions, scale decisions)."""

    def __init__(self, env: Environment) -> None:
        self.env = env
        self.events: list[M.SimEvent] = []

    def log(self, kind: str, detail: str) -> None:
        if len(self.events) < MAX_EVENTS_LOGGED:
            self.events.append(M.SimEvent(t_s=round(self.env.now, 3), kind=kind, detail=detail))


class RequestLedger:
    """Per-request outcome, loss reason, flags and times; every request is decided once."""

    def __init__(self, n: int) -> None:
        # plain lists while the clock runs (numpy element access is slow); arrays when the result is built
        self.status: list[int] = [_IN_SYSTEM] * n
        self.loss: list[int] = [0] * n
        self.flags: list[int] = [0] * n
        """``RequestFlag`` bits."""
        self.first: list[float] = [math.nan] * n
        self.done: list[float] = [math.nan] * n
        self.open = 0
        """Arrived and not yet decided."""
        self.last_decided_t = 0.0

    def arrive(self) -> None:
        self.open += 1

    def _decide(self, i: int, outcome: int, t: float) -> bool:
        if self.status[i] != _IN_SYSTEM:
            return False
        self.status[i] = outcome
        self.open -= 1
        if t > self.last_decided_t:
            self.last_decided_t = t
        return True

    def reject(self, i: int, t: float) -> None:
        self._decide(i, _REJECTED, t)

    def completed(self, i: int, t: float) -> None:
        # ``_decide`` inlined: once per request, on the hot path
        if self.status[i] == _IN_SYSTEM:
            self.status[i] = _COMPLETED
            self.open -= 1
            if t > self.last_decided_t:
                self.last_decided_t = t
            self.done[i] = t

    def timed_out(self, i: int, t: float) -> None:
        self._decide(i, _TIMED_OUT, t)

    def refused(self, i: int, t: float) -> None:
        """Answered 503 with ``Retry-After`` by the front door."""
        self._decide(i, _REFUSED, t)

    def lost(self, i: int, reason: LossReason, t: float) -> None:
        if self._decide(i, _LOST, t):
            self.loss[i] = int(reason)

    def close(self, end_t: float) -> None:
        """The drain hit its bound: whatever is still open is timed out (no first token) or lost (streaming)."""
        for i, st in enumerate(self.status):
            if st != _IN_SYSTEM:
                continue
            if math.isnan(self.first[i]):
                self._decide(i, _TIMED_OUT, end_t)
            else:
                self.lost(i, LossReason.RUN_END, end_t)


@dataclass(frozen=True)
class RoleRecord:
    name: str
    series: dict[str, list[float | int | None]]


@dataclass(frozen=True)
class RunRecord:
    """Everything a run measured, frozen at the drain's end: what ``policy_result`` reads."""

    end_t: float
    status: np.ndarray
    loss: np.ndarray
    flags: np.ndarray
    first: np.ndarray
    done: np.ndarray
    gpu_seconds: GpuStates
    itl_p50_s: float | None
    itl_p99_s: float | None
    preemptions: int
    prefix_hit_tokens: int
    prefix_query_tokens: int
    retried: int
    evictions: int
    interruptions: int
    launched: int
    terminated: int
    max_nodes: int
    ready_latencies: tuple[float, ...]
    scale_events: int
    roles: tuple[RoleRecord, ...]
    series_t: list[float]
    series_gpus: list[int]
    series_nodes: list[int]
    events: list[M.SimEvent]
    scale_up_ready: tuple[tuple[float, float], ...] = ()
    """``(created_at, seconds to ready)`` of each replica placed after t = 0 that became ready (``Scheduler.started``)."""


@dataclass(frozen=True)
class WarmupMark:
    """What a warm-started run had recorded when its scored window opened (``warmup_s`` into the run)."""

    warm: int
    """Warm-up requests (the first ``warm`` of the run's arrivals), not scored."""
    warmup_s: float
    record: RunRecord
    """``Simulation.record(warmup_s)`` taken at that instant: the counters and GPU-seconds to subtract."""
    itl_counts: tuple[float, ...]
    """The ITL histogram's bins then (the scored quantiles are of the difference)."""


def scored_record(end: RunRecord, mark: WarmupMark, itl_quantiles: tuple[float | None, float | None]) -> RunRecord:
    """The scored window of a warm-started run, on its own clock (0 = the window's start): the scored requests' fates,
    GPU-seconds and counters accrued after the mark, series samples and events from then on. ``itl_quantiles``: p50 and
    p99 of the inter-token gaps after the mark."""
    w, t0, m = mark.warm, mark.warmup_s, mark.record
    gpu = GpuStates(**{k: getattr(end.gpu_seconds, k) - getattr(m.gpu_seconds, k) for k in GpuStates.__dataclass_fields__})
    keep = [i for i, t in enumerate(end.series_t) if t >= t0 - 1e-9]

    def window(xs: list[Any]) -> list[Any]:
        return [xs[i] for i in keep]

    return replace(
        end, end_t=end.end_t - t0, status=end.status[w:], loss=end.loss[w:], flags=end.flags[w:],
        first=end.first[w:] - t0, done=end.done[w:] - t0, gpu_seconds=gpu, itl_p50_s=itl_quantiles[0],
        itl_p99_s=itl_quantiles[1], preemptions=end.preemptions - m.preemptions,
        prefix_hit_tokens=end.prefix_hit_tokens - m.prefix_hit_tokens,
        prefix_query_tokens=end.prefix_query_tokens - m.prefix_query_tokens, retried=end.retried - m.retried,
        evictions=end.evictions - m.evictions, interruptions=end.interruptions - m.interruptions,
        launched=end.launched - m.launched, terminated=end.terminated - m.terminated,
        ready_latencies=end.ready_latencies[len(m.ready_latencies):], scale_events=end.scale_events - m.scale_events,
        roles=tuple(RoleRecord(x.name, {k: window(v) for k, v in x.series.items()}) for x in end.roles),
        series_t=[round(end.series_t[i] - t0, 3) for i in keep], series_gpus=window(end.series_gpus),
        series_nodes=window(end.series_nodes),
        events=[e.model_copy(update={"t_s": round(e.t_s - t0, 3)}) for e in end.events if e.t_s >= t0 - 1e-9],
        scale_up_ready=tuple((c - t0, d) for c, d in end.scale_up_ready if c >= t0 - 1e-9),
    )


def miss_causes(record: RunRecord, on_time: np.ndarray, servable: np.ndarray) -> np.ndarray:
    """One ``MissCause`` per request (-1 for requests on time)."""
    status, loss, flags = record.status, record.loss, record.flags
    cause = np.full(status.shape, -1, dtype=np.int8)
    missed = ~on_time
    cause[missed] = MissCause.QUEUEING
    cold = missed & ((flags & int(RequestFlag.HELD | RequestFlag.STARTING)) != 0)
    cause[cold] = MissCause.COLD_START
    lost = missed & (status == Outcome.LOST)
    cause[lost] = MissCause.LOST_IN_FLIGHT
    cause[lost & (loss == LossReason.NO_ENDPOINT)] = MissCause.COLD_START  # refused at zero, never in flight
    evicted = missed & (
        ((flags & int(RequestFlag.EVICTED)) != 0) | (loss == LossReason.EVICTION) | (loss == LossReason.INTERRUPTION))
    cause[evicted] = MissCause.EVICTION
    cause[missed & ~servable] = MissCause.INFEASIBLE
    cause[status == Outcome.REJECTED] = MissCause.REJECTED
    return cause


def run_cost_usd(setup: SimSetup, g: GpuStates, end_t: float) -> float:
    """What the run's GPUs bill: the reserved instances for the whole run, used or not (the way ODCRs and Capacity
    Blocks bill, ``gpuscale.guardrails.reservations``), plus the GPU-hours outside them at the pool's rate."""
    return setup.reserved_usd_per_hour * end_t / 3600.0 + (g.total - g.reserved) / 3600.0 * setup.usd_per_gpu_hour


def policy_result(ctx: RunContext, record: RunRecord, servable: np.ndarray) -> M.PolicyResult:
    """The variant's result, from what its run recorded (nothing here changes or reads the live actors)."""
    r = record
    s, v = ctx.setup, ctx.variant
    a = ctx.arrivals
    n = len(a)
    status, first, done, loss = r.status, r.first, r.done, r.loss
    end_t = r.end_t
    counts = {o: int(np.count_nonzero(status == o)) for o in Outcome}
    if counts[Outcome.IN_SYSTEM] or sum(counts.values()) != n:
        raise RuntimeError(
            f"{v.name}: conservation violated: arrived {n} != completed {counts[Outcome.COMPLETED]} + timed out "
            f"{counts[Outcome.TIMED_OUT]} + rejected {counts[Outcome.REJECTED]} + lost {counts[Outcome.LOST]} "
            f"+ refused {counts[Outcome.REFUSED]} (+ {counts[Outcome.IN_SYSTEM]} undecided)"
        )
    arr = a.arrival_s
    completed = status == Outcome.COMPLETED
    out = a.output_tokens.astype(float)
    ttft = first - arr
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(out > 1, (done - first) / np.maximum(out - 1, 1), 0.0)
    ttft_ok = completed & (ttft <= s.ttft_slo_s)
    itl_ok = completed & (tpot <= s.itl_slo_s)
    on_time = ttft_ok & itl_ok
    cause = miss_causes(r, on_time, servable)
    misses = {name: int(np.count_nonzero(cause == c)) for c, name in MISS_CAUSE_NAMES.items()}
    denom = max(n, 1)
    n_servable = int(servable.sum())
    answered = ttft[~np.isnan(ttft) & completed]
    ttft_p99 = M.percentile(answered, 99)
    itl_p99 = r.itl_p99_s
    tp = tpot[completed & (out > 1)]
    g = r.gpu_seconds
    prov, empty, gangw, loading, serving, reload = (
        g.provisioning / 60.0, g.empty / 60.0, g.gang_wait / 60.0, g.loading / 60.0, g.serving / 60.0, g.reload / 60.0,
    )
    gpu_hours = g.total / 3600.0
    answered_at = first[~np.isnan(first)]
    first_answer = float(answered_at.min() - arr.min()) if answered_at.size and n else None
    door = v.front_door
    queried = r.prefix_query_tokens
    return M.PolicyResult(
        name=v.name, description=v.description, policy=v.policy.kind, bound=v.bound, provisioner=v.provisioner.kind,
        consolidation=_consolidation_label(v), scheduler=v.scheduler.label,
        arrived=n, completed=counts[Outcome.COMPLETED], dropped_timeout=counts[Outcome.TIMED_OUT],
        dropped_rejected=counts[Outcome.REJECTED], lost_in_flight=counts[Outcome.LOST], retried=r.retried,
        servable=n_servable, refused=counts[Outcome.REFUSED],
        no_endpoint=int(np.count_nonzero((status == Outcome.LOST) & (loss == LossReason.NO_ENDPOINT))),
        first_answer_s=_r(first_answer, 3),
        retry_after_s=float(door.retry_after_s) if door is not None and counts[Outcome.REFUSED] else None,
        ttft_attainment=round(float(ttft_ok.sum()) / denom, 6),
        itl_attainment=round(float(itl_ok.sum()) / denom, 6),
        slo_attainment=round(float(on_time.sum()) / denom, 6),
        slo_attainment_servable=round(float((on_time & servable).sum()) / max(n_servable, 1), 6),
        misses=M.MissBreakdown(**misses),
        ttft_p50_s=_r(M.percentile(answered, 50)), ttft_p99_s=_r(ttft_p99),
        itl_p50_s=_r(r.itl_p50_s), itl_p99_s=_r(itl_p99),
        tpot_mean_s=_r(float(tp.mean())) if tp.size else None,
        ttft_p99_met=ttft_p99 is not None and ttft_p99 <= s.ttft_slo_s,
        itl_p99_met=itl_p99 is not None and itl_p99 <= s.itl_slo_s,
        end_s=round(end_t, 3),
        gpu_hours=round(gpu_hours, 4), cost_usd=round(run_cost_usd(s, g, end_t), 2),
        serving_gpu_minutes=round(serving, 2),
        idle_gpu_minutes=M.IdleGpuMinutes(
            provisioning=round(prov, 2), loading=round(loading, 2), gang_wait=round(gangw, 2), empty=round(empty, 2)
        ),
        evictions=r.evictions, eviction_reload_gpu_minutes=round(reload, 2),
        interruptions=r.interruptions, preemptions=r.preemptions,
        prefix_hit_rate=round(r.prefix_hit_tokens / queried, 4) if queried else None,
        scale_events=r.scale_events,
        replicas_max={x.name: int(max(x.series["desired"], default=0) or 0) for x in r.roles},  # type: ignore[type-var]
        replicas_mean={
            x.name: round(float(np.mean([y or 0 for y in x.series["ready"]])), 3) if x.series["ready"] else 0.0
            for x in r.roles
        },
        nodes=M.NodeStats(
            launched=r.launched, terminated=r.terminated, max_alive=r.max_nodes,
            first_ready_latency_s=_r(r.ready_latencies[0]) if r.ready_latencies else None,
            mean_ready_latency_s=_r(float(np.mean(r.ready_latencies))) if r.ready_latencies else None,
            scale_ups=len(r.scale_up_ready),
            scale_up_ready_mean_s=_r(float(np.mean(ups))) if (ups := [d for _, d in r.scale_up_ready]) else None,
            scale_up_ready_p90_s=_r(float(np.percentile(ups, 90))) if ups else None,
        ),
        tracked=_tracked(ctx, status, ttft),
        events=r.events,
        series=_series(ctx, r, ttft, on_time, status),
    )

def _tracked(ctx: RunContext, status: np.ndarray, ttft: np.ndarray) -> list[M.TrackedRequest]:
    a = ctx.arrivals
    out = []
    for i, label in sorted(a.labels.items()):
        out.append(M.TrackedRequest(
            label=label, arrival_s=float(a.arrival_s[i]), prompt_tokens=int(a.prompt_tokens[i]),
            output_tokens=int(a.output_tokens[i]), timeout_s=a.timeouts_s.get(i, ctx.setup.request_timeout_s),
            outcome=OUTCOME_NAMES[int(status[i])],
            ttft_s=None if np.isnan(ttft[i]) else round(float(ttft[i]), 3),
        ))
    return out

def _series(ctx: RunContext, r: RunRecord, ttft: np.ndarray, on_time: np.ndarray, status: np.ndarray) -> M.TimeSeries:
    width = ctx.setup.series_s
    bins = len(r.series_t)
    n = len(ctx.arrivals)
    idx = np.minimum((ctx.arrivals.arrival_s // width).astype(np.int64), max(bins - 1, 0))
    p50: list[float | None] = [None] * bins
    p99: list[float | None] = [None] * bins

    def count(mask: np.ndarray) -> list[int]:
        return [int(x) for x in (np.bincount(idx[mask], minlength=bins)[:bins] if n else np.zeros(bins, dtype=np.int64))]

    bad = (status == Outcome.TIMED_OUT) | (status == Outcome.REJECTED) | (status == Outcome.LOST) | (
        status == Outcome.REFUSED)
    ok = ~np.isnan(ttft)
    if n and ok.any():
        order = np.argsort(idx[ok], kind="stable")
        b, vals = idx[ok][order], ttft[ok][order]
        cuts = np.flatnonzero(np.diff(b)) + 1
        for grp_b, grp_v in zip(np.split(b, cuts), np.split(vals, cuts), strict=True):
            k = int(grp_b[0])
            q50, q99 = np.percentile(grp_v, (50, 99))
            p50[k] = round(float(q50), 4)
            p99[k] = round(float(q99), 4)
    return M.TimeSeries(
        t_s=r.series_t,
        roles=[
            M.RoleSeries(
                role=x.name, desired=x.series["desired"], ready=x.series["ready"],
                queue_depth=x.series["queue"], duty_cycle=x.series["duty"], kv_usage=x.series["kv"],
            )
            for x in r.roles
        ],
        gpus=r.series_gpus, nodes=r.series_nodes, ttft_p50_s=p50, ttft_p99_s=p99,
        arrived=count(np.ones(n, dtype=bool)), unanswered=count(bad), missed=count(~on_time),
    )


def _r(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(x, nd)


def _consolidation_label(v: object) -> str:
    c = v.consolidation  # type: ignore[attr-defined]
    if c.policy in ("WhenEmpty", "WhenEmptyOrUnderutilized"):
        return f"{c.policy} after {c.consolidate_after_s:g} s"
    return str(c.policy)
