"""Teams sharing the GPUs: a KAI queue tree (departments -> teams) with quotas and priorities."""

from __future__ import annotations

from collections.abc import Iterator

from pydantic import Field, model_validator

from gpuscale.problems import Problems, at
from gpuscale.spec.base import INT32_MAX, Name, Spec

UNLIMITED = -1.0


class QueueSpec(Spec):
    """One KAI queue. Leaves take workloads; inner nodes only divide quota."""

    name: Name
    """Queue name, unique in the whole tree (it is a cluster-scoped object)."""
    display_name: str | None = None
    """Human-readable name."""
    gpu_quota: float = Field(default=0.0, ge=0)
    """Guaranteed GPUs (KAI ``resources.gpu.quota``); 0 means no guarantee."""
    gpu_limit: float = Field(default=UNLIMITED, ge=UNLIMITED)
    """Most GPUs the queue may use, over quota included; -1 means no limit."""
    over_quota_weight: float = Field(default=1.0, ge=0, le=1e6)
    """Share of idle GPUs beyond quota, relative to sibling queues."""
    priority: int = Field(default=100, ge=0, le=INT32_MAX)
    """Higher priority queues get over-quota resources first and are reclaimed last."""
    preemptible: bool = False
    """Workloads in this queue may be preempted (batch/training); inference queues are not."""
    children: list[QueueSpec] = []
    """Sub-queues; a queue with children cannot take workloads."""
    cpu_quota_cores: float | None = Field(default=None, ge=0)
    """Guaranteed CPU cores (KAI ``resources.cpu.quota``, emitted in millicores). Unset: emitted as -1 (unlimited),
    because KAI checks non-preemptible pods against every resource's quota and its own unset default (0) would keep
    every inference pod that requests CPU Pending. If set, the parent queue must set one at least as large."""
    cpu_limit_cores: float | None = Field(default=None, ge=0)
    """Most CPU cores the queue may use (KAI ``resources.cpu.limit``, millicores). Unset: -1 (no limit)."""
    memory_quota_gib: float | None = Field(default=None, ge=0)
    """Guaranteed memory, GiB (KAI ``resources.memory.quota``, emitted in MB = 10^6 bytes). Unset: -1 (unlimited),
    for the same reason as ``cpu_quota_cores``."""
    memory_limit_gib: float | None = Field(default=None, ge=0)
    """Most memory the queue may use, GiB (KAI ``resources.memory.limit``, MB). Unset: -1 (no limit)."""

    @model_validator(mode="after")
    def _children_fit_quota(self) -> QueueSpec:
        # KAI's queue webhook refuses a child whose quota exceeds its parent's, and the scheduler checks a
        # non-preemptible pod against the quota of every ancestor: children's guarantees must add up inside the parent's.
        problems: list[tuple[str, str]] = []
        if self.children:
            total = sum(c.gpu_quota for c in self.children)
            over_limit = self.gpu_limit != UNLIMITED and total > self.gpu_limit  # _limits reports that, more strongly
            if total > self.gpu_quota and not over_limit:
                parts = " + ".join(f"{c.name} {c.gpu_quota:g}" for c in self.children)
                problems.append((
                    "gpu_quota",
                    f"queue {self.name}: children's GPU quotas ({parts} = {total:g}) exceed its gpu_quota "
                    f"({self.gpu_quota:g}); a parent cannot guarantee more than its own quota (KAI's queue webhook "
                    f"refuses it, and inference pods are checked against every ancestor's quota). Raise {self.name}'s "
                    f"gpu_quota to {total:g} or lower the children's",
                ))
        for unit, own_quota, own_limit, child_quotas in (
            ("cpu_quota_cores", self.cpu_quota_cores, self.cpu_limit_cores, [(c.name, c.cpu_quota_cores) for c in self.children]),
            ("memory_quota_gib", self.memory_quota_gib, self.memory_limit_gib, [(c.name, c.memory_quota_gib) for c in self.children]),
        ):
            if own_quota is not None and own_limit is not None and own_limit < own_quota:
                problems.append((unit.replace("quota", "limit"), f"queue {self.name}: {unit.replace('quota', 'limit')} ({own_limit:g}) is below {unit} ({own_quota:g})"))
            set_children = [(n, q) for n, q in child_quotas if q is not None]
            if not set_children:
                continue
            total = sum(q for _, q in set_children)
            parts = " + ".join(f"{n} {q:g}" for n, q in set_children)
            if own_quota is None:
                problems.append((
                    unit,
                    f"queue {self.name}: children set {unit} ({parts} = {total:g}) but {self.name} leaves it unset "
                    f"(unlimited, -1); KAI's webhook refuses a child quota above its parent's. Set {self.name}'s "
                    f"{unit} to at least {total:g}",
                ))
            elif total > own_quota:
                problems.append((
                    unit, f"queue {self.name}: children's {unit} ({parts} = {total:g}) exceed its {unit} ({own_quota:g})",
                ))
        if problems:
            raise Problems(problems)
        return self

    @model_validator(mode="after")
    def _limits(self) -> QueueSpec:
        if -1 < self.gpu_limit < 0:
            raise at("gpu_limit", f"queue {self.name}: {self.gpu_limit:g} GPUs: use a number >= 0, or -1 for no limit")
        if self.gpu_limit == UNLIMITED:
            return self
        problems: list[tuple[str, str]] = []
        if self.gpu_limit < self.gpu_quota:
            problems.append(("gpu_limit", f"queue {self.name}: gpu_limit ({self.gpu_limit:g}) is below gpu_quota ({self.gpu_quota:g})"))
        total = sum(c.gpu_quota for c in self.children)
        if self.children and total > self.gpu_limit:
            parts = " + ".join(f"{c.name} {c.gpu_quota:g}" for c in self.children)
            problems.append((
                "gpu_limit",
                f"queue {self.name}: children's GPU quotas ({parts} = {total:g}) exceed its gpu_limit "
                f"({self.gpu_limit:g}); quota beyond the parent's limit can never be granted",
            ))
        # a child may use at most what its parent allows: a larger limit is a number nothing can reach
        problems += [(
            f"children[{i}].gpu_limit",
            f"queue {c.name}: gpu_limit {c.gpu_limit:g} is above its parent {self.name}'s gpu_limit ({self.gpu_limit:g}), "
            f"which caps it: use at most {self.gpu_limit:g}, or -1 to take the parent's",
        ) for i, c in enumerate(self.children) if c.gpu_limit > self.gpu_limit]
        if problems:
            raise Problems(problems)
        return self

    @property
    def is_leaf(self) -> bool:
        return not self.children

    def walk(self, parent: QueueSpec | None = None) -> Iterator[tuple[QueueSpec, QueueSpec | None]]:
        """Depth-first (queue, parent) pairs, parents before children."""
        yield self, parent
        for child in self.children:
            yield from child.walk(self)
