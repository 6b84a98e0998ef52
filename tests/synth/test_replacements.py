"""The Kubernetes provider's replace rules (pulumi-kubernetes ``forceNewProperties`` at f47bc2d6) and what
``gpuscale diff`` predicts from them: a replace exactly where the provider would, an update elsewhere."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuscale.synth.diff import diff_synth_dirs, load_synth, planned_op
from gpuscale.synth.replacements import option_on, replacing

CM = "kubernetes:core/v1:ConfigMap"
PROVIDER = "pulumi:providers:kubernetes::k8s"


def paths(type_token: str, changes: list[tuple[str, Any]], provider: dict[str, Any] | None = None,
          inputs: dict[str, Any] | None = None) -> list[str]:
    return [p for p, _ in replacing(type_token, inputs or {}, provider, changes)]


@pytest.mark.parametrize(("provider", "inputs", "replaced"), [
    (None, {}, True),  # provider unknown: its default (off)
    ({"enableConfigMapMutable": "false"}, {}, True),
    ({"enableConfigMapMutable": "true"}, {}, False),  # the engine's form: provider inputs are JSON strings
    ({"enableConfigMapMutable": True}, {}, False),
    ({"enableConfigMapMutable": "true"}, {"immutable": True}, True),  # immutable wins over the option
])
def test_a_configmaps_data_replaces_it_unless_its_provider_allows_mutation(
        provider: dict[str, Any] | None, inputs: dict[str, Any], replaced: bool) -> None:
    changes = [("/data/board.json", "{}"), ("/metadata/labels/x", "1")]
    assert paths(CM, changes, provider, inputs) == (["/data/board.json"] if replaced else [])


def test_identity_and_immutable_fields_replace_and_nothing_else_does() -> None:
    dep = "kubernetes:apps/v1:Deployment"
    assert paths(dep, [("/metadata/name", "b"), ("/spec/replicas", 2), ("/spec/selector/matchLabels/app", "x"),
                       ("/spec/template/spec/containers/0/image", "i")]) == ["/metadata/name",
                                                                             "/spec/selector/matchLabels/app"]
    # a whole spec added holds the selector; one without it does not
    assert paths(dep, [("/spec", {"selector": {"matchLabels": {}}})]) == ["/spec"]
    assert paths(dep, [("/spec", {"replicas": 1})]) == []
    assert paths("kubernetes:core/v1:Service", [("/spec/clusterIP", "None"), ("/spec/ports/0/port", 80)]) \
        == ["/spec/clusterIP"]
    # policy/v1 PDBs are not in the provider's table (only policy/v1beta1): updated in place
    assert paths("kubernetes:policy/v1:PodDisruptionBudget", [("/spec/minAvailable", 1)]) == []
    assert paths("kubernetes:keda.sh/v1alpha1:ScaledObject", [("/spec/maxReplicaCount", 3)]) == []
    assert paths("kubernetes:core/v1:Secret", [("/data/k", "v")]) == ["/data/k"]
    assert paths("kubernetes:core/v1:Secret", [("/data/k", "v")], {"enableSecretMutable": "true"}) == []
    assert paths("aws:iam/role:Role", [("/metadata/name", "x")]) == []  # not a Kubernetes object


def test_option_values_as_the_provider_reads_them() -> None:
    assert option_on({"o": "true"}, "o") and option_on({"o": " True "}, "o") and option_on({"o": True}, "o")
    assert not option_on({"o": "1"}, "o") and not option_on({}, "o") and not option_on(None, "o")


def synth_dir(path: Path, data: str, mutable: str | None) -> Path:
    provider_inputs = {"kubeconfig": "[secret]", **({"enableConfigMapMutable": mutable} if mutable else {})}
    entries = [
        {"key": PROVIDER, "type": "pulumi:providers:kubernetes", "name": "k8s", "custom": True, "parent": None,
         "provider": None, "dependsOn": [], "inputs": provider_inputs},
        {"key": f"{CM}::board", "type": CM, "name": "board", "custom": True, "parent": None, "provider": PROVIDER,
         "dependsOn": [], "inputs": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "board"},
                                     "data": {"board.json": data}}},
    ]
    path.mkdir()
    (path / "resources.json").write_text(json.dumps({"format": "gpuscale-synth/1", "resources": entries}))
    return path


@pytest.mark.parametrize(("mutable", "op"), [(None, "replace"), ("true", "update")])
def test_the_diff_predicts_the_step_and_highlights_the_replacement(tmp_path: Path, mutable: str | None,
                                                                    op: str) -> None:
    a, b = synth_dir(tmp_path / "a", "{}", mutable), synth_dir(tmp_path / "b", '{"x": 1}', mutable)
    d = diff_synth_dirs(a, b)
    [changed] = [r for r in d.resources if r.type == CM]
    assert planned_op(changed, load_synth(a), load_synth(b)) == op
    replaced = [h.message for h in d.highlights if h.category == "replacement"]
    if op == "replace":
        [message] = replaced
        assert message.startswith("/data/board.json: ") and message.endswith(
            ": the Kubernetes provider replaces a ConfigMap whose data changes (its enableConfigMapMutable is off); "
            "Pulumi replaces it")
    else:
        assert replaced == []
