"""The serving side's mutable records: pods, replicas and each role's group (what the actors share, no behaviour).

A replica's ``state`` and ``evicted`` and a pod's ``node`` tell the replica's watch before they change, so the GPU-time
ledger sees every change without any actor having to report it (``accounting.GpuLedger``).
"""

from __future__ import annotations

from collections import deque

from gpuscale.sim.inputs import RoleSetup
from gpuscale.sim.nodes import UNWATCHED, Node, StateWatch, Watched
from gpuscale.sim.policies import RoleObservation
from gpuscale.sim.states import ReplicaState
from gpuscale.sim.vllm_engine import Engine, Request


class Pod:
    __slots__ = ("_node", "gpus", "pull_done_at", "watch")
    node = Watched[Node | None]()
    """The node the pod is bound to (its GPUs are the replica's), or None while it is pending."""

    def __init__(self, gpus: int, watch: StateWatch = UNWATCHED) -> None:
        self.gpus = gpus
        self.watch = watch
        self._node: Node | None = None
        self.pull_done_at = 0.0


class CounterSample:
    """One scrape of an engine's counters and histogram sums (for ``rate()``)."""

    __slots__ = ("done", "done_prompt", "generation", "itl_count", "itl_sum", "prompt", "queue_sum", "t")

    def __init__(
        self, t: float, prompt: int, generation: int, done: int = 0, done_prompt: int = 0, queue_sum: float = 0.0,
        itl_sum: float = 0.0, itl_count: int = 0,
    ) -> None:
        self.t = t
        self.prompt = prompt
        self.generation = generation
        self.done = done
        self.done_prompt = done_prompt
        self.queue_sum = queue_sum
        self.itl_sum = itl_sum
        self.itl_count = itl_count


class Replica:
    __slots__ = (
        "_evicted", "_state", "counter_samples", "created_at", "duty_mark", "duty_mark_t", "engine", "gen", "in_transit",
        "loads", "pods", "ready_at", "rid", "role", "transit_tokens", "watch",
    )

    state = Watched[ReplicaState]()
    evicted = Watched[bool]()
    """Reloading after an eviction (its GPU time is the eviction's cost)."""

    def __init__(
        self, rid: int, role: RoleGroup, pods: int, gpus_per_pod: int, t: float, watch: StateWatch = UNWATCHED,
    ) -> None:
        self.watch = watch
        self.rid = rid
        self.role = role
        self.state = ReplicaState.PENDING
        self.pods = [Pod(gpus_per_pod, watch) for _ in range(pods)]
        self.engine: Engine | None = None
        self.created_at = t
        self.ready_at = 0.0
        self.gen = 0
        """Bumped on every state change, so stale scheduled callbacks can be ignored."""
        self.evicted = False
        self.loads = 0
        self.in_transit = 0
        """Requests the router sent that are still in the API server (``Router._hand_over``): counted by its pick, as
        vLLM Router counts a request from the moment it routes it, or a burst within the overhead would all see the
        same loads and go to one replica."""
        self.transit_tokens = 0
        """Their prompt tokens (the work pick's share of them)."""
        self.duty_mark = 0.0
        self.duty_mark_t = t
        self.counter_samples: deque[CounterSample] = deque()

    def bound_gpus(self) -> int:
        return sum(p.gpus for p in self.pods if p.node is not None)


class RoleGroup:
    """One role's replicas, its gateway queue and its last observation."""

    __slots__ = ("desired", "does_decode", "does_prefill", "gateway", "name", "obs", "ready", "replicas", "series", "setup")

    def __init__(self, setup: RoleSetup) -> None:
        self.name = setup.role
        self.setup = setup
        self.replicas: list[Replica] = []
        """Replicas the workload counts (not draining)."""
        self.ready: list[Replica] = []
        """Serving and routable."""
        self.gateway: deque[Request] = deque()
        """Requests held because no replica of this role is ready."""
        self.desired = 0
        self.does_prefill = setup.role in ("aggregated", "prefill")
        self.does_decode = setup.role in ("aggregated", "decode")
        self.obs = RoleObservation(setup.role, 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0)
        self.series: dict[str, list[float | int | None]] = {k: [] for k in ("desired", "ready", "queue", "duty", "kv")}
