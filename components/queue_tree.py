"""The team tree as KAI hierarchical Queues: one ``scheduling.run.ai/v2`` Queue per node of the tree."""

from __future__ import annotations

import functools
from collections import Counter
from typing import Any

import pulumi
from pulumi_kubernetes.apiextensions import CustomResource
from pydantic import Field, model_validator

from gpuscale.components.children import child_opts, claim, object_name
from gpuscale.components.inputs import QueueName, StrInput, lift
from gpuscale.manifests.kai import queue_body
from gpuscale.spec.base import Spec
from gpuscale.spec.platform import PlatformSpec
from gpuscale.spec.teams import QueueSpec


class QueueTreeArgs(Spec):
    """The team tree: top-level queues (departments) with their children (teams), at the top of the cluster's queue
    hierarchy or under a queue that already exists there."""

    teams: list[QueueSpec] = Field(min_length=1)
    """Top-level queues; each queue's ``children`` are its sub-queues. Leaves take workloads."""
    parent_queue: QueueName | None = None
    """An existing Queue the top-level queues go under (``spec.parentQueue``), e.g. a department another stack
    created; a plain name or an Output (``StackReference(...).get_output("department_queue")``). KAI's queue webhook
    refuses a child whose quota exceeds that parent's, so the top-level quotas must fit in it. Default: none, they
    are top-level queues themselves."""

    @model_validator(mode="after")
    def _unique(self) -> QueueTreeArgs:
        repeated = sorted(n for n, c in Counter(q.name for q, _ in self.queues()).items() if c > 1)
        if repeated:
            raise ValueError(f"queue names must be unique across the tree (Queues are cluster-scoped); repeated: {repeated}")
        return self

    @classmethod
    def from_spec(cls, spec: PlatformSpec, *, parent_queue: StrInput | None = None) -> QueueTreeArgs:
        return cls(teams=spec.teams, parent_queue=parent_queue)

    def queues(self) -> list[tuple[QueueSpec, QueueSpec | None]]:
        """Every queue with its parent, parents first."""
        return [pair for top in self.teams for pair in top.walk()]


class QueueTree(pulumi.ComponentResource):
    """One KAI Queue per team-tree node, with parent links, quotas, limits, over-quota weights and priorities.

    Creates ``<name>-<queue>`` (Queue, cluster-scoped, named after the queue) for every node, parents first: each
    child depends on its parent because KAI's queue webhook looks the parent up when the child is created.
    Expects KAI on the cluster (``KaiScheduler``: its CRD and webhook; put ``KaiScheduler.chart`` in
    ``opts.depends_on`` when it is in the same program). See KAI ``docs/queues/README.md``.
    """

    queues: dict[str, CustomResource]
    """Queue resources by queue name (for ``depends_on``)."""
    queue_names: pulumi.Output[list[str]]
    """Every queue, parents first."""
    leaf_queue_names: pulumi.Output[list[str]]
    """Queues that take workloads (the ``kai.scheduler/queue`` label must name one of these)."""

    def __init__(self, name: str, args: QueueTreeArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuscale:index:QueueTree", name, None, opts)
        self.queues = {}
        for queue, parent in args.queues():
            claim(self, f"QueueTree {name!r}", "kubernetes", "Queue", queue.name,
                  fix="queues are cluster-scoped: keep one tree per cluster and add teams to it")
            body = queue_body(queue, parent)
            after = [self.queues[parent.name]] if parent is not None else []
            spec: dict[str, Any] | pulumi.Output[dict[str, Any]] = body["spec"]
            if parent is None and args.parent_queue is not None:
                spec = lift(args.parent_queue, functools.partial(_under, body["spec"]))
            self.queues[queue.name] = CustomResource(
                f"{name}-{queue.name}",
                api_version=body["apiVersion"],
                kind=body["kind"],
                metadata=body["metadata"],
                spec=spec,
                opts=child_opts(self, opts, *after),
            )
        self.queue_names = pulumi.Output.all(*[object_name(q) for q in self.queues.values()]).apply(list)
        leaves = [q.name for q, _ in args.queues() if q.is_leaf]
        self.leaf_queue_names = pulumi.Output.all(*[object_name(self.queues[n]) for n in leaves]).apply(list)
        self.register_outputs({"queue_names": self.queue_names, "leaf_queue_names": self.leaf_queue_names})


def _under(spec: dict[str, Any], parent: str) -> dict[str, Any]:
    """A top-level queue's spec placed under an existing ``parent`` queue."""
    return {**spec, "parentQueue": parent}
