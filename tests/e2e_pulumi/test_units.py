"""Runs everywhere (no engine): the engine tier's program and comparison, under mocks.

The Kubernetes half the engine deploys (``e2e.pulumi_engine_program.cluster_half``) is composed apart from
``InferencePlatform``; these tests hold it to the platform program: for every shipped stack it registers the same
Kubernetes objects with the same inputs as ``gpuscale synth``, except what it leaves out and the listed differences,
each with its reason. So the engine tier's verdict on the cluster half is a verdict on the platform program."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi_kubernetes as k8s
import pytest

from e2e.pulumi_engine_compare import KNOWN_DIFFERENCES, compare, differences, is_object, strip_skip_await
from e2e.pulumi_engine_program import SKIP_AWAIT, cluster_half, left_out, with_skip_await
from gpuscale.stackfile import load_stack_file
from gpuscale.synth.render import synth_spec, synthesize

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted((REPO / "stacks").glob("Pulumi.*.yaml"))


def half_objects(stack_file: Path) -> dict[str, dict[str, Any]]:
    spec = load_stack_file(stack_file)
    result = synthesize(lambda: cluster_half(spec, k8s.Provider("local-cluster", kubeconfig="unused under mocks")),
                        region=spec.environment.aws_region, stack=spec.environment.name)
    return {f"{r['type']}::{r['name']}": r["inputs"] for r in result.resources if r["custom"] and is_object(r["type"])}


@pytest.mark.parametrize("stack_file", SHIPPED, ids=[p.name.split(".")[1] for p in SHIPPED])
def test_the_cluster_half_emits_what_the_platform_program_does(stack_file: Path, tmp_path: Path) -> None:
    spec = load_stack_file(stack_file)
    synth_spec(spec).write(tmp_path)
    result = compare(stack_file.name, tmp_path / "resources.json", half_objects(stack_file), left_out(spec))
    assert not result.unexplained, result.unexplained
    assert len(result.same) >= 10, result.same
    # every known difference is there for a reason that applies: the node role, on every EC2NodeClass compared
    assert {p for d in result.known.values() for p in d} == {p for (_, p) in KNOWN_DIFFERENCES}
    # what is not compared is only chart components' objects and the left-out components' (prod's EFA pool)
    assert all("Helm chart" in why or "placement group" in why for why in result.not_in_engine.values())


def test_prod_leaves_out_only_its_placement_group_pool() -> None:
    assert left_out(load_stack_file(REPO / "stacks" / "Pulumi.prod.yaml")).keys() == {"gpuscale-h100"}
    assert left_out(load_stack_file(REPO / "stacks" / "Pulumi.dev.yaml")) == {}


@pytest.mark.parametrize("metadata", [
    {"name": "a"}, {"name": "a", "annotations": {"gpuscale.io/x": "1"}}, {"name": "a", "annotations": {}},
])
def test_skip_await_is_added_and_the_comparison_removes_exactly_it(metadata: dict[str, Any]) -> None:
    annotated = with_skip_await(metadata)
    assert annotated["annotations"][SKIP_AWAIT] == "true"
    assert {k: v for k, v in annotated["annotations"].items() if k != SKIP_AWAIT} == (metadata.get("annotations") or {})
    expected = {"name": "a", **({"annotations": metadata["annotations"]} if metadata.get("annotations") else {})}
    assert strip_skip_await({"metadata": annotated, "spec": {}}) == {"metadata": expected, "spec": {}}


def test_differences_name_each_path() -> None:
    a = {"spec": {"x": [1, {"y": 2}], "only_a": 1}, "same": "s"}
    b = {"spec": {"x": [1, {"y": 3}]}, "same": "s"}
    assert list(differences(a, b)) == ["spec.only_a", "spec.x[1].y"]
    assert list(differences([1], [1, 2])) == ["(whole value)"]
