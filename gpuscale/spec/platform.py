"""The root spec: one description of the whole serving platform, checked across layers."""

from __future__ import annotations

from collections import Counter

from pydantic import Field, model_validator

from gpuscale.guardrails import headroom, production, reservations, warm_minimum
from gpuscale.problems import Problems
from gpuscale.spec.base import Spec
from gpuscale.spec.environment import EnvironmentSpec
from gpuscale.spec.model import ModelDeployment
from gpuscale.spec.observability import ObservabilitySpec
from gpuscale.spec.teams import QueueSpec
from gpuscale.spec.topology import TopologySpec, zone_problem


class PlatformSpec(Spec):
    """Everything one stack deploys. Each top-level field is one ``gpuscale:<field>`` config key."""

    environment: EnvironmentSpec
    """Region, Kubernetes version, networking, tags."""
    topology: TopologySpec
    """Zones, node pools, topology levels, provisioning latency."""
    teams: list[QueueSpec] = Field(min_length=1)
    """Top-level KAI queues (departments), each with child queues (teams)."""
    models: list[ModelDeployment] = Field(min_length=1)
    """Served models."""
    observability: ObservabilitySpec = ObservabilitySpec()
    """Prometheus the autoscalers query."""

    def queues(self) -> list[tuple[QueueSpec, QueueSpec | None]]:
        """Every queue with its parent, parents first."""
        return [pair for top in self.teams for pair in top.walk()]

    def queue_chain(self, name: str) -> list[QueueSpec]:
        """Root-to-queue path of the named queue."""
        parents = {q.name: p for q, p in self.queues()}
        by_name = {q.name: q for q, _ in self.queues()}
        chain = [by_name[name]]
        while (parent := parents[chain[0].name]) is not None:
            chain.insert(0, parent)
        return chain

    @model_validator(mode="after")
    def _cross_checks(self) -> PlatformSpec:
        problems: list[tuple[str, str]] = []
        names = [q.name for q, _ in self.queues()]
        dupes = sorted(n for n, c in Counter(names).items() if c > 1)
        if dupes:
            problems.append(("teams", f"queue names must be unique across the tree (Queues are cluster-scoped); repeated: {dupes}"))
        model_names = [m.name for m in self.models]
        for n in sorted(n for n, c in Counter(model_names).items() if c > 1):
            problems.append(("models", f"model name {n!r} is used twice"))
        by_name = {q.name: q for q, _ in self.queues()}
        pool_names = [p.name for p in self.topology.gpu_pools]
        for i, m in enumerate(self.models):
            where = f"models[{i}]"
            queue = by_name.get(m.queue)
            if queue is None:
                problems.append((f"{where}.queue", f"queue {m.queue!r} is not in teams; leaf queues: {self.leaf_queue_names()}"))
            elif not queue.is_leaf:
                problems.append((
                    f"{where}.queue",
                    f"queue {m.queue!r} has children ({', '.join(c.name for c in queue.children)}); KAI only schedules "
                    f"workloads in leaf queues and silently leaves others Pending. Use one of {self.leaf_queue_names()}",
                ))
            if m.node_pool not in pool_names:
                problems.append((f"{where}.node_pool", f"node pool {m.node_pool!r} is not in topology.gpu_pools {pool_names}"))
            prov = self.topology.provisioning
            breach = headroom.capacity_buffer_breach(m.headroom.mode, prov.capacity_buffer_gate, prov.node_provisioner)
            if breach:
                problems.append((f"{where}.headroom.mode", breach))
        if production.is_production(self.environment.stage):
            for j, pool in enumerate(self.topology.gpu_pools):
                if production.unpinned_alias(pool.ami_alias):
                    problems.append((f"topology.gpu_pools[{j}].ami_alias", production.unpinned_ami_message(pool.ami_alias)))
        if problems:
            raise Problems(problems)
        return self

    @model_validator(mode="after")
    def _zones_in_region(self) -> PlatformSpec:
        problems: list[tuple[str, str]] = []
        for j, zone in enumerate(self.topology.zones):
            problem = zone_problem(zone, self.environment.aws_region)
            if problem:
                problems.append((f"topology.zones[{j}]", problem))
        if problems:
            raise Problems(problems)
        return self

    @model_validator(mode="after")
    def _capacity_block_windows(self) -> PlatformSpec:
        # the two refusals of gpuscale.guardrails.reservations, at the end_utc of the block that causes them
        problems: list[tuple[str, str]] = []
        for j, pool in enumerate(self.topology.gpu_pools):
            blocks = pool.capacity_blocks
            if not blocks:
                continue
            on_pool = [m for m in self.models if m.node_pool == pool.name]
            peaks = [(m.name, m.workload.peak_hours_per_day) for m in on_pool]
            for k, block in blocks:
                assert block.start_utc is not None and block.end_utc is not None  # a block's dates are required
                breach = reservations.short_block_breach(pool.name, block.id, block.start_utc, block.end_utc, peaks)
                if breach:
                    problems.append((f"topology.gpu_pools[{j}].capacity_reservations[{k}].end_utc", breach))
            if pool.launches_only_reserved_blocks:
                k, last = max(blocks, key=lambda kb: (kb[1].end_utc, kb[0]))
                assert last.end_utc is not None
                warm = [(m.name, r, warm_minimum.warm_minimum(m.slo.criticality, m.autoscaling.role(r).min_replicas))
                        for m in on_pool for r in m.serving.roles]
                breach = reservations.warm_minimum_outlives_breach(pool.name, last.id, last.end_utc, warm)
                if breach:
                    problems.append((f"topology.gpu_pools[{j}].capacity_reservations[{k}].end_utc", breach))
        if problems:
            raise Problems(problems)
        return self

    @model_validator(mode="after")
    def _node_cache_on_nvme(self) -> PlatformSpec:
        # the node cache is a directory on the instance-store RAID0 that the AL2023 AMI mounts at /mnt/k8s-disks/0
        problems: list[tuple[str, str]] = []
        pools = {p.name: p for p in self.topology.gpu_pools}
        for i, m in enumerate(self.models):
            pool = pools.get(m.node_pool)
            if m.cold_start.weights_cache != "node-nvme" or pool is None:
                continue
            without = [it.name for it in pool.instances if it.local_nvme_gib == 0]
            if not pool.ami_alias.startswith("al2023@") or without:
                why = f"{without} have no instance store" if without else f"{pool.ami_alias} is not an AL2023 AMI"
                problems.append((
                    f"models[{i}].cold_start.weights_cache",
                    f"weights_cache: node-nvme keeps downloads on the instance-store RAID0 the AL2023 AMI mounts at "
                    f"/mnt/k8s-disks/0, but on pool {pool.name} {why}. Use weights_cache: none",
                ))
        if problems:
            raise Problems(problems)
        return self

    def leaf_queue_names(self) -> list[str]:
        return [q.name for q, _ in self.queues() if q.is_leaf]
