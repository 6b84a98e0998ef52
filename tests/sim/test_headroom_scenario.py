"""The ``headroom`` scenario: warm nodes take the node's wait off a scale-up's first answer, placeholders also the image
pull, and the spare GPUs are paid for; sized from ``gpuscale.headroom`` at the undiscounted target."""

from __future__ import annotations

from functools import cache

from gpuscale.headroom import KARPENTER_BATCH_MAX_S
from gpuscale.sim.metrics import ScenarioResult
from gpuscale.sim.runner import Runner
from gpuscale.sim.scenarios import build_scenario, findings
from gpuscale.sim.scenarios.headroom import (
    NO_HEADROOM,
    PLACEHOLDERS_DELAYED,
    WARM_NODES,
    WARM_NODES_IMAGE,
    WARM_REPLICAS,
)
from gpuscale.sizing import size_platform
from gpuscale.spec.platform import PlatformSpec
from tests.sim.conftest import spec_of


def bursty() -> PlatformSpec:
    """The tiny stack with bursts (x2 for 10 min, 3 an hour) that outlast a replica's load on a spare node."""
    raw = spec_of("tiny-aggregated").model_dump(mode="json")
    raw["models"][0]["workload"].update(base_rps=0.5, peak_rps=6.0, burst={"multiplier": 2.0, "duration_s": 600, "per_hour": 3})
    return PlatformSpec.model_validate(raw)


@cache
def result() -> tuple[ScenarioResult, list[str]]:
    sc = build_scenario("headroom", bursty(), duration_s=3600.0)
    res = Runner(sc, seed=0, policies=[NO_HEADROOM, WARM_NODES, WARM_NODES_IMAGE, PLACEHOLDERS_DELAYED]).run()
    return res, findings(sc, res)


def test_variants_and_the_buffer_they_run_with() -> None:
    sc = build_scenario("headroom", bursty(), duration_s=600.0)
    by = {v.name: v for v in sc.variants}
    assert list(by) == [NO_HEADROOM, WARM_REPLICAS, WARM_NODES, WARM_NODES_IMAGE, PLACEHOLDERS_DELAYED, "ceiling"]
    assert by[NO_HEADROOM].headroom is None and by[WARM_REPLICAS].headroom is None
    nodes, image = by[WARM_NODES].headroom, by[WARM_NODES_IMAGE].headroom
    assert nodes is not None and image is not None
    assert nodes.pods == image.pods == sc.parameters["spare_pods"] >= 1
    assert not nodes.prepull and image.prepull
    # the emitted rule: placeholders are evicted at once; the comparison keeps the serving pods' node-time delay
    delayed = by[PLACEHOLDERS_DELAYED].headroom
    assert delayed is not None and delayed.prepull and delayed.pods == image.pods
    assert image.preemption_delay_s == 0
    assert delayed.preemption_delay_s == size_platform(bursty()).models[0].preemption_delay_s == 90
    # the warm-node variants scale at the undiscounted target; warm replicas at the stack's own sizing
    assert by[WARM_NODES].sizing is not None and by[WARM_REPLICAS].sizing is None
    assert all(r.target_utilisation == 0.7 for r in by[WARM_NODES].sizing.values())


def test_warm_nodes_shorten_scale_ups_by_the_node_wait_and_placeholders_by_the_image_too() -> None:
    res, _ = result()
    by = {r.name: r for r in res.results}
    cold, nodes, image = (by[n].nodes for n in (NO_HEADROOM, WARM_NODES, WARM_NODES_IMAGE))
    assert cold.scale_ups and nodes.scale_ups and image.scale_ups
    assert cold.scale_up_ready_mean_s is not None and nodes.scale_up_ready_mean_s is not None
    assert image.scale_up_ready_mean_s is not None
    # each scale-up a spare node serves saves the node wait (batch window, launch to Ready, GPU registration) less
    # the batch window's spread; the buffer refills only at its reconcile plus a node wait, so a scale-up soon after
    # the last may find it empty: at least the spare nodes' share of the scale-ups is served (the first, at least)
    params = build_scenario("headroom", bursty(), duration_s=3600.0).parameters
    served = min(1.0, params["spare_nodes"] / nodes.scale_ups)
    saving = (params["node_wait_s"] - KARPENTER_BATCH_MAX_S) * served
    assert cold.scale_up_ready_mean_s - nodes.scale_up_ready_mean_s > saving > 0
    assert image.scale_up_ready_mean_s < nodes.scale_up_ready_mean_s
    assert by[WARM_NODES].misses.total < by[NO_HEADROOM].misses.total
    assert by[WARM_NODES].gpu_hours > by[NO_HEADROOM].gpu_hours  # the spare GPUs are charged


def test_findings_price_what_each_saves() -> None:
    _, lines = result()
    assert any(line.startswith(f"{WARM_NODES} vs {NO_HEADROOM}: +") and "per 1,000 requests saved" in line for line in lines)


def test_a_preemption_delay_holds_the_placeholders_gpus_for_the_node_time_they_exist_to_save() -> None:
    res, lines = result()
    by = {r.name: r for r in res.results}
    image, delayed, cold = (by[n].nodes for n in (WARM_NODES_IMAGE, PLACEHOLDERS_DELAYED, NO_HEADROOM))
    assert image.scale_up_ready_mean_s is not None and delayed.scale_up_ready_mean_s is not None
    assert cold.scale_up_ready_mean_s is not None
    # a replica that could bind on a placeholder's node at once waits the 90 s delay (or a new node, if sooner)
    assert delayed.scale_up_ready_mean_s - image.scale_up_ready_mean_s > 45.0
    assert by[PLACEHOLDERS_DELAYED].misses.total > by[WARM_NODES_IMAGE].misses.total
    assert any(line.startswith(f"{PLACEHOLDERS_DELAYED} vs {NO_HEADROOM}") for line in lines)
