"""Layer 2 placement: all-or-nothing gangs vs pod-by-pod binding."""

from __future__ import annotations

from gpuscale.sim.nodes import Node
from gpuscale.sim.placement import nodes_for, place_gang, place_one, unplaced
from gpuscale.sim.states import NodeState


def nodes_with_free(*free: int) -> list[Node]:
    out = []
    for i, f in enumerate(free):
        n = Node(i + 1, 8, 0.0, foreign=8 - f)
        n.state = NodeState.READY
        out.append(n)
    return out


def test_gang_of_8_does_not_fit_7_free_gpus() -> None:
    nodes = nodes_with_free(3, 2, 2)
    assert place_gang([1] * 8, nodes, "binpack") is None
    assert [n.nid for n in place_gang([1] * 7, nodes, "binpack") or []] == [1, 1, 1, 2, 2, 3, 3]


def test_gang_prefers_one_node() -> None:
    nodes = nodes_with_free(3, 2, 2, 8)
    assert {n.nid for n in place_gang([1] * 8, nodes, "binpack") or []} == {4}


def test_default_scheduler_binds_pods_one_by_one() -> None:
    nodes = nodes_with_free(3, 2, 2)
    bound = 0
    for _ in range(8):
        n = place_one(1, nodes, "spread")
        if n is not None:
            n.free -= 1
            bound += 1
    assert bound == 7 and sum(n.free for n in nodes) == 0


def test_binpack_and_spread() -> None:
    nodes = nodes_with_free(4, 8)
    assert place_one(4, nodes, "binpack").nid == 1  # type: ignore[union-attr]
    assert place_one(4, nodes, "spread").nid == 2  # type: ignore[union-attr]
    assert place_one(9, nodes, "spread") is None


def test_provisioner_view_is_pod_by_pod() -> None:
    assert unplaced([1] * 8, [3, 2, 2]) == [1]  # Karpenter launches for one pod, not the gang
    assert unplaced([4, 4], [4, 2]) == [4]
    assert nodes_for([4, 4, 4], 8) == 2 and nodes_for([1] * 9, 8) == 2
