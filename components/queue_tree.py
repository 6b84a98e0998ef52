"""The team tree as KAI hierarchical Queues: one ``scheduling.run.ai/v2`` Queue per node of ``spec.teams``."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
from pulumi_kubernetes.apiextensions import CustomResource

from gpuscale.manifests.kai import queue_body
from gpuscale.spec.base import Spec
from gpuscale.spec.platform import PlatformSpec


class QueueTreeArgs(Spec):
    """Inputs of ``QueueTree``."""

    platform: PlatformSpec
    """The validated platform spec; its ``teams`` are the tree."""


class QueueTree(pulumi.ComponentResource):
    """One KAI Queue per team-tree node, with parent links, quotas, limits, over-quota weights and priorities.

    Creates ``<name>-<queue>`` (Queue, cluster-scoped, named after the queue) for every node, parents first: each
    child depends on its parent because KAI's queue webhook looks the parent up when the child is created.
    ``depends_on`` should hold ``KaiScheduler.chart`` (CRD and webhook). See KAI ``docs/queues/README.md``.
    """

    queues: dict[str, CustomResource]
    """Queue resources by queue name (for ``depends_on``)."""
    queue_names: pulumi.Output[list[str]]
    """Every queue, parents first."""
    leaf_queue_names: pulumi.Output[list[str]]
    """Queues that take workloads (the ``kai.scheduler/queue`` label must name one of these)."""

    def __init__(
        self, name: str, args: QueueTreeArgs, *,
        depends_on: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpuscale:index:QueueTree", name, None, opts)
        self.queues = {}
        for queue, parent in args.platform.queues():
            body = queue_body(queue, parent)
            after = [*depends_on, self.queues[parent.name]] if parent is not None else list(depends_on)
            self.queues[queue.name] = CustomResource(
                f"{name}-{queue.name}",
                api_version=body["apiVersion"],
                kind=body["kind"],
                metadata=body["metadata"],
                spec=body["spec"],
                opts=pulumi.ResourceOptions(parent=self, depends_on=after),
            )
        self.queue_names = pulumi.Output.from_input([q.name for q, _ in args.platform.queues()])
        self.leaf_queue_names = pulumi.Output.from_input(args.platform.leaf_queue_names())
        self.register_outputs({"queue_names": self.queue_names, "leaf_queue_names": self.leaf_queue_names})
