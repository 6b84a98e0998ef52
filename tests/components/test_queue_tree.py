"""QueueTree under Pulumi mocks: one Queue per team node, parents first, from the teams alone."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest
from pydantic import ValidationError

from gpuscale.components import NameClash, QueueTree, QueueTreeArgs
from gpuscale.manifests.kai import queue_bodies
from gpuscale.spec.teams import QueueSpec
from tests.components.support import Records, capture, consumer, named, of_type, run, stand_in
from tests.specs import pd_spec

QUEUE = "kubernetes:scheduling.run.ai/v2:Queue"
TEAMS = [
    QueueSpec(name="inference", gpu_quota=8, children=[QueueSpec(name="chat", gpu_quota=6), QueueSpec(name="search", gpu_quota=2)]),
    QueueSpec(name="research", children=[QueueSpec(name="training", preemptible=True)]),
]


def build(args: QueueTreeArgs) -> tuple[Records, dict[str, Any]]:
    outputs: dict[str, Any] = {}

    def program() -> None:
        chart = stand_in("kai-chart")  # stands for KaiScheduler.chart: every Queue must wait for it
        tree = QueueTree("queues", args, opts=pulumi.ResourceOptions(depends_on=[chart]))
        capture(outputs, "queue_names", tree.queue_names)
        capture(outputs, "leaf_queue_names", tree.leaf_queue_names)
        consumer("reads-leaves", tree.leaf_queue_names)

    return run(program), outputs


def test_the_teams_alone_make_one_queue_per_node() -> None:
    records, outputs = build(QueueTreeArgs(teams=TEAMS))
    component = named(records, "queues")
    queues = of_type(records, QUEUE)
    assert sorted(r.name for r in queues) == sorted(f"queues-{n}" for n in ("inference", "chat", "search", "research", "training"))
    assert all(r.parent_urn == component.urn and r.custom for r in queues)
    by_name = {r.inputs["metadata"]["name"]: r for r in queues}
    for body in queue_bodies(TEAMS):
        assert by_name[body["metadata"]["name"]].inputs["spec"] == body["spec"]
        assert by_name[body["metadata"]["name"]].inputs["metadata"] == body["metadata"]
    assert outputs == {
        "queue_names": ["inference", "chat", "search", "research", "training"],
        "leaf_queue_names": ["chat", "search", "training"],
    }


def test_names_come_from_the_queues_so_consumers_wait_for_them() -> None:
    records, _ = build(QueueTreeArgs(teams=TEAMS))
    deps = set(named(records, "reads-leaves").dependencies)
    assert {named(records, f"queues-{q}").urn for q in ("chat", "search", "training")} <= deps


def test_children_wait_for_their_parent_and_every_queue_for_the_chart() -> None:
    records, _ = build(QueueTreeArgs(teams=TEAMS))
    chart = named(records, "kai-chart").urn
    urn = {r.inputs["metadata"]["name"]: r.urn for r in of_type(records, QUEUE)}
    deps = {r.inputs["metadata"]["name"]: set(r.dependencies) for r in of_type(records, QUEUE)}
    assert all(chart in d for d in deps.values())
    assert urn["inference"] in deps["chat"] and urn["inference"] in deps["search"]
    assert urn["research"] in deps["training"]
    assert deps["inference"] == {chart} and deps["research"] == {chart}


def test_from_spec_takes_the_spec_teams() -> None:
    spec = pd_spec()
    assert QueueTreeArgs.from_spec(spec).queues() == spec.queues()


def test_repeated_names_and_a_second_tree_on_one_cluster_are_refused() -> None:
    with pytest.raises(ValidationError, match=r"queue names must be unique .*\['chat'\]"):
        QueueTreeArgs(teams=[*TEAMS, QueueSpec(name="chat")])

    def twice() -> None:
        QueueTree("a", QueueTreeArgs(teams=TEAMS))
        QueueTree("b", QueueTreeArgs(teams=TEAMS))

    with pytest.raises(NameClash, match="QueueTree 'b' would create Queue inference"):
        run(twice)
