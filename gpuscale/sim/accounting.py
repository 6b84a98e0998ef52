"""Accounting of one run: every request's fate, the miss breakdown, GPU time by state, and the result.

* Every arrived request ends in exactly one outcome (completed, timed out, rejected, lost in flight); the run drains
  after the last arrival until all are decided, so ``arrived = completed + timed out + rejected + lost`` holds in every
  run and is checked when the result is built (a violation raises, it is never papered over).
* A request is on time when it completed with TTFT <= the TTFT target and a mean inter-token gap <= the ITL target; it
  is a miss from the moment its deadline passes, whatever happens later.
* Servable: within the context and on time alone on an idle replica (``servable_mask``).
* GPU time is integrated piecewise between cluster changes by what each GPU is doing (provisioning, loading, waiting
  for its gang, empty, serving), up to the drain's end; free GPUs on nodes shared with other tenants are not the
  model's cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from gpuscale.sim import metrics as M
from gpuscale.sim.replicas import LOADING, PENDING
from gpuscale.sim.router import EVICTED, HELD, STARTING
from gpuscale.sim.states import OUTCOME_NAMES, LossReason, MissCause, NodeState, Outcome

if TYPE_CHECKING:
    from gpuscale.sim.simulation import Run

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

    def add(self, rate: GpuStates, dt: float) -> None:
        self.provisioning += rate.provisioning * dt
        self.empty += rate.empty * dt
        self.gang_wait += rate.gang_wait * dt
        self.loading += rate.loading * dt
        self.serving += rate.serving * dt
        self.reload += rate.reload * dt

    @property
    def total(self) -> float:
        return self.provisioning + self.empty + self.gang_wait + self.loading + self.serving


class Accounting:
    """Per-request outcome arrays plus the GPU-time integral of one run."""

    def __init__(self, run: Run) -> None:
        self.run = run
        n = len(run.arrivals)
        # plain lists while the clock runs (numpy element access is slow); arrays when the result is built
        self.status: list[int] = [_IN_SYSTEM] * n
        self.loss: list[int] = [0] * n
        self.flags: list[int] = [0] * n
        self.first: list[float] = [math.nan] * n
        self.done: list[float] = [math.nan] * n
        self.open = 0
        """Arrived and not yet decided."""
        self.arrived = 0
        self.last_decided_t = 0.0
        self.events: list[M.SimEvent] = []
        self._last_t = 0.0
        self._now = GpuStates()
        """GPUs in each state since the last change."""
        self._seconds = GpuStates()
        """GPU-seconds in each state so far."""
        self.snapshot: GpuStates | None = None
        """The GPU integral frozen at the drain's end."""

    # ------------------------------------------------------------------ request outcomes

    def arrive(self) -> None:
        self.arrived += 1
        self.open += 1

    def _decide(self, i: int, outcome: int, t: float) -> bool:
        if self.status[i] != _IN_SYSTEM:
            return False
        self.status[i] = outcome
        self.open -= 1
        if t > self.last_decided_t:
            self.last_decided_t = t
        return True

    def reject(self, i: int) -> None:
        self._decide(i, _REJECTED, self.run.env.now)

    def completed(self, i: int, t: float) -> None:
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

    def lost(self, i: int, reason: LossReason) -> None:
        if self._decide(i, _LOST, self.run.env.now):
            self.loss[i] = int(reason)

    def close(self, end_t: float) -> None:
        """The drain hit its bound: whatever is still open is timed out (no first token) or lost (streaming)."""
        for i, st in enumerate(self.status):
            if st != _IN_SYSTEM:
                continue
            if math.isnan(self.first[i]):
                self._decide(i, _TIMED_OUT, end_t)
            else:
                self._decide(i, _LOST, end_t)
                self.loss[i] = int(LossReason.RUN_END)

    # ------------------------------------------------------------------ GPU time

    def gpu_change(self) -> None:
        """Integrate GPU time up to now, then recount what every GPU is doing."""
        run = self.run
        t = run.env.now
        dt = t - self._last_t
        if dt > 0:
            self._seconds.add(self._now, dt)
        self._last_t = t
        prov = empty = gang = loading = serving = reload = 0.0
        for n in run.provisioner.nodes:
            if n.state == NodeState.READY:
                if n.foreign == 0:  # free GPUs of a shared node stay available to its other tenants
                    empty += n.free
            else:
                prov += n.gpus - n.foreign
        for r in run.replicas.all:
            bound = r.bound_gpus()
            if r.state == PENDING:
                gang += bound
            elif r.state == LOADING:
                loading += bound
            else:
                serving += bound
            if r.evicted:
                reload += bound
        self._now = GpuStates(prov, empty, gang, loading, serving, reload)

    def freeze(self, end_t: float) -> None:
        """Integrate up to ``end_t`` (the drain's end) and keep that integral for the result."""
        integ = replace(self._seconds)
        integ.add(self._now, max(end_t - self._last_t, 0.0))
        self.snapshot = integ

    def gpu_now(self) -> int:
        return int(self._now.total)

    def log(self, kind: str, detail: str) -> None:
        if len(self.events) < MAX_EVENTS_LOGGED:
            self.events.append(M.SimEvent(t_s=round(self.run.env.now, 3), kind=kind, detail=detail))

    # ------------------------------------------------------------------ result

    def miss_causes(self, on_time: np.ndarray, servable: np.ndarray) -> np.ndarray:
        """One ``MissCause`` per request (-1 for requests on time)."""
        status = np.asarray(self.status, dtype=np.int8)
        loss = np.asarray(self.loss, dtype=np.int8)
        flags = np.asarray(self.flags, dtype=np.int8)
        cause = np.full(status.shape, -1, dtype=np.int8)
        missed = ~on_time
        cause[missed] = MissCause.QUEUEING
        cold = missed & ((flags & (HELD | STARTING)) != 0)
        cause[cold] = MissCause.COLD_START
        lost = missed & (status == Outcome.LOST)
        cause[lost] = MissCause.LOST_IN_FLIGHT
        cause[lost & (loss == LossReason.NO_ENDPOINT)] = MissCause.COLD_START  # refused at zero, never in flight
        evicted = missed & (((flags & EVICTED) != 0) | (loss == LossReason.EVICTION) | (loss == LossReason.INTERRUPTION))
        cause[evicted] = MissCause.EVICTION
        cause[missed & ~servable] = MissCause.INFEASIBLE
        cause[status == Outcome.REJECTED] = MissCause.REJECTED
        return cause

    def result(self, end_t: float, servable: np.ndarray) -> M.PolicyResult:
        run = self.run
        s, v = run.setup, run.variant
        a = run.arrivals
        n = len(a)
        status = np.asarray(self.status, dtype=np.int8)
        first = np.asarray(self.first, dtype=float)
        done = np.asarray(self.done, dtype=float)
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
        cause = self.miss_causes(on_time, servable)
        misses = {name: int(np.count_nonzero(cause == c)) for c, name in _CAUSES}
        denom = max(n, 1)
        n_servable = int(servable.sum())
        answered = ttft[~np.isnan(ttft) & completed]
        ttft_p99 = M.percentile(answered, 99)
        itl_p99 = run.itl.quantile(0.99)
        tp = tpot[completed & (out > 1)]
        g = self.snapshot if self.snapshot is not None else self._seconds
        prov, empty, gangw, loading, serving, reload = (
            g.provisioning / 60.0, g.empty / 60.0, g.gang_wait / 60.0, g.loading / 60.0, g.serving / 60.0, g.reload / 60.0,
        )
        gpu_hours = g.total / 3600.0
        rs = run.replicas
        engines = run.engines_seen
        loss = np.asarray(self.loss, dtype=np.int8)
        answered_at = first[~np.isnan(first)]
        first_answer = float(answered_at.min() - arr.min()) if answered_at.size and n else None
        door = v.front_door
        queried = sum(e.prefix_query_tokens for e in engines)
        return M.PolicyResult(
            name=v.name, description=v.description, policy=v.policy.kind, bound=v.bound, provisioner=v.provisioner.kind,
            consolidation=_consolidation_label(v), scheduler=v.scheduler.label,
            arrived=n, completed=counts[Outcome.COMPLETED], dropped_timeout=counts[Outcome.TIMED_OUT],
            dropped_rejected=counts[Outcome.REJECTED], lost_in_flight=counts[Outcome.LOST], retried=run.router.retried,
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
            itl_p50_s=_r(run.itl.quantile(0.5)), itl_p99_s=_r(itl_p99),
            tpot_mean_s=_r(float(tp.mean())) if tp.size else None,
            ttft_p99_met=ttft_p99 is not None and ttft_p99 <= s.ttft_slo_s,
            itl_p99_met=itl_p99 is not None and itl_p99 <= s.itl_slo_s,
            end_s=round(end_t, 3),
            gpu_hours=round(gpu_hours, 4), cost_usd=round(gpu_hours * s.usd_per_gpu_hour, 2),
            serving_gpu_minutes=round(serving, 2),
            idle_gpu_minutes=M.IdleGpuMinutes(
                provisioning=round(prov, 2), loading=round(loading, 2), gang_wait=round(gangw, 2), empty=round(empty, 2)
            ),
            evictions=rs.evictions, eviction_reload_gpu_minutes=round(reload, 2),
            interruptions=run.provisioner.interruptions, preemptions=sum(e.preemptions for e in engines),
            prefix_hit_rate=round(sum(e.prefix_hit_tokens for e in engines) / queried, 4) if queried else None,
            scale_events=run.scale_events,
            replicas_max={r.name: int(max(r.series["desired"], default=0) or 0) for r in rs.roles},  # type: ignore[type-var]
            replicas_mean={
                r.name: round(float(np.mean([x or 0 for x in r.series["ready"]])), 3) if r.series["ready"] else 0.0
                for r in rs.roles
            },
            nodes=M.NodeStats(
                launched=run.provisioner.launched, terminated=run.provisioner.terminated, max_alive=run.provisioner.max_nodes,
                first_ready_latency_s=_r(run.provisioner.ready_latencies[0]) if run.provisioner.ready_latencies else None,
                mean_ready_latency_s=(
                    _r(float(np.mean(run.provisioner.ready_latencies))) if run.provisioner.ready_latencies else None
                ),
            ),
            tracked=self._tracked(ttft),
            events=self.events,
            series=self._series(ttft, on_time, status),
        )

    def _tracked(self, ttft: np.ndarray) -> list[M.TrackedRequest]:
        a = self.run.arrivals
        out = []
        for i, label in sorted(a.labels.items()):
            out.append(M.TrackedRequest(
                label=label, arrival_s=float(a.arrival_s[i]), prompt_tokens=int(a.prompt_tokens[i]),
                output_tokens=int(a.output_tokens[i]), timeout_s=a.timeouts_s.get(i, self.run.setup.request_timeout_s),
                outcome=OUTCOME_NAMES[int(self.status[i])],
                ttft_s=None if np.isnan(ttft[i]) else round(float(ttft[i]), 3),
            ))
        return out

    def _series(self, ttft: np.ndarray, on_time: np.ndarray, status: np.ndarray) -> M.TimeSeries:
        run = self.run
        width = run.setup.series_s
        bins = len(run.series_t)
        n = len(run.arrivals)
        idx = np.minimum((run.arrivals.arrival_s // width).astype(np.int64), max(bins - 1, 0))
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
            t_s=run.series_t,
            roles=[
                M.RoleSeries(
                    role=r.name, desired=r.series["desired"], ready=r.series["ready"],
                    queue_depth=r.series["queue"], duty_cycle=r.series["duty"], kv_usage=r.series["kv"],
                )
                for r in run.replicas.roles
            ],
            gpus=run.series_gpus, nodes=run.series_nodes, ttft_p50_s=p50, ttft_p99_s=p99,
            arrived=count(np.ones(n, dtype=bool)), unanswered=count(bad), missed=count(~on_time),
        )


_CAUSES = (
    (MissCause.REJECTED, "rejected"), (MissCause.INFEASIBLE, "infeasible"), (MissCause.QUEUEING, "queueing"),
    (MissCause.COLD_START, "cold_start"), (MissCause.EVICTION, "eviction"), (MissCause.LOST_IN_FLIGHT, "lost_in_flight"),
)


def _r(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(x, nd)


def _consolidation_label(v: object) -> str:
    c = v.consolidation  # type: ignore[attr-defined]
    if c.policy in ("WhenEmpty", "WhenEmptyOrUnderutilized"):
        return f"{c.policy} after {c.consolidate_after_s:g} s"
    return str(c.policy)
