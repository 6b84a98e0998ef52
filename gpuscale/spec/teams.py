"""Teams sharing the GPUs: a KAI queue tree (departments -> teams) with quotas and priorities."""

from __future__ import annotations

from collections.abc import Iterator

from pydantic import Field, model_validator

from gpuscale.spec.base import Name, Spec

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
    over_quota_weight: float = Field(default=1.0, ge=0)
    """Share of idle GPUs beyond quota, relative to sibling queues."""
    priority: int = Field(default=100, ge=0)
    """Higher priority queues get over-quota resources first and are reclaimed last."""
    preemptible: bool = False
    """Workloads in this queue may be preempted (batch/training); inference queues are not."""
    children: list[QueueSpec] = []
    """Sub-queues; a queue with children cannot take workloads."""

    @model_validator(mode="after")
    def _limits(self) -> QueueSpec:
        if self.gpu_limit != UNLIMITED and self.gpu_limit < self.gpu_quota:
            raise ValueError(f"queue {self.name}: gpu_limit ({self.gpu_limit:g}) is below gpu_quota ({self.gpu_quota:g})")
        if not self.children or self.gpu_limit == UNLIMITED:
            return self
        total = sum(c.gpu_quota for c in self.children)
        if total > self.gpu_limit:
            parts = " + ".join(f"{c.name} {c.gpu_quota:g}" for c in self.children)
            raise ValueError(
                f"queue {self.name}: children's GPU quotas ({parts} = {total:g}) exceed its gpu_limit "
                f"({self.gpu_limit:g}); quota beyond the parent's limit can never be granted"
            )
        return self

    @property
    def is_leaf(self) -> bool:
        return not self.children

    def walk(self, parent: QueueSpec | None = None) -> Iterator[tuple[QueueSpec, QueueSpec | None]]:
        """Depth-first (queue, parent) pairs, parents before children."""
        yield self, parent
        for child in self.children:
            yield from child.walk(self)
