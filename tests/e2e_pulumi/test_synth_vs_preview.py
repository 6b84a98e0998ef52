"""The PR preview path: for every shipped stack, ``gpuscale synth`` (what reviewers read) against what the real
engine plans for its Kubernetes half (``pulumi preview`` of a new stack on the local cluster), object by object."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from e2e import acceptance
from e2e.pulumi_engine import Engine, Events
from e2e.pulumi_engine_cluster import LocalCluster
from e2e.pulumi_engine_compare import compare, engine_objects
from e2e.pulumi_engine_program import left_out, stack_program
from gpuscale.stackfile import load_stack_file

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted((REPO / "stacks").glob("Pulumi.*.yaml"))


@pytest.mark.parametrize("stack_file", SHIPPED, ids=[p.name.split(".")[1] for p in SHIPPED])
def test_synth_matches_the_engines_preview(scenario: Any, engine: Engine, cluster: LocalCluster,
                                          stack_file: Path, tmp_path: Path) -> None:
    name = stack_file.name.split(".")[1]
    scenario.name = f"synth_vs_preview_{name}"
    resources = acceptance.synth(stack_file, tmp_path / "synth").parent / "resources.json"
    stack = engine.stack(f"preview-{name}", stack_program(), stack_file=stack_file, kubeconfig=cluster.inline_kubeconfig())
    events = Events()
    try:
        stack.preview(on_event=events, color="never")
    finally:
        stack.workspace.remove_stack(f"preview-{name}", force=True)
    result = compare(name, resources, engine_objects(events.steps()), left_out(load_stack_file(stack_file)))
    scenario.observed.update(result.as_json())
    assert result.same, "no object compared"
    assert not result.unexplained, result.unexplained
