"""The replace-on-data rule through the real engine: a ConfigMap whose data changes is replaced through a provider
with the defaults and updated in place through one made as gpuscale makes its own, and ``gpuscale diff`` of the synth
before and after predicts each (``planned_op``) as the engine plans it, then takes it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from e2e.pulumi_engine import Engine, Events
from e2e.pulumi_engine_cluster import LocalCluster
from e2e.pulumi_engine_compare import is_object
from e2e.pulumi_engine_program import config_map_program
from gpuscale.synth.diff import Synth, diff_synths, load_synth, planned_op

REPO = Path(__file__).resolve().parents[2]
BEFORE, AFTER = '{"title": "before"}', '{"title": "after"}'


def synths(out: Path, name: str, gpuscale_provider: bool) -> tuple[Synth, Synth]:
    """``config_map_program`` holding ``BEFORE``, then ``AFTER``, under gpuscale's synth mocks, in one process of its
    own (the mocks never meet the engine)."""
    code = ("import sys; from pathlib import Path; from gpuscale.synth.render import synthesize; "
            "from e2e.pulumi_engine_program import config_map_program\n"
            "for data, side in zip(sys.argv[3:5], ('before', 'after')):\n"
            "    synthesize(config_map_program(sys.argv[1], data, gpuscale_provider=sys.argv[2] == '1', "
            "kubeconfig='unused under mocks'), region='us-east-1', stack='board').write(Path(sys.argv[5]) / side)")
    subprocess.run([sys.executable, "-c", code, name, "1" if gpuscale_provider else "0", BEFORE, AFTER, str(out)],
                   cwd=REPO, check=True, timeout=300, capture_output=True)
    return load_synth(out / "before"), load_synth(out / "after")


@pytest.mark.parametrize(("gpuscale_provider", "op"), [(False, "replace"), (True, "update")],
                         ids=["provider_defaults", "gpuscale_provider"])
def test_a_configmaps_data_change_is_replaced_exactly_where_the_diff_says(
        scenario: Any, engine: Engine, cluster: LocalCluster, tmp_path: Path, gpuscale_provider: bool, op: str) -> None:
    name = f"board-{'gpuscale' if gpuscale_provider else 'defaults'}"
    scenario.name = f"configmap_data_change_{name}"
    stack = engine.stack(name, config_map_program(name, BEFORE, gpuscale_provider=gpuscale_provider),
                         kubeconfig=cluster.inline_kubeconfig())
    try:
        stack.up(on_event=Events(), color="never")
        before, after = synths(tmp_path, name, gpuscale_provider)
        [changed] = [d for d in diff_synths(before, after).resources if is_object(d.type)]
        predicted = planned_op(changed, before, after)
        scenario.observed["predicted"] = {changed.key: predicted}
        assert predicted == op

        changed_program = config_map_program(name, AFTER, gpuscale_provider=gpuscale_provider)
        planned = Events()
        stack.preview(program=changed_program, on_event=planned, color="never")
        scenario.observed["preview"] = planned.planned(is_object)
        assert planned.planned(is_object) == {changed.key: predicted}, "the engine plans another step than the diff"
        taken = Events()
        stack.up(program=changed_program, on_event=taken, color="never")
        scenario.observed["up"] = taken.planned(is_object)
        assert taken.planned(is_object) == {changed.key: predicted}
        live = cluster.kubectl.get("configmap", name, namespace="default")
        assert live["data"] == {"board.json": AFTER}
    finally:
        stack.destroy(color="never")
        stack.workspace.remove_stack(name, force=True)
