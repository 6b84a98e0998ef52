"""Layer 1 in a run: the pool's nodes, the provisioner that launches them and the disruption that removes them.

Three sources of node events, all through ``disrupt(node, reason, grace_s)``:

* consolidation (``nodes.consolidation_candidate``), polled every 10 s, ``budget_nodes`` per poll, no grace;
* spot interruptions: each spot node draws its interruption time from an exponential at the configured rate; on the
  two-minute notice Karpenter cordons and drains the node (replacement capacity is asked for at once);
* headroom (``Variant.headroom``, a CapacityBuffer or placeholder pods): spare nodes for ``pods`` virtual pods exist
  from the start; every provisioning pass (a pending real pod, or the buffer controller's resync) launches nodes for
  the virtual pods that no longer fit beside the real ones, and a node hosting a virtual pod is not empty-consolidated;
* drift (``Variant.drift``): every node drifts at once; one at a time (the budget) Karpenter launches a replacement, waits
  for it, and drains the old node: without ``terminationGracePeriod`` a node is a candidate while each of its pods' PDBs
  allows a disruption, and its pods are evicted one at a time as their PDBs allow (the eviction API); with one, the
  pods are deleted regardless once the grace period forces it.
"""

from __future__ import annotations

import random
from typing import Protocol

from gpuscale.sim import placement
from gpuscale.sim.context import Log, RunContext
from gpuscale.sim.events import PRIORITY_CONTROL, Environment
from gpuscale.sim.nodes import UNWATCHED, Node, StateWatch, consolidation_candidate
from gpuscale.sim.pods import Pod, Replica
from gpuscale.sim.states import LossReason, NodeState

GONE, READY = NodeState.GONE, NodeState.READY


class PendingPods(Protocol):
    """The layer-2 scheduler, as the provisioner sees it."""

    def unbound_needs(self) -> list[int]: ...
    def schedule(self) -> None: ...


class Workloads(Protocol):
    """The ReplicaSet, as disruption sees it: who runs on a node, and the eviction API."""

    def on_node(self, node: Node) -> list[tuple[Replica, Pod]]: ...
    def evict(self, rep: Replica, reason: LossReason, grace_s: float) -> None: ...


class NodeLayer:
    """The model's GPU nodes and the controllers that add and remove them."""

    def __init__(self, ctx: RunContext, env: Environment, log: Log, watch: StateWatch = UNWATCHED) -> None:
        self.ctx = ctx
        self.env = env
        self._log = log
        self._watch = watch
        self.nodes: list[Node] = []
        self.rng = random.Random(f"{ctx.seed}/nodes")
        self.rng_spot = random.Random(f"{ctx.seed}/spot")
        self.rng_buffer = random.Random(f"{ctx.seed}/buffer")
        self.buffer_pending = False
        """A resync pass of the CapacityBuffer controller is in its batch window."""
        self._nid = 0
        self.decision_pending = False
        self.demand_since: float | None = None
        self.last_scale_up_t = -float("inf")
        self.launched = self.terminated = self.max_nodes = self.interruptions = 0
        self.ready_latencies: list[float] = []
        self.drifted: list[Node] = []
        self.replacing = 0
        self._pods: PendingPods
        self._workloads: Workloads

    def connect(self, pods: PendingPods, workloads: Workloads) -> None:
        self._pods, self._workloads = pods, workloads

    # ------------------------------------------------------------------ start

    def start(self) -> None:
        for spec in self.ctx.setup.extra_nodes:
            node = self.new_node(0.0, foreign=spec.foreign_gpus)
            node.state, node.ready_at = READY, 0.0
        if self.ctx.variant.consolidation.policy != "none":
            self.env.at(self.ctx.variant.consolidation.poll_s, self._consolidate, priority=PRIORITY_CONTROL)
        if self.ctx.variant.provisioner.scan_interval_s > 0:
            self.env.at(self.ctx.variant.provisioner.scan_interval_s, self._ca_scan, priority=PRIORITY_CONTROL)
        if self.ctx.variant.drift is not None:
            self.env.at(self.ctx.variant.drift.at_s, self._drift_start, priority=PRIORITY_CONTROL)
        headroom = self.ctx.variant.headroom
        if headroom is not None:
            self._spare_at_start()
            self.env.at(headroom.resync_s, self._buffer_resync, priority=PRIORITY_CONTROL)

    def warm_node(self) -> Node:
        """A node up since before the run, image (and weights, when cacheable) already local."""
        node = self.new_node(0.0)
        node.state, node.ready_at, node.pull_done_at = READY, 0.0, 0.0
        node.weights_cached = self.ctx.startup.local_weights_s is not None
        self._arm_spot(node)
        return node

    def new_node(self, requested_at: float, foreign: int = 0) -> Node:
        self._nid += 1
        node = Node(self._nid, self.ctx.setup.gpus_per_node, requested_at, foreign=foreign, watch=self._watch)
        self.nodes.append(node)
        self.max_nodes = max(self.max_nodes, len(self.nodes))
        return node

    # ------------------------------------------------------------------ provisioning

    def demand(self) -> None:
        """Pods are pending: Karpenter reacts to the watch at once; Cluster Autoscaler waits for its scan."""
        if self.demand_since is None:
            self.demand_since = self.env.now
        prov = self.ctx.variant.provisioner
        if prov.scan_interval_s == 0 and not self.decision_pending:
            self.decision_pending = True
            self.env.after(prov.sample_launch_delay(self.rng), self._provision)

    def demand_met(self) -> None:
        """No pod is pending: the next demand starts a new wait (what node-ready latencies count from)."""
        self.demand_since = None

    def _ca_scan(self) -> None:
        if not self.decision_pending and self._pods.unbound_needs():
            self.decision_pending = True
            self.env.after(self.ctx.variant.provisioner.sample_launch_delay(self.rng), self._provision)
        self.env.at(self.env.now + self.ctx.variant.provisioner.scan_interval_s, self._ca_scan, priority=PRIORITY_CONTROL)

    def _provision(self) -> None:
        s = self.ctx.setup
        self.decision_pending = False
        now = self.env.now
        needs = self._pods.unbound_needs()
        if not needs:
            return
        left = placement.unplaced(needs + self._virtual_needs(), self._capacities())
        if not left:
            return
        k = placement.nodes_for(left, s.gpus_per_node)
        room = (s.pool_gpu_limit - sum(n.gpus for n in self.nodes if n.state != GONE)) // s.gpus_per_node
        k = min(k, max(room, 0))
        if k <= 0:
            self._log.log("limit", f"NodePool GPU limit {s.pool_gpu_limit} reached; {len(left)} pod(s) stay Pending")
            return
        since = self.demand_since if self.demand_since is not None else now
        for _ in range(k):
            node = self.new_node(since)
            self.launched += 1
            self.env.after(self.ctx.variant.provisioner.sample_boot(self.rng), self._node_ready, node)
        self.last_scale_up_t = now
        self._log.log("launch", f"{k} x {s.instance_type} ({self.ctx.variant.provisioner.kind})")

    # ------------------------------------------------------------------ headroom (CapacityBuffer / placeholders)

    def _virtual_needs(self) -> list[int]:
        """GPUs of each virtual pod of the variant's buffer (none without one)."""
        h = self.ctx.variant.headroom
        return [self.ctx.setup.gpus_per_pod] * h.pods if h is not None else []

    def _capacities(self) -> list[int]:
        """Free GPUs per node a provisioning pass counts: Ready and launching nodes (in-flight NodeClaims), not cordoned."""
        return [n.free for n in self.nodes if not n.cordoned and n.state != GONE]

    def _spare_at_start(self) -> None:
        """The buffer's nodes, up since before the run beside the warm replicas' nodes (the image pulled only when the
        placeholders pulled it)."""
        h = self.ctx.variant.headroom
        assert h is not None
        left = placement.unplaced(self._virtual_needs(), self._capacities())
        for _ in range(min(placement.nodes_for(left, self.ctx.setup.gpus_per_node), self._room())):
            node = self.new_node(0.0)
            node.state, node.ready_at = READY, 0.0
            node.prewarmed, node.spare = h.prepull, True
            node.pull_done_at = 0.0 if h.prepull else None
            self._arm_spot(node)

    def _room(self) -> int:
        """Nodes the NodePool's GPU limit still admits."""
        s = self.ctx.setup
        return max((s.pool_gpu_limit - sum(n.gpus for n in self.nodes if n.state != GONE)) // s.gpus_per_node, 0)

    def _buffer_resync(self) -> None:
        """The CapacityBuffer controller's periodic trigger: a provisioning pass after Karpenter's batch window."""
        h = self.ctx.variant.headroom
        assert h is not None
        if not self.buffer_pending and not self.decision_pending:
            self.buffer_pending = True
            self.env.after(self.ctx.variant.provisioner.sample_launch_delay(self.rng_buffer), self._buffer_pass)
        self.env.at(self.env.now + h.resync_s, self._buffer_resync, priority=PRIORITY_CONTROL)

    def _buffer_pass(self) -> None:
        """A provisioning pass with no real pod pending: nodes for the virtual pods that do not fit (real pods that are
        pending are in ``_provision``'s pass, which counts the virtual pods too)."""
        self.buffer_pending = False
        h = self.ctx.variant.headroom
        assert h is not None
        left = placement.unplaced(self._pods.unbound_needs() + self._virtual_needs(), self._capacities())
        k = min(placement.nodes_for(left, self.ctx.setup.gpus_per_node), self._room()) if left else 0
        for _ in range(k):
            node = self.new_node(self.env.now)
            node.prewarmed, node.spare = h.prepull, True
            self.launched += 1
            self.env.after(self.ctx.variant.provisioner.sample_boot(self.rng_buffer), self._node_ready, node)
        if k:
            self.last_scale_up_t = self.env.now
            self._log.log("buffer", f"{k} x {self.ctx.setup.instance_type} for {len(left)} virtual pod(s) of the buffer")

    def buffer_hosts(self) -> set[int]:
        """Ready nodes the last pass placed virtual pods on (``Cluster.HasBufferPods``): not empty-consolidated."""
        return set(self.held_gpus())

    def held_gpus(self) -> dict[int, int]:
        """GPUs per Ready node the buffer's virtual (or placeholder) pods hold. They pack onto the fullest nodes that
        fit (Karpenter fills existing capacity before new; KAI binds placeholders the same way)."""
        ready = [n for n in self.nodes if n.state == READY and not n.cordoned]
        free = {n.nid: n.free for n in ready}
        held: dict[int, int] = {}
        for need in self._virtual_needs():
            fits = [n for n in ready if free[n.nid] >= need]
            if not fits:
                break
            node = min(fits, key=lambda n: (free[n.nid], n.nid))
            free[node.nid] -= need
            held[node.nid] = held.get(node.nid, 0) + need
        return held

    def prewarm(self) -> None:
        """A low-priority placeholder of one replica's size: launch the nodes it needs now, before the model's pod
        exists; the placeholder pulls the vLLM image on them (the model's pod preempts it when it comes)."""
        s = self.ctx.setup
        left = placement.unplaced([s.gpus_per_pod] * s.pods_per_replica,
                                  [n.free for n in self.nodes if not n.cordoned and n.state != GONE])
        room = (s.pool_gpu_limit - sum(n.gpus for n in self.nodes if n.state != GONE)) // s.gpus_per_node
        k = min(placement.nodes_for(left, s.gpus_per_node), max(room, 0)) if left else 0
        now = self.env.now
        for _ in range(k):
            node = self.new_node(now)
            node.prewarmed = True
            self.launched += 1
            prov = self.ctx.variant.provisioner
            self.env.after(prov.sample_launch_delay(self.rng) + prov.sample_boot(self.rng), self._node_ready, node)
        if k:
            self._log.log("prewarm", f"{k} x {s.instance_type} for a placeholder (the front door holds a request at zero)")

    def _node_ready(self, node: Node) -> None:
        if node.state != NodeState.PROVISIONING:
            return
        now = self.env.now
        node.state = READY
        node.ready_at = now
        node.last_change = now
        if node.prewarmed and node.pull_done_at is None:  # a placeholder pod pulls the image once the node is Ready
            st = self.ctx.startup
            node.pull_done_at = now + st.sample(self.ctx.draws(f"pull/{node.nid}"), st.image_pull_s)
        if node.spare:
            self._log.log("node", f"node {node.nid} ready for the buffer {now - node.requested_at:.0f} s after its launch")
        else:
            self.ready_latencies.append(now - node.requested_at)
            self._log.log("node", f"node {node.nid} ready {now - node.requested_at:.0f} s after its pods went Pending")
        self._arm_spot(node)
        self._pods.schedule()

    # ------------------------------------------------------------------ disruption

    def disrupt(self, node: Node, reason: LossReason, grace_s: float) -> None:
        """Cordon ``node``, evict its replicas (in-flight requests get ``grace_s``), remove it after the grace."""
        if node.state == GONE or node.cordoned:
            return
        node.cordoned = True
        victims = {id(r): r for r, _ in self._workloads.on_node(node)}
        for rep in victims.values():
            self._log.log("evict", f"{rep.role.name} replica {rep.rid} evicted from node {node.nid} ({reason.name.lower()})")
            self._workloads.evict(rep, reason, grace_s)
        if grace_s > 0:
            self.env.after(grace_s, self._remove, node)
        else:
            self._remove(node)
        self._pods.schedule()

    def _remove(self, node: Node) -> None:
        if node.state == GONE:
            return
        node.state = GONE
        self.nodes.remove(node)
        self.terminated += 1

    def _fits_elsewhere(self, node: Node) -> bool:
        needs = [p.gpus for _, p in self._workloads.on_node(node)]
        others = [n.free for n in self.nodes if n is not node and n.state == READY and not n.cordoned]
        return not placement.unplaced(needs, others)

    def _consolidate(self) -> None:
        now = self.env.now
        spec = self.ctx.variant.consolidation
        held = self.buffer_hosts() if self.ctx.variant.headroom is not None else set()
        nodes = [n for n in self.nodes if n.nid not in held] if held else self.nodes
        for _ in range(spec.budget_nodes):
            cand = consolidation_candidate(nodes, now, spec, self.last_scale_up_t, self._fits_elsewhere)
            if cand is None:
                break
            node, evict = cand
            self._log.log("terminate", f"node {node.nid} ({'underutilized' if evict else 'empty'})")
            self.disrupt(node, LossReason.EVICTION, 0.0)
        self.env.at(now + spec.poll_s, self._consolidate, priority=PRIORITY_CONTROL)

    # ------------------------------------------------------------------ drift

    def _drift_start(self) -> None:
        self.drifted = [n for n in self.nodes if n.state != GONE and not n.foreign]
        self._log.log("drift", f"{len(self.drifted)} GPU node(s) drifted")
        self._drift_poll()

    def _evictable(self, rep: Replica) -> bool:
        """Whether the eviction API lets ``rep`` go now: its role's PDB keeps ``ready_floor`` ready replicas."""
        drift = self.ctx.variant.drift
        assert drift is not None
        return len(rep.role.ready) - (1 if rep in rep.role.ready else 0) >= drift.ready_floor.get(rep.role.name, 0)

    def _pdb_allows(self, node: Node) -> bool:
        """Karpenter's candidate check (``pdb.Limits.CanEvictPods``): every PDB covering a pod on the node allows at
        least one disruption; the pods are then evicted one at a time, each as its PDB allows (``_drift_evict``)."""
        return all(self._evictable(rep) for rep, _ in self._workloads.on_node(node))

    def _drift_poll(self) -> None:
        drift = self.ctx.variant.drift
        assert drift is not None
        self.drifted = [n for n in self.drifted if n.state != GONE and not n.cordoned]
        for node in list(self.drifted):
            if self.replacing >= drift.budget_nodes:
                break
            if drift.force_after_s is None and not self._pdb_allows(node):
                continue
            self.drifted.remove(node)
            self.replacing += 1
            replacement = self.new_node(self.env.now)
            self.launched += 1
            boot = self.ctx.variant.provisioner.sample_boot(self.rng)
            self._log.log("drift", f"node {node.nid}: replacement node {replacement.nid} launched first")
            self.env.after(boot, self._node_ready, replacement)
            self.env.after(boot, self._drift_drain, node)

        if self.drifted or self.replacing:
            self.env.at(self.env.now + drift.poll_s, self._drift_poll, priority=PRIORITY_CONTROL)

    def _drift_drain(self, node: Node) -> None:
        drift = self.ctx.variant.drift
        assert drift is not None
        node.cordoned = True  # Karpenter's disrupted taint: nothing new lands here
        if drift.force_after_s is None:
            self._drift_evict(node)
        else:
            # the grace period counts from the drain; do-not-disrupt pods keep serving until it forces them out
            self.env.after(drift.force_after_s, self._drift_force, node)

    def _drift_evict(self, node: Node) -> None:
        """Evict the node's pods one at a time, each once its PDB allows (the replacement pod of the last one is ready
        elsewhere, on the replacement node); the node goes once it is empty and the last pods' grace has passed."""
        drift = self.ctx.variant.drift
        assert drift is not None
        evicted = False
        for rep in list({id(r): r for r, _ in self._workloads.on_node(node)}.values()):
            if self._evictable(rep):
                self._log.log("evict", f"{rep.role.name} replica {rep.rid} evicted from node {node.nid} (drift)")
                self._workloads.evict(rep, LossReason.EVICTION, drift.drain_grace_s)
                evicted = True
        if evicted:
            self._pods.schedule()

        if self._workloads.on_node(node):
            self.env.after(drift.poll_s, self._drift_evict, node)
        else:
            self.env.after(drift.drain_grace_s, self._drift_gone, node)

    def _drift_gone(self, node: Node) -> None:
        self._remove(node)
        self._drift_done()

    def _drift_force(self, node: Node) -> None:
        node.cordoned = False  # disrupt() skips cordoned nodes: this is the forced deletion
        self.disrupt(node, LossReason.EVICTION, 0.0)
        self._drift_done()

    def _drift_done(self) -> None:
        self.replacing -= 1

    def _arm_spot(self, node: Node) -> None:
        spot = self.ctx.setup.spot
        if spot is None or spot.interruptions_per_node_hour <= 0 or node.foreign:
            return
        at = self.env.now + self.rng_spot.expovariate(spot.interruptions_per_node_hour / 3600.0)
        self.env.at(at, self._interrupt, node)

    def _interrupt(self, node: Node) -> None:
        if node.state != READY or node.cordoned:
            return
        spot = self.ctx.setup.spot
        assert spot is not None
        self.interruptions += 1
        self._log.log("interrupt", f"node {node.nid}: spot interruption notice ({spot.notice_s:.0f} s)")
        self.disrupt(node, LossReason.INTERRUPTION, spot.notice_s)
