"""Layer 1 in a run: the pool's nodes, the provisioner that launches them and the disruption that removes them.

Three sources of node events, all through ``disrupt(node, reason, grace_s)``:

* consolidation (``nodes.consolidation_candidate``), polled every 10 s, ``budget_nodes`` per poll, no grace;
* spot interruptions: each spot node draws its interruption time from an exponential at the configured rate; on the
  two-minute notice Karpenter cordons and drains the node (replacement capacity is asked for at once);
* headroom (``Variant.headroom``, a CapacityBuffer or placeholder pods): spare nodes for ``pods`` virtual pods exist
  from the start; every provisioning pass launches nodes for the virtual pods that no longer fit beside the real ones,
  and a node hosting a virtual pod is not empty-consolidated. What triggers the pass that refills a taken spare node
  (``gpuscale.headroom.BUFFER_RESYNC_S``): for a CapacityBuffer only the buffer controller's reconcile, every 30 s at
  its own phase; for placeholder pods the evicted placeholder's pending replacement, at once;
* Karpenter's batcher (``demand``): a pass runs ``BATCH_IDLE_DURATION`` after the last new trigger, at most
  ``BATCH_MAX_DURATION`` after the first (``pkg/controllers/provisioning/batcher.go`` L52-109 at v1.14.1);
* a reserved-only pool (``SimSetup.reserved_only``) launches no node beyond its reserved instances (``_room``);
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
        self._nid = 0
        self.decision_pending = False
        """A provisioning pass is coming: Karpenter's batch window is open, or Cluster Autoscaler decided to scale."""
        self._batch_opened = 0.0
        self._batch_pods = 0
        """Pending pods the open batch has seen (a pod already in it does not extend it, ``batcher.go`` L53-59)."""
        self._batch_buffer = False
        """The buffer controller's trigger is already in the open batch."""
        self._batch_gen = 0
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
            if not headroom.prepull:  # the buffer's first reconcile: a point of its own cycle, unrelated to the run
                first = self.rng_buffer.uniform(0.0, headroom.resync_s)
                self.env.at(first, self._buffer_resync, priority=PRIORITY_CONTROL)

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
        """Pods are pending: Karpenter's pod trigger fires at once (``controller.go`` L67-70, any pod KAI marks
        ``Unschedulable``), into its batcher; Cluster Autoscaler waits for its scan."""
        if self.demand_since is None:
            self.demand_since = self.env.now
        if self.ctx.variant.provisioner.scan_interval_s == 0:
            pending = len(self._pods.unbound_needs())
            self._trigger(new=pending > self._batch_pods)
            self._batch_pods = max(self._batch_pods, pending)
        self._placeholder_pending()

    def demand_met(self) -> None:
        """No pod is pending: the next demand starts a new wait (what node-ready latencies count from)."""
        self.demand_since = None
        self._placeholder_pending()

    def _trigger(self, *, new: bool) -> None:
        """Karpenter's ``Batcher.Trigger`` and ``Wait`` (``batcher.go`` L52-109 at v1.14.1): the first trigger opens a
        window that closes ``BATCH_IDLE_DURATION`` later; each new element (a pod or buffer not yet in the window)
        moves the close to idle after it, but never past ``BATCH_MAX_DURATION`` after the opening. The close runs the
        pass (``provisioner.go`` L135-146)."""
        idle, most = self.ctx.variant.provisioner.decision_s
        now = self.env.now
        if not self.decision_pending:
            self.decision_pending = True
            self._batch_opened, self._batch_pods, self._batch_buffer = now, 0, False
            self._close_batch_at(now + idle)
        elif new:
            self._close_batch_at(min(now + idle, self._batch_opened + most))

    def _close_batch_at(self, t: float) -> None:
        self._batch_gen += 1
        self.env.at(t, self._batch_closed, self._batch_gen)

    def _batch_closed(self, gen: int) -> None:
        if gen == self._batch_gen:  # not moved later since
            self._provision()

    def _placeholder_pending(self) -> None:
        """A placeholder pod evicted by a serving pod is recreated by its Deployment and pending: KAI marks it
        ``Unschedulable`` (``default_status_updater.go`` L249-260, L382-383 at v0.17.0), which is Karpenter's pod
        trigger. So placeholder headroom is refilled by an ordinary pass, not at the buffer's resync."""
        h = self.ctx.variant.headroom
        if (h is None or not h.prepull or self.ctx.variant.provisioner.scan_interval_s > 0 or self._room() == 0
                or not placement.unplaced(self._virtual_needs(), self._capacities())):
            return
        self._trigger(new=not self._batch_buffer)
        self._batch_buffer = True

    def _ca_scan(self) -> None:
        if not self.decision_pending and self._pods.unbound_needs():
            self.decision_pending = True
            self.env.after(self.ctx.variant.provisioner.sample_launch_delay(self.rng), self._provision)
        self.env.at(self.env.now + self.ctx.variant.provisioner.scan_interval_s, self._ca_scan, priority=PRIORITY_CONTROL)

    def _provision(self) -> None:
        """One provisioning pass: nodes for the pending pods and for the buffer's virtual pods that do not fit
        (``GetPendingPods`` appends them, ``provisioner.go`` L221-223), within the NodePool's limit and, on a
        reserved-only pool, its reservations. The nodes beyond what the real pods need are the buffer's."""
        s = self.ctx.setup
        self.decision_pending = False
        now = self.env.now
        needs = self._pods.unbound_needs()
        left = placement.unplaced(needs + self._virtual_needs(), self._capacities())
        if not left:
            return
        for_pods = placement.nodes_for(placement.unplaced(needs, self._capacities()), s.gpus_per_node) if needs else 0
        want = placement.nodes_for(left, s.gpus_per_node)
        k = min(want, self._room())
        if k <= 0:
            cap = (f"its {s.reserved_instances} reserved instance(s) are all in use (the pool launches reserved "
                   f"capacity only)" if s.reserved_only and self._room_by_limit() > 0 else
                   f"NodePool GPU limit {s.pool_gpu_limit} reached")
            self._log.log("limit", f"{cap}; {len(left)} pod(s) stay Pending")
            return
        h = self.ctx.variant.headroom
        since = self.demand_since if self.demand_since is not None else now
        for i in range(k):
            spare = i >= for_pods
            node = self.new_node(now if spare else since)
            if spare and h is not None:
                node.prewarmed, node.spare = h.prepull, True
            self.launched += 1
            rng = self.rng_buffer if spare else self.rng
            self.env.after(self.ctx.variant.provisioner.sample_boot(rng), self._node_ready, node)
        self.last_scale_up_t = now
        spare_k = max(0, k - for_pods)
        what = f", {spare_k} for the buffer's virtual pod(s)" if spare_k and for_pods else " for the buffer" if spare_k else ""
        self._log.log("launch" if for_pods else "buffer", f"{k} x {s.instance_type} ({self.ctx.variant.provisioner.kind}){what}")

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

    def _room_by_limit(self) -> int:
        s = self.ctx.setup
        return (s.pool_gpu_limit - sum(n.gpus for n in self.nodes if n.state != GONE)) // s.gpus_per_node

    def _room(self) -> int:
        """Nodes the NodePool's GPU limit still admits and, on a reserved-only pool, its reservations: Karpenter
        v1.14.1 offers a reservation only while EC2 reports instances left in it (karpenter-provider-aws
        ``pkg/providers/instancetype/offering/reserved_capacity_resolver.go`` L88-99: ``Available`` needs
        ``reservationCapacity != 0``; the count drops with each launch, ``capacityreservation/types.go``
        ``MarkLaunched``), and within one pass its scheduler opens at most that many NodeClaims on it
        (kubernetes-sigs/karpenter ``pkg/controllers/provisioning/scheduling/reservationmanager.go`` L40-46). With no
        other capacity type allowed, a pod beyond them stays Pending."""
        s = self.ctx.setup
        room = self._room_by_limit()
        if s.reserved_only:
            room = min(room, s.reserved_instances - sum(1 for n in self.nodes if n.state != GONE))
        return max(room, 0)

    def _buffer_resync(self) -> None:
        """The CapacityBuffer controller's reconcile: a trigger into Karpenter's batcher every ``resync_s``
        (``capacitybuffer/controller.go`` L120-124 at v1.14.1), whatever happens in between."""
        h = self.ctx.variant.headroom
        assert h is not None
        if self.ctx.variant.provisioner.scan_interval_s == 0:
            self._trigger(new=not self._batch_buffer)
            self._batch_buffer = True
        self.env.at(self.env.now + h.resync_s, self._buffer_resync, priority=PRIORITY_CONTROL)

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
        k = min(placement.nodes_for(left, s.gpus_per_node), self._room()) if left else 0
        now = self.env.now
        for _ in range(k):
            node = self.new_node(now)
            node.prewarmed = True
            self.launched += 1
            prov = self.ctx.variant.provisioner
            # the placeholder is a lone pending pod: Karpenter's batch closes one idle window after it (``_trigger``)
            decide = prov.decision_s[0] if prov.scan_interval_s == 0 else prov.sample_launch_delay(self.rng)
            self.env.after(decide + prov.sample_boot(self.rng), self._node_ready, node)
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
