"""The request path: arrivals, the router in front of each role, the gateway queue, and P/D KV transfers.

* A request longer than the model's context or a replica's KV is rejected (HTTP 400).
* Prefill (or aggregated) routing: fewest outstanding requests; with ``cache-aware`` routing and prefix ids, what the
  emitted vLLM Router's ``cache_aware`` policy does (``gpuscale.manifests.router.PREFILL_POLICY``), by request count:
  when the loads are imbalanced (the most loaded replica has more than ``BALANCE_ABS_THRESHOLD`` requests above the
  least and more than ``BALANCE_REL_THRESHOLD`` times its load), the least loaded replica; otherwise the replica with
  the longest cached prefix if more than ``CACHE_THRESHOLD`` of the prompt matches, else the least loaded
  (vllm-project/router ``src/policies/cache_aware.rs``, ``select_worker_cache_aware_with_decision``; the thresholds are
  ``CacheAwareConfig::default`` in ``src/policies/mod.rs``; the router's load is its count of requests in flight, the
  engine's waiting and running requests here). The router's approximate prefix tree is modelled by what the replica's
  cache holds. ``cache-aware-work`` is the pick the router does not offer, kept as the named alternative
  ``bench/prefix_routing.py`` measures: the replica that would finish the request's prefill first, the fewest
  scheduler steps to compute its prefill backlog plus this request's uncached tokens there (``work_steps``), so a long
  prompt is not sent behind another long prompt because both count as one request.
* Decode routing: fewest waiting, then least KV; or ``power-of-two`` (two random replicas, the less loaded).
* No replica ready: with a front door (``Variant.front_door``) the door holds the request up to its hold limit, or
  answers 503 with ``Retry-After`` at once when its queue is at the bound, or when the limit runs out (the wake ran
  late). Without one, an ideal gateway holds it until a replica is ready or the client's timeout (``at_zero: hold``),
  or the Service has no endpoint and the connection is refused (``at_zero: connection-refused``).
* P/D: a prefill-only engine frees the prompt's KV and the blocks move to the decode side over the prefill replica's
  network (EFA or TCP: its GPUs' share of the node's bandwidth from the catalogue), shared fairly by the replica's
  concurrent transfers (processor sharing); then the request is routed to a decode replica.
* The API server: a request the router sends to its first role reaches that replica's engine
  ``perf.request_overhead_s()`` later (HTTP, tokenisation, the hand-over to the engine core: the delay the replica
  model's clients pay, ``replica_load``), so its TTFT counts it as a client's does. A replica that stops being ready
  within that window never sees the request: it is routed again (``_admit``). The P/D hand-over to decode pays none
  (the decode side's first token is the KV transfer plus one step).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Protocol, TypeVar

from gpuscale import perf
from gpuscale.sim.accounting import RequestLedger
from gpuscale.sim.context import RunContext
from gpuscale.sim.events import Environment
from gpuscale.sim.pods import Replica, RoleGroup
from gpuscale.sim.states import LossReason, RequestFlag
from gpuscale.sim.vllm_engine import DROPPED, Engine, Request, hit_of

CACHE_THRESHOLD = 0.5
"""vLLM Router ``cache_aware`` (``CacheAwareConfig::default``): route by prefix match when more than this share of the
prompt matches;"""
BALANCE_ABS_THRESHOLD = 32
BALANCE_REL_THRESHOLD = 1.1
"""... unless the loads are imbalanced: ``max - min > BALANCE_ABS_THRESHOLD`` and ``max > BALANCE_REL_THRESHOLD x min``
(then the least loaded)."""
HELD, STARTING, EVICTED = int(RequestFlag.HELD), int(RequestFlag.STARTING), int(RequestFlag.EVICTED)
"""``RequestFlag`` as plain ints (the per-request flag list is read and or-ed on every arrival)."""


class Owners(Protocol):
    """The ReplicaSet, as the request path sees it."""

    def owner_of(self, engine: Engine) -> Replica | None: ...
    def on_drained(self, engine: Engine) -> None: ...


class Capacity(Protocol):
    """The node provisioner: a placeholder asks for a replica's worth of nodes (``Variant.prewarm``)."""

    def prewarm(self) -> None: ...


class Transfer:
    __slots__ = ("left", "req")

    def __init__(self, left: float, req: Request) -> None:
        self.left = left
        """Bytes still to send."""
        self.req = req


class Link:
    """One prefill replica's network, shared by the transfers leaving it (processor sharing)."""

    __slots__ = ("active", "bytes_per_s", "gen", "last_t")

    def __init__(self, bytes_per_s: float) -> None:
        self.bytes_per_s = bytes_per_s
        self.active: list[Transfer] = []
        self.last_t = 0.0
        self.gen = 0


class Router:
    """Routes requests to engines and implements the engines' sink."""

    def __init__(self, ctx: RunContext, env: Environment, ledger: RequestLedger, roles: list[RoleGroup]) -> None:
        self.ctx = ctx
        a = ctx.arrivals
        self._t = a.arrival_s.tolist()
        self._p = a.prompt_tokens.tolist()
        self._o = a.output_tokens.tolist()
        self._pre = a.prefixes
        self.first_role: RoleGroup = roles[0]
        self.decode_role: RoleGroup | None = next((r for r in roles if r.name == "decode"), None)
        self.rng = random.Random(f"{ctx.seed}/router")
        self.retried = 0
        self.links: dict[int, Link] = {}
        s = ctx.setup
        self._link_bytes_per_s = s.kv_link_bytes_per_s
        self.cache_aware = s.prefill_routing == "cache-aware" and self._pre is not None
        self.cache_aware_work = s.prefill_routing == "cache-aware-work" and self._pre is not None
        self.power_of_two = s.decode_routing == "power-of-two"
        self._fit = s.replica.fits(a.prompt_tokens, a.output_tokens).tolist()
        """Per arrival, whether it is accepted at all (the replica model's rule, asked once for the whole trace)."""
        self._timeout = s.request_timeout_s
        self.door = ctx.variant.front_door
        self.door_held: set[int] = set()
        """Requests the front door holds (their hold limit is armed)."""
        self.prewarmed = False
        """A placeholder asked for capacity for this wake (``Variant.prewarm``)."""
        self._timeouts = a.timeouts_s
        self._kv_bytes_per_token = s.replica.kv_bytes_per_token
        self._block_tokens = s.replica.block_tokens
        self._env = env
        self._acct = ledger
        self._api_server_s = perf.request_overhead_s()
        """Router to engine submit, first role only (the module's "API server")."""
        self._owners: Owners
        self._capacity: Capacity

    def connect(self, owners: Owners, capacity: Capacity) -> None:
        self._owners, self._capacity = owners, capacity

    # ------------------------------------------------------------------ arrivals

    def start(self) -> None:
        self._env.stream(self._t, self._arrive)  # each arrival at PRIORITY_ARRIVAL, without an event apiece

    def _arrive(self, i: int) -> None:
        t = self._t[i]
        timeout = self._timeouts.get(i, self._timeout) if self._timeouts else self._timeout
        acct = self._acct
        acct.arrive()
        if not self._fit[i]:  # longer than the context or a replica's KV: HTTP 400
            acct.reject(i, t)
            return
        req = Request(i, t, self._p[i], self._o[i], t + timeout, self._pre[i] if self._pre is not None else None)
        role = self.first_role
        if len(role.ready) < len(role.replicas) or not role.ready:  # replicas asked for are still starting
            acct.flags[i] |= STARTING
        self.route(role, req)

    def route(self, role: RoleGroup, req: Request) -> None:
        ready = role.ready
        if not ready:
            self._acct.flags[req.rid] |= HELD
            if role is self.first_role:
                if self.door is not None:
                    self._hold_at_door(role, req)
                    return
                if self.ctx.variant.at_zero == "connection-refused":
                    self.lose(req, LossReason.NO_ENDPOINT)
                    return
            role.gateway.append(req)
            return
        if len(ready) == 1:
            best = ready[0]
        elif role.does_prefill:
            best = self._pick_prefill(ready, req)
        else:
            best = self._pick_decode(ready)
        self._hand_over(role, best, req)

    def _hand_over(self, role: RoleGroup, rep: Replica, req: Request) -> None:
        """Submit ``req`` to ``rep``'s engine: through the API server's overhead for the first role, at once for the
        P/D hand-over to decode."""
        assert rep.engine is not None
        if role is self.first_role and self._api_server_s > 0:
            rep.in_transit += 1
            rep.transit_tokens += req.target
            self._env.at(self._env.now + self._api_server_s, self._admit, role, rep, req)
        else:
            rep.engine.submit(req)

    def _admit(self, role: RoleGroup, rep: Replica, req: Request) -> None:
        """The API server hands ``req`` to ``rep``'s engine, or back to the router if ``rep`` stopped being ready
        (drained, evicted, gone) while the request was on its way."""
        rep.in_transit -= 1
        rep.transit_tokens -= req.target
        if req.state == DROPPED:
            return
        if rep.engine is None or rep not in role.ready:
            self.route(role, req)
            return
        rep.engine.submit(req)

    def _pick_decode(self, ready: list[Replica]) -> Replica:
        """Fewest waiting, then least KV: of two at random (``power-of-two``) or of all; a lazy decode engine is read as
        of now (``Engine.sync``)."""
        now = self._env.now
        if self.power_of_two:
            a, b = two_at_random(self.rng, ready)
            ea, eb = a.engine, b.engine
            assert ea is not None and eb is not None
            ea.sync(now)
            eb.sync(now)
            wa, wb = len(ea.waiting), len(eb.waiting)  # _decode_load's order, without its tuples
            return a if wa < wb or (wa == wb and ea.kv_used <= eb.kv_used) else b
        for rep in ready:
            if rep.engine is not None:
                rep.engine.sync(now)
        return min(ready, key=_decode_load)

    def _pick_prefill(self, ready: list[Replica], req: Request) -> Replica:
        if not self.cache_aware_work:
            return self._pick_by_requests(ready, req) if self.cache_aware else _least_requests(ready)
        best, fewest = ready[0], math.inf
        # the most a hit can save: every block the request names (vLLM recomputes at least the last token)
        floor = req.target - hit_of(req, len(req.prefix), self._block_tokens) if req.prefix else req.target
        for rep in ready:
            e = rep.engine
            assert e is not None
            budget = e.m.step_token_budget - e.n_dec
            if (e.backlog + rep.transit_tokens + floor) / (budget if budget > 1 else 1) >= fewest:
                continue  # cannot beat the best even with a full hit: skip its cache look-up (same pick)
            steps = work_steps(e, req) + rep.transit_tokens / (budget if budget > 1 else 1)
            if steps < fewest:
                best, fewest = rep, steps
        return best

    def _pick_by_requests(self, ready: list[Replica], req: Request) -> Replica:
        """vLLM Router's ``cache_aware`` pick (module docstring): request counts, then the longest cached prefix."""
        loads = [_prefill_load(r) for r in ready]
        low, high = min(loads), max(loads)
        least = ready[loads.index(low)]  # Rust's ``min_by_key``: the first of equals
        if req.prefix is None or (high - low > BALANCE_ABS_THRESHOLD and high > low * BALANCE_REL_THRESHOLD):
            return least
        best, hit = least, 0
        for r in ready:
            assert r.engine is not None
            h = r.engine.cached_prefix_blocks(req.prefix)
            if h > hit:
                best, hit = r, h
        return best if hit * self.ctx.setup.replica.block_tokens > CACHE_THRESHOLD * req.prompt else least

    # ------------------------------------------------------------------ front door

    def _hold_at_door(self, role: RoleGroup, req: Request) -> None:
        """Hold ``req`` at the door while the model wakes: 503 at once when the queue is at its bound, else until a
        replica is ready or the hold limit (from the request's arrival) runs out."""
        door = self.door
        assert door is not None
        if len(role.gateway) >= door.queue_bound:
            self.refuse(req)
            return
        role.gateway.append(req)
        self.door_held.add(req.rid)
        self._env.at(max(self._env.now, req.arrival + door.hold_limit_s), self._hold_expired, role, req)
        if self.ctx.variant.prewarm and not self.prewarmed and not role.replicas:
            self.prewarmed = True
            self._capacity.prewarm()

    def _hold_expired(self, role: RoleGroup, req: Request) -> None:
        if req.rid not in self.door_held:
            return
        self.door_held.discard(req.rid)
        role.gateway.remove(req)
        self.refuse(req)

    def refuse(self, req: Request) -> None:
        """503 with ``Retry-After`` from the front door."""
        req.state = DROPPED
        self._acct.refused(req.rid, self._env.now)

    def flush_gateway(self, role: RoleGroup) -> None:
        t = self._env.now
        gw = role.gateway
        if role.ready:
            self.prewarmed = False
        while gw and role.ready:
            req = gw.popleft()
            self.door_held.discard(req.rid)
            if req.deadline < t and req.first_t is None:
                self.on_timeout(req, t)
            else:
                self.route(role, req)

    def purge_gateway(self, role: RoleGroup, t: float) -> int:
        gw = role.gateway
        while gw and gw[0].deadline < t and gw[0].first_t is None:
            req = gw.popleft()
            self.door_held.discard(req.rid)
            self.on_timeout(req, t)
        return len(gw)

    # ------------------------------------------------------------------ losses

    def route_first(self, req: Request) -> None:
        self.route(self.first_role, req)

    def lose(self, req: Request, reason: LossReason) -> None:
        req.state = DROPPED
        self._acct.lost(req.rid, reason, self._env.now)

    def aborted(self, req: Request, reason: LossReason) -> None:
        """A request in flight on an engine that was killed: the client retries (when allowed) or it is lost."""
        if reason in (LossReason.EVICTION, LossReason.INTERRUPTION):
            self._acct.flags[req.rid] |= EVICTED
        if self.ctx.variant.retry_evicted and req.deadline >= self._env.now:
            self.retried += 1
            req.first_t = None
            req.prefilled = 0
            req.target = req.prompt
            req.generated = 0
            self._acct.first[req.rid] = math.nan
            self.route(self.first_role, req)
        else:
            self.lose(req, reason)

    # ------------------------------------------------------------------ engine sink

    def on_first_token(self, req: Request, t: float) -> None:
        req.first_t = t
        self._acct.first[req.rid] = t

    def on_done(self, req: Request, t: float) -> None:
        self._acct.completed(req.rid, t)

    def on_timeout(self, req: Request, t: float) -> None:
        req.state = DROPPED
        self._acct.timed_out(req.rid, t)

    def on_drained(self, engine: Engine) -> None:
        self._owners.on_drained(engine)

    def on_prefill_done(self, req: Request, t: float, engine: Engine) -> None:
        rep = self._owners.owner_of(engine)
        nbytes = float(req.prompt * self._kv_bytes_per_token)
        if rep is None:  # the prefill replica is already gone: no contention to model
            self._env.at(t + nbytes / self._link_bytes_per_s, self._handoff, req)
            return
        link = self.links.get(rep.rid)
        if link is None:
            link = self.links[rep.rid] = Link(self._link_bytes_per_s)
        if not link.active:  # the common case: an idle link, no sharing to account for
            link.last_t = t
            link.active.append(Transfer(nbytes, req))
            link.gen += 1
            self._env.at(t + nbytes / link.bytes_per_s, self._link_done, rep.rid, link.gen)
            return
        self._advance(link, t)
        link.active.append(Transfer(nbytes, req))
        self._schedule_link(link, rep.rid)

    # ------------------------------------------------------------------ KV transfer

    def _advance(self, link: Link, t: float) -> None:
        n = len(link.active)
        if n:
            sent = (t - link.last_t) * link.bytes_per_s / n
            for tr in link.active:
                tr.left -= sent
        link.last_t = t

    def _schedule_link(self, link: Link, nid: int) -> None:
        link.gen += 1
        if not link.active:
            return
        n = len(link.active)
        first = min(tr.left for tr in link.active)
        self._env.at(link.last_t + max(first, 0.0) * n / link.bytes_per_s, self._link_done, nid, link.gen)

    def _link_done(self, nid: int, gen: int) -> None:
        link = self.links[nid]
        if gen != link.gen:
            return
        self._advance(link, self._env.now)
        active = link.active
        if len(active) == 1 and active[0].left <= 1.0:  # the common case: the link's only transfer is done
            link.active = []
            self._handoff(active[0].req)
        else:
            link.active = [tr for tr in active if tr.left > 1.0]
            for tr in active:
                if tr.left <= 1.0:
                    self._handoff(tr.req)
        self._schedule_link(link, nid)

    def _handoff(self, req: Request) -> None:
        if req.state == DROPPED:
            return
        now = self._env.now
        if req.deadline < now:
            self.on_timeout(req, now)
            return
        assert self.decode_role is not None
        self.route(self.decode_role, req)


_T = TypeVar("_T")
SAMPLE_POOL_MAX = 21
"""``random.Random.sample`` draws two from a copied pool up to this population size, by rejection above it."""


def two_at_random(rng: random.Random, ready: list[_T]) -> tuple[_T, _T]:
    """Two distinct replicas: the pair ``rng.sample(ready, 2)`` returns, from the same draws (CPython's algorithm for
    two, which a test pins), without its generic checks and copy on every decode routing."""
    n = len(ready)
    # what randrange(n) returns for n > 0 (CPython calls it after its argument checks); typeshed leaves it out
    below: Callable[[int], int] = rng._randbelow  # type: ignore[attr-defined]
    i = below(n)
    if n <= SAMPLE_POOL_MAX:  # the pool: the last replica moves into the first pick's place
        j = below(n - 1)
        return ready[i], ready[n - 1 if j == i else j]
    j = below(n)
    while j == i:
        j = below(n)
    return ready[i], ready[j]


def _prefill_load(rep: Replica) -> int:
    """Outstanding requests: in the engine, and on their way to it (``Replica.in_transit``)."""
    e = rep.engine
    return len(e.waiting) + len(e.prefilling) + e.n_dec + rep.in_transit if e is not None else 1 << 30


def _least_requests(ready: list[Replica]) -> Replica:
    """The replica with the fewest outstanding requests (the first of equals; ``_prefill_load`` inlined)."""
    least, low = ready[0], 1 << 62
    for rep in ready:
        e = rep.engine
        load = len(e.waiting) + len(e.prefilling) + e.n_dec + rep.in_transit if e is not None else 1 << 30
        if load < low:
            least, low = rep, load
    return least


def work_steps(e: Engine, req: Request) -> float:
    """Scheduler steps ``e`` needs to compute its prefill backlog and ``req``'s uncached prompt tokens: vLLM's step
    budget is ``max_num_batched_tokens`` per in-flight micro-batch (``ReplicaModel.step_token_budget``) minus one
    token per running decode (``vllm/v1/core/sched/scheduler.py`` schedules the running requests first), so the decode
    load a replica carries slows its prefill."""
    budget = e.m.step_token_budget - e.n_dec
    return (e.backlog + e.uncached_tokens(req)) / (budget if budget > 1 else 1)


def _decode_load(rep: Replica) -> tuple[int, int]:
    e = rep.engine
    return (len(e.waiting), e.kv_used) if e is not None else (1 << 30, 0)
