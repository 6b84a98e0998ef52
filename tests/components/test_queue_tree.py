"""QueueTree under Pulumi mocks: one Queue per team node, parents first, wired after the KAI chart."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pulumi
import pytest

from gpuscale.components.queue_tree import QueueTree, QueueTreeArgs
from gpuscale.manifests.kai import queue_bodies
from gpuscale.spec.platform import PlatformSpec
from gpuscale.synth.mocks import RecordedResource

QUEUE = "kubernetes:scheduling.run.ai/v2:Queue"


def build(run_pulumi: Callable[..., list[RecordedResource]], spec: PlatformSpec) -> tuple[list[RecordedResource], dict[str, Any]]:
    outputs: dict[str, Any] = {}

    def program() -> None:
        # a stand-in for KaiScheduler.chart: the resource every Queue must wait for
        chart = pulumi.CustomResource("test:index:Chart", "kai-chart", {})
        tree = QueueTree("queues", QueueTreeArgs(platform=spec), depends_on=[chart])
        tree.queue_names.apply(lambda v: outputs.__setitem__("queue_names", v))
        tree.leaf_queue_names.apply(lambda v: outputs.__setitem__("leaf_queue_names", v))

    return run_pulumi(program), outputs


def test_prod_tree_emits_one_queue_per_node_parents_first(run_pulumi, prod_spec: PlatformSpec) -> None:  # type: ignore[no-untyped-def]
    records, outputs = build(run_pulumi, prod_spec)
    (component,) = [r for r in records if r.type == "gpuscale:index:QueueTree"]
    queues = [r for r in records if r.type == QUEUE]
    # logical names from the component name; creation order is enforced by depends_on (next test)
    assert sorted(r.name for r in queues) == sorted(f"queues-{n}" for n in ("inference", "chat", "search", "research", "training"))
    assert all(r.parent_urn == component.urn and r.custom for r in queues)
    by_name = {r.inputs["metadata"]["name"]: r for r in queues}
    for body in queue_bodies(prod_spec):
        rec = by_name[body["metadata"]["name"]]
        assert rec.inputs["spec"] == body["spec"]
        assert rec.inputs["metadata"] == body["metadata"]
    assert outputs == {
        "queue_names": ["inference", "chat", "search", "research", "training"],
        "leaf_queue_names": ["chat", "search", "training"],
    }


def test_children_wait_for_their_parent_and_every_queue_for_the_chart(run_pulumi, prod_spec: PlatformSpec) -> None:  # type: ignore[no-untyped-def]
    records, _ = build(run_pulumi, prod_spec)
    (chart,) = [r for r in records if r.name == "kai-chart"]
    urn = {r.inputs["metadata"]["name"]: r.urn for r in records if r.type == QUEUE}
    deps = {r.inputs["metadata"]["name"]: set(r.dependencies) for r in records if r.type == QUEUE}
    assert all(chart.urn in d for d in deps.values())
    assert urn["inference"] in deps["chat"] and urn["inference"] in deps["search"]
    assert urn["research"] in deps["training"]
    assert deps["inference"] == {chart.urn} and deps["research"] == {chart.urn}


@pytest.mark.parametrize("name", ["dev", "staging", "prod"])
def test_every_stack_builds_its_tree(run_pulumi, stack_specs: dict[str, PlatformSpec], name: str) -> None:  # type: ignore[no-untyped-def]
    spec = stack_specs[name]
    records, outputs = build(run_pulumi, spec)
    names = [r.inputs["metadata"]["name"] for r in records if r.type == QUEUE]
    assert sorted(names) == sorted(q.name for q, _ in spec.queues())
    assert outputs["leaf_queue_names"] == spec.leaf_queue_names()
    assert all(m.queue in outputs["leaf_queue_names"] for m in spec.models)
