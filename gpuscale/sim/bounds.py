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

Disaggregated serving needs a replica of each role: the prefill phase of a request (its window up to the TTFT target,
its prefill compute) holds a prefill replica, the decode phase (from the earliest end of its prefill to its deadline,
one minimal step per further token) a decode replica, so the presence bound is computed per role and the two roles'
GPUs add up. The model pays for whole nodes (free GPUs of its own nodes are charged; ``accounting``): when no other
tenant shares them, a present replica costs at least one node.

A third bound holds what the node layer cannot take back (``gpu_hours(a, hold_s=C)``): a node in use at some instant
is removed no sooner than ``C`` after that (Karpenter ``WhenEmpty`` with ``consolidateAfter: C``; C is infinite when
nothing removes nodes). In any block of time whose requests need ``W`` replica-seconds of work, at some instant at least
``ceil(W / width)`` replicas exist (an integer count whose average is ``W / width``), so from the block's end until
``C`` after its start the nodes holding them are still charged. The runner applies it per policy, only to runs whose
nodes can only leave that way (``WhenEmpty`` or none, no spot interruption, no foreign tenants).

Every policy's GPU-hours at attainment ``a`` are at least ``LowerBound.gpu_hours(a)`` (the largest of the bounds);
the property tests check it.
"""

from __future__ import annotations

import math

import numpy as np

from gpuscale.sim.replica import ReplicaModel
from gpuscale.sim.traffic import Arrivals

BIN_SECONDS = (30.0, 120.0, 600.0)
"""Block widths tried; each gives a valid bound and the largest is kept."""
HOLD_BLOCK_SECONDS = (15.0, 30.0, 60.0, 120.0)
"""Block widths of the hold bound; each gives a valid bound and the largest is kept."""


class LowerBound:
    """``gpu_hours(attainment)``: the fewest GPU-hours any schedule could spend to serve that share on time."""

    def __init__(
        self, arrivals: Arrivals, servable: np.ndarray, replica: ReplicaModel, *, ttft_slo_s: float, itl_slo_s: float,
        disaggregated: bool, gpus_per_replica: int, shortest_load_s: float, gpus_per_node: int | None = None,
        horizon_s: float | None = None,
    ) -> None:
        """``gpus_per_node``: the model pays whole nodes of this many GPUs (None: it may share them). ``horizon_s``:
        GPU time is charged at least this long (the span of arrivals), for the hold bound."""
        self.n = len(arrivals)
        idx = np.flatnonzero(servable)
        t = arrivals.arrival_s[idx]
        p = arrivals.prompt_tokens[idx].astype(float)
        o = arrivals.output_tokens[idx].astype(float)
        hit = _prefix_hits(arrivals, idx, replica)
        c = replica.cost
        uncached = np.maximum(p - hit, 1.0)
        prefill = c.token_s * uncached + c.attention_s_per_pair * (p * p - hit * hit) / 2.0
        ctx = p + o / 2.0
        fixed = c.overhead_s + c.weights_s
        decode_var = o * (c.per_seq_s + c.per_context_token_s * ctx)
        decode = decode_var + o * fixed * np.minimum(ctx / replica.kv_capacity_tokens, 1.0)
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
        min_step = c.step_s(0, 0.0, 1)  # one token's step with no KV to read
        prefill_s = c.token_s * uncached
        decode_s = np.maximum(o - 1.0, 0.0) * min_step
        g = gpus_per_replica
        node = max(gpus_per_node or g, g)
        if disaggregated:
            # a prefill replica while the prompt may be computed, a decode replica from its earliest end to the deadline
            p_window = np.minimum(window, ttft_slo_s)
            self._presence = [
                _presence(t, p_window, prefill_s, shortest_load_s),
                _presence(t + prefill_s, window - prefill_s, decode_s, shortest_load_s),
            ]
        else:
            self._presence = [_presence(t, window, prefill_s + decode_s, shortest_load_s)]
        self._gpus = g
        self._node = node
        self._candidates = idx.size
        # hold bound: per block, the replica-seconds of requests whose window lies inside it (sorted, largest first)
        self._horizon = horizon_s if horizon_s is not None else (float(t.max()) if t.size else 0.0)
        costs = [(prefill + decode) / 1.0] if disaggregated else [prefill + decode_var, decode]
        self._hold_blocks = [_hold_blocks(t, window, costs, w) for w in HOLD_BLOCK_SECONDS]

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

    def gpu_hours(self, attainment: float, hold_s: float = 0.0) -> float:
        """Lower bound on GPU-hours for ``attainment`` (share of all arrived requests on time). ``hold_s``: nodes stay
        at least this long after their last use (the hold bound; 0 leaves it out)."""
        target = int(np.ceil(attainment * self.n - 1e-9))
        if target <= 0:
            return 0.0
        dropped = max(self._candidates - target, 0)
        present = [max(total - float(np.sum(drops[:dropped])), 0.0) for total, drops in self._presence]
        # GPUs of the replicas present add up; a present replica also holds a whole node
        best = max(self._gpus * sum(present), self._node * max(present))
        if hold_s > 0:
            best = max(best, max(self._hold(blocks, w, dropped, hold_s) for blocks, w in zip(
                self._hold_blocks, HOLD_BLOCK_SECONDS, strict=True)))
        for inc, free in self._increments:
            need = target - free
            if need <= 0:
                continue
            if need > inc.size:
                return float("inf")
            best = max(best, float(np.sum(inc[:need])))
        return best / 3600.0

    def _hold(self, blocks: list[tuple[int, list[np.ndarray]]], width: float, dropped: int, hold_s: float) -> float:
        """GPU-seconds the nodes of each block's peak stay charged after it (``hold_s`` after the block's start)."""
        if not blocks or self._horizon <= 0:
            return 0.0
        n_blocks = int(np.ceil(self._horizon / width))
        charged = np.zeros(n_blocks + 1)
        for b, cums in blocks:
            # dropping requests removes at most the ``dropped`` largest costs of the block, from each kind of work
            work = max(float(c[-1] - c[min(dropped, c.size - 1)]) for c in cums)
            need = int(np.ceil(work / width - 1e-9))
            if need <= 0 or b >= n_blocks:
                continue
            gpus = need * self._gpus
            charged[b] = math.ceil(gpus / self._node) * self._node if self._node > self._gpus else gpus
        held = np.zeros(n_blocks)
        # block j is charged from its start to its end if some earlier block b ended by then and b's start + hold_s
        # reaches past block j's end
        span = n_blocks if math.isinf(hold_s) else math.floor(hold_s / width)
        for lag in range(1, min(span, n_blocks) + 1):
            # b = j - lag, needs b's start + hold >= j's end: (j - lag) * w + hold >= (j + 1) * w
            if (lag + 1) * width > hold_s:
                break
            held[lag:] = np.maximum(held[lag:], charged[: n_blocks - lag])
        widths = np.full(n_blocks, width)
        widths[-1] = self._horizon - width * (n_blocks - 1)
        return float(np.sum(held * widths))

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


def _hold_blocks(
    t: np.ndarray, window: np.ndarray, costs: list[np.ndarray], width: float,
) -> list[tuple[int, list[np.ndarray]]]:
    """Per block of ``width`` seconds holding whole request windows: its index and, per kind of work, the cumulative
    sums of its requests' costs, largest first, with a leading zero (so ``c[-1] - c[k]`` is the work left after
    dropping the ``k`` largest)."""
    if t.size == 0:
        return []
    start = np.floor(t / width)
    inside = np.floor((t + window) / width) == start
    if not inside.any():
        return []
    blk = start[inside].astype(np.int64)
    order = np.argsort(blk, kind="stable")
    blk = blk[order]
    cuts = np.flatnonzero(np.diff(blk)) + 1
    out: list[tuple[int, list[np.ndarray]]] = []
    parts = [np.split(c[inside][order], cuts) for c in costs]
    for k, b in enumerate(np.split(blk, cuts)):
        cums = [np.concatenate([[0.0], np.cumsum(np.sort(p[k])[::-1])]) for p in parts]
        out.append((int(b[0]), cums))
    return out


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
