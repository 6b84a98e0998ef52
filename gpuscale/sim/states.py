"""Every state, flag and outcome code of the simulator, one enum each, so a name never means two things.

Per-request codes are ``IntEnum``/``IntFlag``: the outcome arrays stay plain ``int8`` numpy arrays and the hot path
compares plain ints taken from the members, while code and results read names. Node and replica states are plain
``Enum``s: nothing counts with them, and a node state never compares equal to a replica state.
"""

from __future__ import annotations

from enum import Enum, IntEnum, IntFlag


class RequestState(IntEnum):
    """Where a request is inside the serving path."""

    WAITING = 0
    """In an engine's queue, not yet scheduled."""
    PREFILL = 1
    """Prompt being computed in chunks."""
    TRANSFER = 2
    """Prefill done on a prefill-only engine; KV moving to a decode engine."""
    DECODING = 3
    """In the running batch, one token per step."""
    DONE = 4
    """Every output token produced."""
    DROPPED = 5
    """Gone: timed out, rejected or lost; nothing runs for it any more."""


class Outcome(IntEnum):
    """How a request ended (``RequestLedger.status``); every arrived request ends in exactly one of these."""

    IN_SYSTEM = 0
    COMPLETED = 1
    TIMED_OUT = 2
    """No first token before the client's timeout."""
    REJECTED = 3
    """Prompt plus output longer than the model's context or the replica's KV (HTTP 400)."""
    LOST = 4
    """Aborted in flight (eviction, drain cut short, spot interruption, end of the drain), or refused a connection
    because no replica stood behind the Service (a model at zero without a front door)."""
    REFUSED = 5
    """Answered 503 with ``Retry-After`` by the front door: its hold limit ran out or its queue was at the bound."""


OUTCOME_NAMES: dict[int, str] = {
    Outcome.IN_SYSTEM: "unfinished", Outcome.COMPLETED: "completed", Outcome.TIMED_OUT: "timed_out",
    Outcome.REJECTED: "rejected", Outcome.LOST: "lost", Outcome.REFUSED: "refused",
}


class LossReason(IntEnum):
    """Why a request in flight was aborted (kept per request, read by the miss breakdown)."""

    NONE = 0
    EVICTION = 1
    """Its replica was evicted by consolidation."""
    DRAIN = 2
    """Its replica was scaled down and the drain budget ran out."""
    INTERRUPTION = 3
    """Its node was reclaimed (spot interruption)."""
    RUN_END = 4
    """Still running when the drain after the last arrival hit its bound."""
    NO_ENDPOINT = 5
    """Arrived while no replica was ready and nothing held it: the Service had no endpoint (connection refused)."""


class MissCause(IntEnum):
    """Why a request missed its SLO; exactly one per missed request (``docs/simulator.md``, accounting)."""

    REJECTED = 0
    """Longer than the model's context or a replica's KV."""
    INFEASIBLE = 1
    """Misses TTFT or ITL even alone on an idle replica."""
    QUEUEING = 2
    """Ready replicas were there but too few or too loaded (queueing, batching)."""
    COLD_START = 3
    """It arrived while no replica was ready, or while replicas the autoscaler had asked for were still starting."""
    EVICTION = 4
    """Its replica was evicted under it."""
    LOST_IN_FLIGHT = 5
    """Aborted in flight: a drain cut short, a spot interruption or the end of the run."""


MISS_CAUSE_NAMES: dict[int, str] = {
    MissCause.REJECTED: "rejected", MissCause.INFEASIBLE: "infeasible", MissCause.QUEUEING: "queueing",
    MissCause.COLD_START: "cold_start", MissCause.EVICTION: "eviction", MissCause.LOST_IN_FLIGHT: "lost_in_flight",
}


class RequestFlag(IntFlag):
    """What happened to a request on its way (``RequestLedger.flags``), read by the miss breakdown."""

    HELD = 1
    """Held at the gateway or front door: no replica of its role was ready."""
    STARTING = 2
    """Replicas the autoscaler had asked for were still starting when it arrived."""
    EVICTED = 4
    """Its replica was evicted (or its node reclaimed) under it."""


class EngineMode(IntEnum):
    """What a vLLM engine's step loop is doing."""

    IDLE = 0
    STEP = 1
    """One scheduled step (prefill chunks, with or without decodes) in flight."""
    RUN = 2
    """A run of pure decode steps in flight (one event until the next completion)."""


class ReplicaState(Enum):
    PENDING = 0
    """Created; some pods not yet bound."""
    LOADING = 1
    """Every pod bound: image pull, weights, engine init."""
    SERVING = 2
    DRAINING = 3
    """Scaled down: no new requests, in-flight ones finish or are lost at the drain budget."""
    GONE = 4


class NodeState(Enum):
    PROVISIONING = 0
    READY = 1
    GONE = 2
