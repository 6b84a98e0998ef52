"""The lower bound on GPU-hours for a given SLO attainment: no autoscaling policy can do better, by construction.

A relaxation with perfect foresight, costed against the engine model itself (``ReplicaModel.step_s``):

* Each servable request that is on time needs its work done inside its window ``[arrival, arrival + TTFT target +
  (output - 1) x ITL target]``: prefill compute (linear layers and causal attention of its uncached tokens, prefix hits
  counted as free whenever the prefix appeared before) and one decode slot per output token (per-sequence cost, its
  KV read, and its share of the step's fixed part: weights and overhead, shared at most ``KV capacity / context`` ways
  since the batch's contexts must fit the KV).
* A replica does at most one second of each kind of work per second (a step costs at least its larger part). In
  aggregated serving prefill compute and decode reads share one step; disaggregated pools pay prefill and decode on
  their own GPUs.
* Time is cut into blocks (2 bins of ``bin_s``, two staggered families); a request whose window fits inside one block
  must be served by that block's capacity, one that straddles is counted free. Start-up, node granularity, idle and
  placement are free. Within a block the cheapest requests go first, so a block's cost for ``m`` requests is convex in
  ``m`` and the cheapest schedule for a target count takes the globally cheapest increments (greedy is exact).

A second bound covers light load, where the work is small but a replica must exist: while a served request is in
service at least one replica holds its GPUs, and between two served requests whose windows do not overlap a policy
either keeps a replica through the gap or starts one again, which costs at least the shortest load (weights and engine
start on a node with the image). Windows that overlap form a cluster needing at least its shortest service; each gap
costs ``min(gap, shortest load)``. Dropping requests (attainment below 100%) can only remove whole clusters, so the
bound subtracts the most valuable clusters, one per dropped request.

Every policy's GPU-hours at attainment ``a`` are at least ``LowerBound.gpu_hours(a)`` (the larger of the two bounds);
the property tests check it.
"""

from __future__ import annotations

import numpy as np

from gpuscale.sim.replica import ReplicaModel
from gpuscale.sim.traffic import Arrivals

BIN_SECONDS = (30.0, 120.0, 600.0)
"""Block widths tried; each gives a valid bound and the largest is kept."""


class LowerBound:
    """``gpu_hours(attainment)``: the fewest GPU-hours any schedule could spend to serve that share on time."""

    def __init__(
        self, arrivals: Arrivals, servable: np.ndarray, replica: ReplicaModel, *, ttft_slo_s: float, itl_slo_s: float,
        disaggregated: bool, gpus_per_replica: int, shortest_load_s: float,
    ) -> None:
        self.n = len(arrivals)
        idx = np.flatnonzero(servable)
        t = arrivals.arrival_s[idx]
        p = arrivals.prompt_tokens[idx].astype(float)
        o = arrivals.output_tokens[idx].astype(float)
        hit = _prefix_hits(arrivals, idx, replica)
        m = replica
        uncached = np.maximum(p - hit, 1.0)
        prefill = m.step_s_per_token * uncached + m.attention_s_per_token_pair * (p * p - hit * hit) / 2.0
        ctx = p + o / 2.0
        fixed = m.step_overhead_s + m.step_weights_s
        decode_var = o * (m.step_per_seq_s + m.step_per_context_token_s * ctx)
        decode = decode_var + o * fixed * np.minimum(ctx / m.kv_capacity_tokens, 1.0)
        window = ttft_slo_s + np.maximum(o - 1.0, 0.0) * itl_slo_s
        if disaggregated:
            # separate pools: GPU-seconds add up
            a_cost, b_cost = prefill * gpus_per_replica, decode * gpus_per_replica
            self._increments = [self._family(t, window, a_cost + b_cost, None, w, off) for w in BIN_SECONDS for off in (0, 1)]
        else:
            # one pool: a step holds the prefill compute plus the decode reads, and at least the decode slot with its
            # share of the weights; both must fit the block's replica-seconds
            a_cost, b_cost = (prefill + decode_var) * gpus_per_replica, decode * gpus_per_replica
            self._increments = [self._family(t, window, a_cost, b_cost, w, off) for w in BIN_SECONDS for off in (0, 1)]
        self._increments.append(self._single(a_cost, b_cost if not disaggregated else None))
        # presence: shortest service of each request (its prefill compute, then one minimal step per further token)
        min_step = m.step_overhead_s + max(m.step_weights_s, m.step_s_per_token)
        service = m.step_s_per_token * uncached + np.maximum(o - 1.0, 0.0) * min_step
        self._presence_total, self._presence_drops = _presence(t, window, service, shortest_load_s)
        self._gpus = gpus_per_replica
        self._candidates = idx.size

    @staticmethod
    def _family(
        t: np.ndarray, window: np.ndarray, a: np.ndarray, b: np.ndarray | None, bin_s: float, offset: int,
    ) -> tuple[np.ndarray, int]:
        """Sorted cost increments of the constrained requests and the count of free ones, for one block family."""
        start = (np.floor(t / bin_s) - offset) // 2
        end = (np.floor((t + window) / bin_s) - offset) // 2
        inside = start == end
        free = int(np.count_nonzero(~inside))
        block = start[inside]
        return _increments(block, a[inside], None if b is None else b[inside]), free

    @staticmethod
    def _single(a: np.ndarray, b: np.ndarray | None) -> tuple[np.ndarray, int]:
        return _increments(np.zeros(a.shape), a, b), 0

    def gpu_hours(self, attainment: float) -> float:
        """Lower bound on GPU-hours for ``attainment`` (share of all arrived requests on time)."""
        target = int(np.ceil(attainment * self.n - 1e-9))
        if target <= 0:
            return 0.0
        dropped = max(self._candidates - target, 0)
        presence = self._presence_total - float(np.sum(self._presence_drops[:dropped]))
        best = max(presence, 0.0) * self._gpus
        for inc, free in self._increments:
            need = target - free
            if need <= 0:
                continue
            if need > inc.size:
                return float("inf")
            best = max(best, float(np.sum(inc[:need])))
        return best / 3600.0

    def curve(self, points: int = 11) -> list[tuple[float, float]]:
        """(attainment, GPU-hours) at evenly spaced attainments up to the highest reachable one."""
        top = max((inc.size + free) for inc, free in self._increments)
        reach = min(top, self.n) / max(self.n, 1)
        out = []
        for k in range(points):
            a = reach * k / (points - 1)
            out.append((round(a, 4), round(self.gpu_hours(a), 4)))
        return out


def _increments(block: np.ndarray, a: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    """Per block, the marginal cost of serving its k-th cheapest request (``max(sum a, sum b)`` over the k cheapest by
    each key is a lower bound on any k requests and is convex in k); all blocks' increments, sorted."""
    if a.size == 0:
        return np.zeros(0)
    order_a = np.lexsort((a, block))
    blk = block[order_a]
    cum_a = _group_cumsum(blk, a[order_a])
    if b is None:
        g = cum_a
    else:
        order_b = np.lexsort((b, block))
        cum_b = _group_cumsum(block[order_b], b[order_b])  # the same block order, so positions line up
        g = np.maximum(cum_a, cum_b)
    first = np.ones(blk.size, dtype=bool)
    first[1:] = blk[1:] != blk[:-1]
    inc = np.diff(g, prepend=0.0)
    inc[first] = g[first]
    out: np.ndarray = np.sort(inc)
    return out


def _presence(t: np.ndarray, window: np.ndarray, service: np.ndarray, load_s: float) -> tuple[float, np.ndarray]:
    """Seconds at least one replica must exist to serve every candidate, and the most that dropping each request can
    save (largest first).

    Only requests whose window exceeds their service by at most ``load_s`` are used: their windows chain into clusters
    in which no idle stretch can be longer than a restart, so a replica is present from the first service's latest start
    to the last service's earliest end; neighbouring clusters whose longest possible idle stretch is within a restart
    join. Between the rest a stretch costs ``min(gap, load_s)``.
    """
    use = (window - service) <= load_s
    if not use.any():
        return 0.0, np.zeros(0)
    order = np.argsort(t[use], kind="stable")
    ts, ws, ls = t[use][order], window[use][order], service[use][order]
    ends = ts + ws
    run_end = np.maximum.accumulate(ends)
    new = np.ones(ts.size, dtype=bool)
    new[1:] = ts[1:] > run_end[:-1]
    # clusters whose longest possible idle stretch between them (the next one's latest first start minus this one's
    # earliest last end) is within a restart are one stretch of presence too
    firsts = np.flatnonzero(new)
    lasts = np.append(firsts[1:] - 1, ts.size - 1)
    latest_start = ts[firsts] + ws[firsts] - ls[firsts]
    earliest_end = ts[lasts] + ls[lasts]
    joined = latest_start[1:] - earliest_end[:-1] <= load_s
    new[firsts[1:][joined]] = False
    cluster = np.cumsum(new) - 1
    k = int(cluster[-1]) + 1
    firsts = np.flatnonzero(new)
    lasts = np.append(firsts[1:] - 1, ts.size - 1)
    longest = np.zeros(k)
    np.maximum.at(longest, cluster, ls)
    span = (ts[lasts] + ls[lasts]) - (ts[firsts] + ws[firsts] - ls[firsts])
    contribution = np.maximum(span, longest)
    stops = run_end[lasts]
    gaps = np.minimum(np.maximum(ts[firsts][1:] - stops[:-1], 0.0), load_s)
    total = float(contribution.sum() + gaps.sum())
    # one dropped request can shorten a cluster by its own window, split it (losing at most a window less a restart on
    # either side) and remove its service: never more than this
    drops = np.sort(2.0 * ws + ls + 2.0 * load_s)[::-1]
    return total, drops


def _group_cumsum(block: np.ndarray, x: np.ndarray) -> np.ndarray:
    c = np.cumsum(x)
    first = np.ones(block.size, dtype=bool)
    first[1:] = block[1:] != block[:-1]
    starts = np.flatnonzero(first)
    offsets = np.repeat(np.concatenate([[0.0], c[starts[1:] - 1]]), np.diff(np.append(starts, block.size)))
    out: np.ndarray = c - offsets
    return out


def _prefix_hits(arrivals: Arrivals, idx: np.ndarray, replica: ReplicaModel) -> np.ndarray:
    """Prompt tokens a perfect prefix cache could serve: leading blocks already seen in an earlier request."""
    hits = np.zeros(idx.size)
    if arrivals.prefixes is None:
        return hits
    seen: set[int] = set()
    pos = {int(i): k for k, i in enumerate(idx)}
    for i, pre in enumerate(arrivals.prefixes):
        if not pre:
            continue
        k = pos.get(i)
        if k is not None:
            n = 0
            for b in pre:
                if b not in seen:
                    break
                n += 1
            hits[k] = min(n * replica.block_tokens, float(arrivals.prompt_tokens[i]) - 1.0)
        seen.update(pre)
    return hits
