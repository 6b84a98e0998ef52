"""The root spec: one description of the whole serving platform, checked across layers."""

from __future__ import annotations

from collections import Counter

from pydantic import Field, model_validator

from gpuscale import sizing
from gpuscale.spec.base import Spec
from gpuscale.spec.environment import EnvironmentSpec
from gpuscale.spec.model import ModelDeployment
from gpuscale.spec.observability import ObservabilitySpec
from gpuscale.spec.problems import SpecProblems
from gpuscale.spec.teams import UNLIMITED, QueueSpec
from gpuscale.spec.topology import TopologySpec


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
        if problems:
            raise SpecProblems(problems)
        problems += self._placement_checks()
        problems += self._quota_checks()
        problems += self._gang_checks()
        if problems:
            raise SpecProblems(problems)
        return self

    def leaf_queue_names(self) -> list[str]:
        return [q.name for q, _ in self.queues() if q.is_leaf]

    def _placement_checks(self) -> list[tuple[str, str]]:
        problems: list[tuple[str, str]] = []
        for i, m in enumerate(self.models):
            where = f"models[{i}]"
            pool = self.topology.pool(m.node_pool)
            try:
                shape = sizing.replica_shape(m, pool)
            except sizing.SizingError as exc:
                problems.append((f"{where}.parallelism", str(exc)))
                continue
            if not shape.fits_nvlink_domain and not m.parallelism.allow_tensor_parallel_over_pcie:
                domain = max(it.nvlink_domain_gpus for it in pool.instances)
                problems.append((
                    f"{where}.parallelism.tensor_parallel_size",
                    f"TP group of {shape.tensor_parallel_size} GPUs is wider than one NVLink domain on "
                    f"{shape.instance_type} ({domain} GPU{'s' if domain > 1 else ''}); every layer would all-reduce "
                    "over PCIe/network. Use TP <= the domain with pipeline_parallel_size for the rest, or set "
                    "allow_tensor_parallel_over_pcie: true",
                ))
            cold = sizing.cold_start(m, self.topology.provisioning)
            if pool.consolidate_after_s < cold.total_s and not pool.acknowledge_underutilized_consolidation_evicts_inference:
                problems.append((
                    f"topology.gpu_pools[{pool_names_index(self, pool.name)}].consolidate_after",
                    f"{pool.consolidate_after} is shorter than the cold start of {m.name} ({cold.total_s:.0f} s): "
                    "a node emptied by a brief dip is gone when traffic returns. Use 1h, or set "
                    "acknowledge_underutilized_consolidation_evicts_inference: true",
                ))
        if self.environment.stage == "prod":
            for j, pool in enumerate(self.topology.gpu_pools):
                if pool.ami_alias.endswith("@latest"):
                    problems.append((
                        f"topology.gpu_pools[{j}].ami_alias",
                        f"{pool.ami_alias} in prod drifts every GPU node whenever AWS publishes an AMI; pin a version "
                        "(e.g. al2023@v20251117)",
                    ))
        return problems

    def _quota_checks(self) -> list[tuple[str, str]]:
        problems: list[tuple[str, str]] = []
        pool_gpus = sum(p.gpu_limit for p in self.topology.gpu_pools)
        quota = sum(q.gpu_quota for q in self.teams)
        if quota > pool_gpus:
            parts = " + ".join(f"{q.name} {q.gpu_quota:g}" for q in self.teams)
            problems.append((
                "teams",
                f"top-level GPU quotas ({parts} = {quota:g}) exceed the GPU node pools' limits "
                f"({' + '.join(f'{p.name} {p.gpu_limit}' for p in self.topology.gpu_pools)} = {pool_gpus}); "
                "a quota the nodes can never provide is a promise KAI cannot keep",
            ))
        # warm minimums of non-preemptible (in-quota only) workloads must fit each leaf's quota
        need: Counter[str] = Counter()
        for m in self.models:
            try:
                shape = sizing.replica_shape(m, self.topology.pool(m.node_pool))
            except sizing.SizingError:
                continue
            default_min = 0 if m.slo.criticality == "best_effort" else 1
            for role in m.serving.roles:
                r = m.autoscaling.role(role)
                need[m.queue] += (r.min_replicas if r.min_replicas is not None else default_min) * shape.gpus
        leaves = {q.name: q for q, _ in self.queues() if q.is_leaf}
        for name, gpus in sorted(need.items()):
            q = leaves[name]
            if not q.preemptible and gpus > q.gpu_quota:
                problems.append((
                    "teams",
                    f"queue {name}: warm minimum replicas need {gpus} GPUs but its gpu_quota is {q.gpu_quota:g}; "
                    "non-preemptible (inference) workloads only run in quota, so they would stay Pending",
                ))
            if q.gpu_limit != UNLIMITED and gpus > q.gpu_limit:
                problems.append(("teams", f"queue {name}: warm minimum needs {gpus} GPUs, above its gpu_limit {q.gpu_limit:g}"))
        return problems

    def _gang_checks(self) -> list[tuple[str, str]]:
        """A replica is one gang (KAI places all its pods or none): it must fit its queue chain and its pool whole."""
        problems: list[tuple[str, str]] = []
        for i, m in enumerate(self.models):
            pool = self.topology.pool(m.node_pool)
            try:
                shape = sizing.replica_shape(m, pool)
            except sizing.SizingError:
                continue
            gang = f"one replica of {m.name} is a gang of {shape.pods} pod(s) / {shape.gpus} GPUs"
            chain = self.queue_chain(m.queue)
            leaf = chain[-1]
            if not leaf.preemptible:
                # non-preemptible pods run in quota only, checked against the leaf and every ancestor
                short = [q for q in chain if q.gpu_quota < shape.gpus]
                if short:
                    names = ", ".join(f"{q.name} gpu_quota {q.gpu_quota:g}" for q in short)
                    problems.append((
                        f"models[{i}].queue",
                        f"{gang} but queue {m.queue} is non-preemptible (runs in quota only) and {names} "
                        f"{'is' if len(short) == 1 else 'are'} below {shape.gpus}: no replica can ever start. Raise the "
                        "quota, or use a smaller replica (FP8, fewer GPUs)",
                    ))
            capped = [q for q in chain if q.gpu_limit != UNLIMITED and q.gpu_limit < shape.gpus]
            if capped:
                names = ", ".join(f"{q.name} gpu_limit {q.gpu_limit:g}" for q in capped)
                problems.append((f"models[{i}].queue", f"{gang} but {names} caps the queue below it: no replica can ever start"))
            if pool.gpu_limit < shape.gpus:
                problems.append((
                    f"models[{i}].node_pool",
                    f"{gang} but node pool {pool.name} may run at most {pool.gpu_limit} GPUs (gpu_limit): Karpenter can "
                    "never launch the nodes for one replica",
                ))
        return problems


def pool_names_index(spec: PlatformSpec, name: str) -> int:
    return [p.name for p in spec.topology.gpu_pools].index(name)


