"""The offline synth of the real stacks: deterministic, schema-valid to the shared standard, diffable."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from gpuscale.cli import app
from gpuscale.spec.platform import PlatformSpec
from gpuscale.synth.render import SynthResult, synth_spec
from tests.conftest import STACKS, requires_shared, stack_path
from tests.k8s_schema import validate_object

runner = CliRunner()


@pytest.fixture(scope="module")
def synths(stack_synths: dict[str, SynthResult]) -> dict[str, SynthResult]:
    return stack_synths


@pytest.mark.parametrize("stack", STACKS)
def test_synth_is_byte_identical_twice(stack_specs: dict[str, PlatformSpec], synths: dict[str, SynthResult], stack: str) -> None:
    again = synth_spec(stack_specs[stack], stack=stack)
    assert again.files() == synths[stack].files()


@requires_shared
@pytest.mark.parametrize("stack", STACKS)
def test_every_manifest_is_valid(synths: dict[str, SynthResult], stack: str) -> None:
    objects = [obj for _, obj in synths[stack].kubernetes_objects()]
    kinds = {o["kind"] for o in objects}
    assert {"NodePool", "EC2NodeClass", "Queue", "Topology", "Deployment", "Service", "PodDisruptionBudget"} <= kinds
    problems = {f"{o['kind']}/{o['metadata']['name']}": p for o in objects if (p := validate_object(o))}
    assert problems == {}


def test_secrets_never_reach_the_synth(synths: dict[str, SynthResult]) -> None:
    files = synths["prod"].files()
    resources = files["resources.json"]
    assert "[secret]" in resources  # the kubeconfig output is a secret
    assert "BEGIN CERTIFICATE" not in resources and "LS0tLS1CRUdJTi" not in resources


def test_gpu_nodepools_are_safe_in_every_stack(synths: dict[str, SynthResult]) -> None:
    for stack, synth in synths.items():
        pools = [o for _, o in synth.kubernetes_objects() if o["kind"] == "NodePool" and o["metadata"]["name"] != "cpu"]
        assert pools, stack
        for p in pools:
            assert p["spec"]["disruption"]["consolidationPolicy"] == "WhenEmpty"
            assert p["spec"]["disruption"]["consolidateAfter"] == "1h"
            assert {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"} in p["spec"]["template"]["spec"]["taints"]
            assert int(p["spec"]["limits"]["nvidia.com/gpu"]) > 0


def test_cli_synth_and_diff(tmp_path: Path) -> None:
    for stack in ("dev", "prod"):
        result = runner.invoke(app, ["synth", "--stack-file", str(stack_path(stack)), "--out", str(tmp_path / stack)])
        assert result.exit_code == 0, result.output
        assert (tmp_path / stack / "resources.json").is_file()
        assert any((tmp_path / stack / "manifests").glob("karpenter.sh_v1_NodePool.yaml"))
    same = runner.invoke(app, ["diff", str(tmp_path / "prod"), str(tmp_path / "prod")])
    assert same.exit_code == 0, same.output
    differ = runner.invoke(app, ["diff", str(tmp_path / "dev"), str(tmp_path / "prod")])
    assert differ.exit_code == 1
    assert "NodePool" in differ.output and "ScaledObject" in differ.output
    md = runner.invoke(app, ["diff", "--markdown", str(tmp_path / "dev"), str(tmp_path / "prod")])
    assert md.exit_code == 1 and len(md.output) < 60_000


def test_cli_synth_refuses_cross_layer_conflicts(tmp_path: Path) -> None:
    doc = yaml.safe_load(stack_path("prod").read_text())
    doc["config"]["gpuscale:models"][0]["autoscaling"]["decode"]["max_replicas"] = 20
    path = tmp_path / "Pulumi.x.yaml"
    path.write_text(yaml.safe_dump(doc))
    result = runner.invoke(app, ["synth", "--stack-file", str(path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    # summed over both roles of the model, against the leaf queue that binds (chat's quota), not one role alone
    assert "llama-70b-fp8/prefill 2 x 4 + llama-70b-fp8/decode 20 x 4 = 88 GPUs exceed queue chat gpu_quota 40" in result.output
    assert not (tmp_path / "out").exists()  # nothing half-written
    validate = runner.invoke(app, ["validate", "--stack-file", str(path)])
    assert validate.exit_code == 2 and "= 88 GPUs exceed node pool h100 gpu_limit 64" in validate.output
