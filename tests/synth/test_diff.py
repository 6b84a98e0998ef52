"""Synth diff: field paths, GPU-node and autoscaling highlights first, markdown bounded for a PR comment."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest

from gpuscale.spec.platform import PlatformSpec
from gpuscale.synth.diff import (
    NotASynthDirError,
    SynthDiff,
    diff_synth_dirs,
    diff_values,
    load_synth,
    render_markdown,
    render_text,
)
from gpuscale.synth.render import synth_spec, synthesize
from tests.specs import small_raw
from tests.synth.programs import Knobs, platform_program


@functools.cache
def synth_dir(root: Path, knobs: Knobs) -> Path:
    out = root / f"synth-{abs(hash(knobs))}"
    synthesize(platform_program(knobs), region="us-east-1", stack="test").write(out)
    return out


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("synths")


def diff(root: Path, base: Knobs, head: Knobs) -> SynthDiff:
    return diff_synth_dirs(synth_dir(root, base), synth_dir(root, head))


def messages(d: SynthDiff, category: str) -> list[str]:
    return [f"{h.label}: {h.message}" for h in d.highlights if h.category == category]


def test_a_synth_against_itself_has_no_differences(root: Path) -> None:
    d = diff(root, Knobs(), Knobs())
    assert not d.different
    assert d.resources == () and d.highlights == () and d.unchanged == 14
    assert "No differences." in render_text(d)
    assert "No differences" in render_markdown(d)


def test_a_changed_threshold_names_the_field_path(root: Path) -> None:
    d = diff(root, Knobs(), Knobs(prefill_threshold="6"))
    assert d.different
    [changed] = d.resources
    assert (changed.key, changed.status) == ("kubernetes:keda.sh/v1alpha1:ScaledObject::test-llama-prefill-scaler", "changed")
    [field] = changed.changes
    assert (field.path, field.before, field.after) == ("/spec/triggers/0/metadata/threshold", "4", "6")
    assert messages(d, "autoscaling") == [
        'ScaledObject inference/llama-prefill: /spec/triggers/0/metadata/threshold: "4" -> "6"'
    ]
    text = render_text(d)
    assert '~ /spec/triggers/0/metadata/threshold: "4" -> "6"' in text
    assert text.index("Autoscaling thresholds") < text.index("Resources:")  # the summary comes first


def test_decode_max_replicas_is_an_autoscaling_change(root: Path) -> None:
    d = diff(root, Knobs(), Knobs(decode_max_replicas=12))
    assert messages(d, "autoscaling") == ["ScaledObject inference/llama-decode: /spec/maxReplicaCount: 8 -> 12"]


def test_a_new_ami_is_highlighted_as_gpu_node_replacement(root: Path) -> None:
    d = diff(root, Knobs(), Knobs(ami_alias="al2023@v20260714"))
    [msg] = messages(d, "gpu-nodes")
    assert msg.startswith("EC2NodeClass h100: drift: new AMI (/spec/amiSelectorTerms/0/alias: ")
    assert '"al2023@v20260625" -> "al2023@v20260714"' in msg
    assert "every node launched from this EC2NodeClass will be replaced" in msg and "cold start" in msg
    # how it rolls, read from the NodePool that uses the class: one at a time, no window, PDBs respected
    assert msg.endswith(
        "drifted nodes roll 1 at a time at any hour (no drift window); each node waits until the PDBs of its pods "
        "allow the eviction (a role at its ready floor holds it)"
    )
    text = render_text(d)
    assert text.index("GPU nodes replaced or disrupted (1):") < text.index("Resources:")
    md = render_markdown(d)
    assert md.index("GPU nodes replaced or disrupted") < md.index("Details")


WINDOW = '[{"nodes": "1"}, {"nodes": "0", "reasons": ["Drifted"], "schedule": "0 6 * * *", "duration": "20h"}]'


def test_an_ami_bump_says_in_which_drift_window_nodes_roll(root: Path) -> None:
    d = diff(root, Knobs(budgets_json=WINDOW), Knobs(budgets_json=WINDOW, ami_alias="al2023@v20260714"))
    [msg] = messages(d, "gpu-nodes")
    assert ("drifted nodes roll 1 at a time, only in the drift window daily 02:00 UTC for 4h "
            "(frozen from cron '0 6 * * *' for 20h)") in msg


def test_a_freeze_written_in_seconds_reads_as_its_window(root: Path) -> None:
    seconds = WINDOW.replace('"20h"', '"72000s"')  # Karpenter and the spec accept seconds
    d = diff(root, Knobs(budgets_json=seconds), Knobs(budgets_json=seconds, ami_alias="al2023@v20260714"))
    [msg] = messages(d, "gpu-nodes")
    assert "only in the drift window daily 02:00 UTC for 4h (frozen from cron '0 6 * * *' for 72000s)" in msg


def test_a_drift_window_change_reads_as_the_window_not_the_freeze_budget(tmp_path: Path) -> None:
    """A PR that widens prod's Sunday window from 4h to 6h, synthesized from its stacks as the PR preview does."""
    def stack(duration: str) -> Path:
        raw = small_raw()
        raw["topology"]["gpu_pools"][0]["drift_window"] = {"start_utc": "06:00", "duration": duration, "day": "sun"}
        out = tmp_path / duration
        synth_spec(PlatformSpec.model_validate(raw)).write(out)
        return out

    d = diff_synth_dirs(stack("4h"), stack("6h"))
    [msg] = messages(d, "gpu-nodes")
    assert msg == "NodePool l40s: drift window: sun 06:00 UTC for 4h -> sun 06:00 UTC for 6h"
    assert '"164h"' not in msg and "0 12 * * sun" not in msg


def test_an_ami_bump_under_a_grace_period_warns_of_forced_eviction(root: Path) -> None:
    d = diff(root, Knobs(termination_grace_period="4m"), Knobs(termination_grace_period="4m", ami_alias="al2023@v20260714"))
    [msg] = messages(d, "gpu-nodes")
    assert "terminationGracePeriod 4m: drift disrupts a node despite PDBs" in msg and "force-deletes" in msg


def test_a_frozen_pool_says_no_node_rolls(root: Path) -> None:
    frozen = '[{"nodes": "0", "reasons": ["Drifted"]}, {"nodes": "1"}]'
    d = diff(root, Knobs(budgets_json=frozen), Knobs(budgets_json=frozen, ami_alias="al2023@v20260714"))
    [msg] = messages(d, "gpu-nodes")
    assert "drift frozen (a Drifted budget of 0 nodes with no schedule): no node rolls" in msg


def test_taint_and_requirement_changes_drift_gpu_nodes(root: Path) -> None:
    d = diff(root, Knobs(), Knobs(taint_value="yes"))
    [msg] = messages(d, "gpu-nodes")
    assert "NodePool h100: drift: /spec/template/spec/taints/0/value changed" in msg
    assert "every node of this NodePool will be replaced" in msg


def test_disruption_and_limit_changes_are_highlighted_without_drift(root: Path) -> None:
    d = diff(root, Knobs(), Knobs(consolidation_policy="WhenEmptyOrUnderutilized", consolidate_after="5m",
                                  gpu_limit=32))
    msgs = messages(d, "gpu-nodes")
    assert len(msgs) == 2
    assert msgs[0].startswith("NodePool h100: disruption behaviour: ")
    assert '/spec/disruption/consolidateAfter: "1h" -> "5m"' in msgs[0]
    assert '/spec/disruption/consolidationPolicy: "WhenEmpty" -> "WhenEmptyOrUnderutilized"' in msgs[0]
    assert msgs[1] == "NodePool h100: capacity ceiling: /spec/limits/nvidia.com~1gpu: 64 -> 32"
    assert not any("drift" in m for m in msgs)


def test_pod_template_changes_are_gpu_rollouts(root: Path) -> None:
    d = diff(root, Knobs(), Knobs(vllm_tag="v0.34.0"))
    msgs = messages(d, "rollout")
    assert len(msgs) == 2
    assert msgs[0].startswith("Deployment inference/llama-prefill: /spec/template/spec/containers/0/image changed")
    assert "every GPU pod restarts" in msgs[0]
    assert msgs[1].startswith("LeaderWorkerSet inference/llama-decode: /spec/leaderWorkerTemplate/")


def test_chart_version_bump_is_an_upgrade(root: Path) -> None:
    d = diff(root, Knobs(), Knobs(keda_version="2.21.0"))
    assert messages(d, "upgrade") == ['Chart test-keda: /version: "2.20.2" -> "2.21.0"']


def test_added_and_removed_resources_are_counted_by_kind(root: Path) -> None:
    d = diff(root, Knobs(extra_models=2), Knobs(extra_models=1))
    assert [(r.status, r.key) for r in d.resources] == [
        ("removed", "kubernetes:apps/v1:Deployment::test-extra-001"),
        ("removed", "kubernetes:keda.sh/v1alpha1:ScaledObject::test-extra-001-scaler"),
    ]
    assert d.counts["removed"] == {"Deployment": 1, "ScaledObject": 1}
    assert "2 removed" in render_text(d) and "removed: 1 Deployment, 1 ScaledObject" in render_text(d)
    assert messages(d, "autoscaling") == ["ScaledObject inference/extra-001: autoscaler removed"]


def write_synth(path: Path, resources: list[dict[str, Any]], outputs: dict[str, Any] | None = None) -> Path:
    path.mkdir(parents=True)
    doc = {"format": "gpuscale-synth/1", "stack": path.name, "resources": resources, "outputs": outputs or {}}
    (path / "resources.json").write_text(json.dumps(doc))
    return path


def scaled_object(i: int, threshold: str) -> dict[str, Any]:
    return {
        "key": f"kubernetes:keda.sh/v1alpha1:ScaledObject::so-{i}", "type": "kubernetes:keda.sh/v1alpha1:ScaledObject",
        "name": f"so-{i}", "custom": True, "parent": None, "provider": None, "dependsOn": [],
        "inputs": {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
                   "metadata": {"name": f"model-{i}", "namespace": "inference"},
                   "spec": {"triggers": [{"type": "prometheus", "metadata": {
                       "query": f"sum(vllm:num_requests_waiting{{model='m{i}'}})", "threshold": threshold}}],
                       "args": [f"--model-{i}-flag-{j}" for j in range(30 if threshold == "new" else 5)]}},
    }


def test_markdown_of_a_huge_synthetic_diff_stays_under_the_limit(tmp_path: Path) -> None:
    n = 1000
    base = write_synth(tmp_path / "base", [scaled_object(i, str(i)) for i in range(n)], {"x": 1})
    head = write_synth(tmp_path / "head", [scaled_object(i, "new") for i in range(1, n + 1)], {"x": 2})
    d = diff_synth_dirs(base, head)
    assert len(d.resources) == n + 1 and len(d.highlights) == n + 1
    assert len(render_text(d)) > 5 * 60_000  # far beyond the comment's limit
    md = render_markdown(d)
    assert len(md) <= 60_000
    assert md.startswith("### gpuscale synth diff: `base` → `head`")
    assert "**1 added, 1 removed, 999 changed, 0 unchanged; 1 stack output field(s) differ**" in md
    assert "#### Autoscaling thresholds and signals (1001)" in md
    note = md.rstrip().splitlines()[-1]
    assert note.startswith("_") and "highlight(s) left out" in note and "resource(s) left out" in note
    kept = md.count("<details>") + md.count("\n- <code>")
    left_out = int(note.split("details of ")[1].split(" resource")[0])
    assert kept + left_out == n + 1  # every resource is either shown or counted
    small = render_markdown(d, limit=5_000)
    assert len(small) <= 5_000 and "Autoscaling thresholds" in small


def test_identical_changes_on_many_resources_collapse_into_one_block(root: Path) -> None:
    base = Knobs(extra_models=40)
    head = Knobs(extra_models=40, ami_alias="al2023@v20260714", prefill_threshold="9",
                 extra_args=tuple(f"--flag-{i}=value-{i}" for i in range(40)))
    d = diff(root, base, head)
    assert len(d.resources) == 84
    md = render_markdown(d)
    assert "left out" not in md  # nothing lost: 40 equal Deployment changes are one block
    assert "new AMI" in md
    assert "**41 resources** (ScaledObject inference/extra-000, " in md
    assert "41 × Deployment with the same 40 fields changed" in md  # llama-prefill's args changed alike
    assert len(md) < 20_000


def test_markdown_lists_details_in_collapsible_blocks(root: Path) -> None:
    md = render_markdown(diff(root, Knobs(), Knobs(prefill_threshold="6")))
    assert "<details><summary>~ <code>kubernetes:keda.sh/v1alpha1:ScaledObject::test-llama-prefill-scaler</code>" in md
    assert '~ /spec/triggers/0/metadata/threshold: "4" -> "6"' in md


def test_reparenting_is_a_replacement(tmp_path: Path) -> None:
    def write(path: Path, parent: str) -> Path:
        entry = {"key": "aws:iam/role:Role::r", "type": "aws:iam/role:Role", "name": "r", "custom": True,
                 "parent": parent, "provider": None, "dependsOn": [], "inputs": {"name": "r"}}
        path.mkdir()
        (path / "resources.json").write_text(json.dumps({"format": "gpuscale-synth/1", "resources": [entry]}))
        return path

    d = diff_synth_dirs(write(tmp_path / "a", "gpuscale:index:Old::x"), write(tmp_path / "b", "gpuscale:index:New::x"))
    [h] = d.highlights
    assert h.category == "replacement"
    assert "the URN changes, so Pulumi deletes and recreates it" in h.message


def test_lists_match_by_name_and_scalar_insertions_are_one_change() -> None:
    a = {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "1"}], "args": ["--x", "--y", "--z"]}
    b = {"containers": [{"name": "b", "image": "2"}, {"name": "a", "image": "1"}], "args": ["--x", "--new", "--y", "--z"]}
    changes = [(c.path, c.kind) for c in diff_values(a, b)]
    assert changes == [("/args/1", "added"), ("/containers/0/image", "changed")]
    labels = diff_values({"labels": {"gpuscale.io/role": "prefill"}}, {"labels": {"gpuscale.io/role": "decode"}})
    assert [c.path for c in labels] == ["/labels/gpuscale.io~1role"]


def test_a_directory_that_is_not_a_synth_is_refused(tmp_path: Path) -> None:
    with pytest.raises(NotASynthDirError, match=r"no resources\.json"):
        load_synth(tmp_path)
    (tmp_path / "resources.json").write_text('{"resources": []}')
    with pytest.raises(NotASynthDirError, match="format"):
        load_synth(tmp_path)
    with pytest.raises(NotASynthDirError, match="no such directory"):
        load_synth(tmp_path / "missing")
