"""The Kubernetes half of the dev stack through the real engine, in order: up, a spec change, the policy pack, a bad
stack file, the state's secrets, destroy. The tests share one stack, so each assumes the ones before it passed."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from pulumi import automation as auto

from e2e import acceptance
from e2e.kube import poll
from e2e.pulumi_engine import Engine, Events
from e2e.pulumi_engine_cluster import LocalCluster, live
from e2e.pulumi_engine_compare import (
    chart_components,
    engine_objects,
    is_object,
    not_as_set,
    strip_skip_await,
    synth_objects,
    why_absent,
)
from e2e.pulumi_engine_program import left_out, stack_program
from gpuscale.policy import pack_dir
from gpuscale.stackfile import load_stack_file
from gpuscale.synth.diff import diff_synths, load_synth, planned_op

REPO = Path(__file__).resolve().parents[2]
DEV = REPO / "stacks" / "Pulumi.dev.yaml"
STACK = "dev"
CHANGED_MAX_REPLICAS = 3
CHANGED_DRIFT_START = "03:00"
ADDED_MODEL = "llama-8b-two"

Config = dict[str, Any]


def edit_stack_file(path: Path, edit: Callable[[Config], None]) -> None:
    """Change a stack file as a user would (the YAML reloaded and written back; comments are not kept)."""
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    edit(doc["config"])
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")


def the_change(config: Config) -> None:
    """A model's maximum replicas and a pool's drift window: each updates one object in place."""
    config["gpuscale:models"][0]["autoscaling"]["aggregated"]["max_replicas"] = CHANGED_MAX_REPLICAS
    config["gpuscale:topology"]["gpu_pools"][0]["drift_window"] = {"start_utc": CHANGED_DRIFT_START}


def synth(stack_file: Path, out: Path) -> Path:
    """``resources.json`` of ``gpuscale synth --stack-file F --out DIR``, run in its own process (the mocks never
    meet the engine)."""
    return acceptance.synth(stack_file, out).parent / "resources.json"


def changes(summary: auto.UpdateSummary) -> dict[str, int]:
    """An update's resource changes by op name (``same``, ``update`` ...)."""
    return {str(getattr(op, "value", op)): n for op, n in (summary.resource_changes or {}).items()}


def resources_in_state(stack: auto.Stack) -> list[dict[str, Any]]:
    return list((stack.export_stack().deployment or {}).get("resources") or [])


def objects_live(cluster: LocalCluster, planned: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any] | None]:
    return {key: live(cluster.kubectl, key.split("::")[0], inputs) for key, inputs in planned.items()}


@pytest.fixture(scope="module")
def dev(engine: Engine, cluster: LocalCluster) -> auto.Stack:
    return engine.stack(STACK, stack_program(), stack_file=DEV, kubeconfig=cluster.inline_kubeconfig())


@pytest.fixture(scope="module")
def user_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The user's copy of the stack file, which the spec changes edit (the engine's copy is edited alike)."""
    path = tmp_path_factory.mktemp("user") / "Pulumi.dev.yaml"
    path.write_bytes(DEV.read_bytes())
    return path


@pytest.fixture(scope="module")
def created() -> dict[str, dict[str, Any]]:
    """``type::name`` -> inputs of every Kubernetes object the first ``up`` created (filled by that test)."""
    return {}


def test_up_then_preview_has_no_changes(scenario: Any, dev: auto.Stack, cluster: LocalCluster,
                                        created: dict[str, dict[str, Any]]) -> None:
    scenario.observed["cluster_start_s"] = cluster.started_s
    events = Events()
    started = time.monotonic()
    result = dev.up(on_event=events, color="never")
    scenario.observed["up_s"] = round(time.monotonic() - started, 1)
    ops = events.ops()
    created.update(engine_objects(s for s in events.steps() if s.op == auto.OpType.CREATE))
    scenario.observed["created"] = sorted(created)
    scenario.observed["summary"] = changes(result.summary)
    assert result.summary.result == "succeeded"
    assert len(created) >= 10, f"the dev stack's Kubernetes half is more than {len(created)} objects: {sorted(ops)}"
    assert {k.split("::")[0] for k in created} >= {
        "kubernetes:karpenter.sh/v1:NodePool", "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass",
        "kubernetes:scheduling.run.ai/v2:Queue", "kubernetes:kai.scheduler/v1alpha1:Topology",
        "kubernetes:apps/v1:Deployment", "kubernetes:keda.sh/v1alpha1:ScaledObject", "kubernetes:core/v1:Service",
    }
    missing = [k for k, obj in objects_live(cluster, created).items() if obj is None]
    assert not missing, f"created by the engine but not on the API server: {missing}"

    again = Events()
    started = time.monotonic()
    preview = dev.preview(expect_no_changes=True, on_event=again, color="never")
    scenario.observed["preview_s"] = round(time.monotonic() - started, 1)
    scenario.observed["preview_changes"] = preview.change_summary
    assert set(preview.change_summary) == {"same"}, preview.change_summary


def add_a_model(config: Config) -> None:
    """A second model like the first (a copy under another name, at most one replica)."""
    model = copy.deepcopy(config["gpuscale:models"][0])
    model["name"] = ADDED_MODEL
    model["autoscaling"]["aggregated"]["max_replicas"] = 1
    config["gpuscale:models"].append(model)


def expected_steps(user_file: Path, edit: Callable[[Config], None], tracked: dict[str, dict[str, Any]],
                   tmp: Path) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    """What ``gpuscale diff`` of the synth before and after ``edit`` says ``pulumi up`` will do (``planned_op``: the
    replace/update prediction reviewers read), among the objects the engine program manages: a tracked object that
    changes, or a new one outside chart and left-out components; and the synth's entries after the edit."""
    before = load_synth(synth(user_file, tmp / "before").parent)
    edit_stack_file(user_file, edit)
    after_json = synth(user_file, tmp / "after")
    after = load_synth(after_json.parent)
    charts, skipped = chart_components(after_json), left_out(load_stack_file(user_file))
    steps = {}
    for d in diff_synths(before, after).resources:
        if not is_object(d.type):
            continue
        if (d.status == "changed" and d.key in tracked) or (
                d.status == "added" and why_absent(after.resources[d.key]["parent"] or "", charts, skipped) is None):
            steps[d.key] = planned_op(d, before, after)
    return steps, synth_objects(after_json)


@pytest.mark.parametrize(("change", "kinds"), [
    # the dashboard ConfigMap shows the model's maximum: its data changes, and the provider gpuscale makes updates it
    # in place (components/kubernetes_provider.py); the diff would say replace through a provider without that option
    ("max_replicas_and_drift_window", {"update": {"kubernetes:keda.sh/v1alpha1:ScaledObject",
                                                  "kubernetes:karpenter.sh/v1:NodePool",
                                                  "kubernetes:core/v1:ConfigMap"}}),
    ("added_model", {"create": {"kubernetes:apps/v1:Deployment", "kubernetes:keda.sh/v1alpha1:ScaledObject",
                                "kubernetes:core/v1:ConfigMap"}}),
])
def test_spec_change_previews_as_exactly_the_synths_changes(
        scenario: Any, engine: Engine, dev: auto.Stack, cluster: LocalCluster, user_file: Path, tmp_path: Path,
        created: dict[str, dict[str, Any]], change: str, kinds: dict[str, set[str]]) -> None:
    assert created, "needs the first up"
    scenario.name = f"spec_change_{change}"
    edit = {"max_replicas_and_drift_window": the_change, "added_model": add_a_model}[change]
    expected, after = expected_steps(user_file, edit, created, tmp_path)
    scenario.observed["expected"] = expected
    for op, types in kinds.items():  # the change is not vacuous: it reaches the objects it is about
        assert {k.split("::")[0] for k, o in expected.items() if o == op} >= types, expected

    edit_stack_file(engine.project / f"Pulumi.{STACK}.yaml", edit)
    events = Events()
    dev.preview(on_event=events, color="never", diff=True)
    planned = events.planned(is_object)
    scenario.observed["preview"] = planned
    scenario.observed["preview_diffs"] = {f"{s.type}::{s.urn.rsplit('::', 1)[-1]}": s.diffs for s in events.steps()
                                          if is_object(s.type) and s.diffs}
    assert planned == expected, "the engine's plan is not the synth diff's (same objects, same update or replace)"

    taken = Events()
    result = dev.up(on_event=taken, color="never")
    scenario.observed["up_summary"] = changes(result.summary)  # counts components too (a new model's VllmService)
    scenario.observed["up"] = taken.planned(is_object)
    assert result.summary.result == "succeeded"
    assert taken.planned(is_object) == expected, "up took other steps than its preview planned"
    for key in expected:
        obj = live(cluster.kubectl, key.split("::")[0], after[key]["inputs"])
        assert obj is not None, key
        wanted = strip_skip_await(after[key]["inputs"]).get("spec")
        if isinstance(wanted, dict):  # every field the synth sets is live as set (the server adds defaults)
            diff = list(not_as_set(wanted, obj["spec"]))
            assert not diff, f"{key}: the live spec differs from the synth at {diff}"
        created[key] = after[key]["inputs"]


def test_policy_pack_runs_in_the_engine(scenario: Any, engine: Engine, dev: auto.Stack, created: dict[str, dict[str, Any]]) -> None:
    assert created, "needs the first up"
    events = Events()
    dev.preview(policy_packs=[engine.policy_pack()], on_event=events, color="never")
    violations = [e.policy_name for e in events.policy()]
    scenario.observed["violations_on_gpuscale_output"] = violations
    assert not violations

    def flip(args: Any) -> Any:
        # what a user's own program might do: repack GPU nodes
        import pulumi

        if args.type_ != "kubernetes:karpenter.sh/v1:NodePool" or not args.name.endswith("l40s-spot-nodepool"):
            return None
        props = dict(args.props)
        props["spec"] = pulumi.Output.from_input(props["spec"]).apply(lambda s: {
            **s, "disruption": {**s["disruption"], "consolidationPolicy": "WhenEmptyOrUnderutilized"}})
        return pulumi.ResourceTransformResult(props=props, opts=args.opts)

    flipped = Events()
    with pytest.raises(auto.CommandError) as refused:
        dev.preview(program=stack_program(transforms=[flip]), policy_packs=[engine.policy_pack()], on_event=flipped,
                    color="never")
    policy = [(e.policy_name, e.enforcement_level, e.resource_urn) for e in flipped.policy()]
    scenario.observed["violations_on_flip"] = policy
    text = str(refused.value)
    assert [p[:2] for p in policy] == [("gpu-nodepool-consolidation", "mandatory")], policy
    assert policy[0][2] and policy[0][2].endswith("::gpuscale-l40s-spot-nodepool"), policy
    assert "gpu-nodepool-consolidation" in text and "gpuscale-l40s-spot-nodepool" in text, text[-3000:]


def test_policy_pack_loads_in_the_engine_without_the_language_host(scenario: Any, engine: Engine) -> None:
    """The launcher path alone (needs no provider): the engine starts gpuscale's pack, configures it for the stack,
    and reports it by its PulumiPolicy.yaml name and version."""
    import pulumi

    def program() -> None:
        pulumi.export("nothing", "to analyze")

    stack = engine.stack("policy-load", program)
    try:
        result = stack.preview(policy_packs=[engine.policy_pack()], color="never")
    finally:
        stack.workspace.remove_stack("policy-load", force=True)
    lines = [line.strip() for line in result.stdout.splitlines() if "gpuscale@" in line]
    scenario.observed["policies"] = lines
    manifest = yaml.safe_load((pack_dir() / "PulumiPolicy.yaml").read_text(encoding="utf-8"))
    assert lines and lines[0].startswith(f"✅ gpuscale@v{manifest['version']}"), result.stdout[-2000:]


def test_bad_stack_config_is_refused_with_its_path(scenario: Any, engine: Engine, cluster: LocalCluster,
                                                   tmp_path: Path) -> None:
    bad = tmp_path / "Pulumi.bad.yaml"
    bad.write_bytes(DEV.read_bytes())
    edit_stack_file(bad, lambda c: c["gpuscale:topology"]["gpu_pools"][0].update(
        consolidation_policy="WhenEmptyOrUnderutilized"))
    stack = engine.stack("bad", stack_program(), stack_file=bad, kubeconfig=cluster.inline_kubeconfig())
    events = Events()
    try:
        with pytest.raises(auto.CommandError) as refused:
            stack.up(on_event=events, color="never")
        text = str(refused.value)
        errors = [d.message for d in events.diagnostics() if d.severity == "error"]
        scenario.observed["engine_errors"] = errors
        assert "gpuscale:topology.gpu_pools[0].consolidation_policy" in text, text[-3000:]
        assert "WhenEmpty" in text and "acknowledge_underutilized_consolidation_evicts_inference" in text
        assert "Traceback" not in text and not any("Traceback" in e for e in errors), text[-3000:]
        resources = resources_in_state(stack)
        scenario.observed["resources_in_state"] = [r["type"] for r in resources]
        assert not [r for r in resources if is_object(r["type"])], "a refused spec must create nothing"
    finally:
        stack.workspace.remove_stack("bad", force=True)


def test_stack_export_holds_no_secret(scenario: Any, engine: Engine, dev: auto.Stack, cluster: LocalCluster) -> None:
    text = engine.export(dev)
    stack_file = (engine.project / f"Pulumi.{STACK}.yaml").read_text(encoding="utf-8")
    leaked = [f for f in cluster.secret_fragments() if f in text or f in stack_file]
    scenario.observed["export_bytes"] = len(text)
    scenario.observed["ciphertexts"] = text.count('"ciphertext"')
    assert not leaked, "the client key is in the stack's state or config in plain text"
    assert text.count('"ciphertext"') >= 1, "the provider's kubeconfig should be held encrypted"
    assert "secure:" in stack_file


def test_destroy_removes_every_object(scenario: Any, dev: auto.Stack, cluster: LocalCluster,
                                      created: dict[str, dict[str, Any]]) -> None:
    assert created, "needs the first up"
    started = time.monotonic()
    result = dev.destroy(on_event=Events(), color="never")
    scenario.observed["destroy"] = changes(result.summary)

    def remaining() -> list[str]:
        return [k for k, obj in objects_live(cluster, created).items() if obj is not None]

    # namespaces finish terminating (the namespace controller of kube-controller-manager) after destroy returns
    gone = poll(lambda: not remaining(), timeout_s=180, interval_s=3)
    scenario.observed["gone_after_s"] = round(time.monotonic() - started, 1)
    assert gone, f"still on the API server: {remaining()}"
    assert not resources_in_state(dev)
