"""The CrossGuard pack shipped in gpuscale/policy/pack/: every rule is wired, and the callbacks report what the rules find.

Constructing a ``PolicyPack`` starts the analyzer's gRPC server and blocks, so the pack module builds it only when
the engine runs it as ``__main__``; here it is imported under another name and its policies are called directly,
with the SDK's own argument classes and unknown-checking property proxies.
"""

from __future__ import annotations

import copy
import importlib.util
import re
import subprocess
import sys
import tomllib
from types import ModuleType
from typing import Any

import pytest
import yaml
from pulumi_policy import (
    EnforcementLevel,
    PolicyResource,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError, unknown_checking_proxy

from gpuscale.policy import pack_dir, rules
from gpuscale.synth.render import synthesize
from tests.conftest import REPO
from tests.synth.programs import Knobs, platform_program

PACK_DIR = pack_dir()


@pytest.fixture(scope="module")
def pack() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpuscale_policy_pack", PACK_DIR / "__main__.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # not __main__: no server starts
    return module


def recorded(knobs: Knobs | None = None) -> dict[str, tuple[str, dict[str, Any]]]:
    result = synthesize(platform_program(knobs or Knobs()), region="us-east-1", stack="test")
    return {r["key"]: (r["type"], r["inputs"]) for r in result.resources}


def policy(pack: ModuleType, name: str) -> Any:
    [p] = [p for p in pack.POLICIES if p.name == name]
    return p


def run_resource(p: ResourceValidationPolicy, rtype: str, props: dict[str, Any], *, stack: str = "dev",
                 config: dict[str, Any] | None = None) -> list[str]:
    found: list[str] = []
    urn = f"urn:pulumi:{stack}::gpuscale::{rtype}::r"
    args = ResourceValidationArgs(rtype, unknown_checking_proxy(copy.deepcopy(props)), urn, "r", None,  # type: ignore[arg-type]
                                  None, config)
    p.validate(args, lambda msg, urn=None: found.append(msg))
    return found


def test_the_pack_lists_every_rule(pack: ModuleType) -> None:
    names = [p.name for p in pack.POLICIES]
    assert len(names) == len(set(names))
    assert set(names) == {*rules.RESOURCE_RULES, *rules.STACK_RULES, "prod-ami-pinned"}
    assert all(p.enforcement_level is EnforcementLevel.MANDATORY for p in pack.POLICIES)
    assert all(p.description for p in pack.POLICIES)
    assert isinstance(policy(pack, "one-autoscaler-per-workload"), StackValidationPolicy)
    assert re.match(r"^[a-zA-Z0-9-_.]{1,100}$", pack.PACK_NAME)


def test_pack_project_files_ship_with_the_package() -> None:
    assert PACK_DIR == REPO / "gpuscale" / "policy" / "pack"
    doc = yaml.safe_load((PACK_DIR / "PulumiPolicy.yaml").read_text())
    assert doc["runtime"] == "python"  # the python3 on PATH: no virtualenv outside the installed package
    assert re.match(r"^\d+\.\d+\.\d+$", doc["version"])
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert doc["version"] == project["project"]["version"]
    assert any(d.startswith("pulumi-policy") for d in project["project"]["optional-dependencies"]["policy"])
    shipped = project["tool"]["setuptools"]["package-data"]["gpuscale.policy"]
    assert sorted(shipped) == sorted(f"pack/{p.name}" for p in PACK_DIR.iterdir() if p.is_file())


@pytest.mark.parametrize("name", sorted(rules.RESOURCE_RULES))
def test_resource_policies_pass_the_compliant_program(pack: ModuleType, name: str) -> None:
    p = policy(pack, name)
    for rtype, props in recorded().values():
        assert run_resource(p, rtype, props) == [], (name, rtype)


def test_gpu_consolidation_policy_reports(pack: ModuleType) -> None:
    rtype, props = recorded(Knobs(consolidation_policy="WhenEmptyOrUnderutilized"))[
        "kubernetes:karpenter.sh/v1:NodePool::test-h100-nodepool"]
    [msg] = run_resource(policy(pack, "gpu-nodepool-consolidation"), rtype, props)
    assert "consolidationPolicy WhenEmptyOrUnderutilized" in msg


def test_gang_policy_reports(pack: ModuleType) -> None:
    rtype, props = recorded(Knobs(decode_scheduler="default-scheduler"))[
        "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet::test-llama-decode"]
    assert len(run_resource(policy(pack, "gang-scheduling-multi-pod-gpu"), rtype, props)) == 1


def test_metric_policy_reports(pack: ModuleType) -> None:
    rtype, props = recorded()["kubernetes:keda.sh/v1alpha1:ScaledObject::test-llama-decode-scaler"]
    props = copy.deepcopy(props)
    props["spec"]["triggers"][0]["metadata"]["query"] = "avg(DCGM_FI_DEV_GPU_UTIL)"
    [msg] = run_resource(policy(pack, "autoscaler-metric"), rtype, props)
    assert "DCGM_FI_DEV_GPU_UTIL" in msg


def test_prod_ami_policy_uses_the_stage_not_the_stack_name(pack: ModuleType) -> None:
    p = policy(pack, "prod-ami-pinned")
    rtype, props = recorded(Knobs(ami_alias="al2023@latest"))[
        "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass::test-h100-nodeclass"]
    assert run_resource(p, rtype, props, stack="prod") == []  # a stack's name is not its stage
    assert len(run_resource(p, rtype, props, stack="live", config={"stage": "prod"})) == 1
    tagged = copy.deepcopy(props)
    tagged["spec"]["tags"] = {**tagged["spec"].get("tags", {}), "gpuscale.io/stage": "prod"}
    assert len(run_resource(p, rtype, tagged, stack="anything")) == 1


def test_stack_policy_attributes_the_violation_to_the_second_autoscaler(pack: ModuleType) -> None:
    resources = []
    for i, (rtype, props) in enumerate(recorded().values()):
        resources.append(PolicyResource(rtype, unknown_checking_proxy(props), f"urn:pulumi:dev::gpuscale::{rtype}::r{i}",
                                        f"r{i}", None, None, None, [], {}))  # type: ignore[arg-type]
    dup_type, dup = recorded()["kubernetes:keda.sh/v1alpha1:ScaledObject::test-llama-prefill-scaler"]
    resources.append(PolicyResource(dup_type, unknown_checking_proxy(dup), "urn:pulumi:dev::gpuscale::dup::dup", "dup",
                                    None, None, None, [], {}))  # type: ignore[arg-type]
    found: list[tuple[str, str | None]] = []
    policy(pack, "one-autoscaler-per-workload").validate(
        StackValidationArgs(resources, None), lambda msg, urn=None: found.append((msg, urn))
    )
    [(msg, urn)] = found
    assert urn == "urn:pulumi:dev::gpuscale::dup::dup"
    assert "Deployment inference/llama-prefill is scaled by 2 autoscalers" in msg


UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"


def test_an_unknown_field_a_rule_reads_is_left_to_the_sdk(pack: ModuleType) -> None:
    """During preview an unknown input raises the SDK's UnknownValueError, which it reports as not checkable."""
    props = {"metadata": {"name": "x"}, "spec": {"template": UNKNOWN}}
    with pytest.raises(UnknownValueError):
        run_resource(policy(pack, "gpu-nodepool-consolidation"), rules.NODEPOOL, props)


def test_unknown_fields_no_rule_reads_do_not_block_the_policies(pack: ModuleType) -> None:
    rtype, props = recorded()["kubernetes:apps/v1:Deployment::test-llama-prefill"]
    props = copy.deepcopy(props)
    props["spec"]["template"]["spec"]["containers"][0]["image"] = UNKNOWN
    for p in pack.POLICIES:
        if isinstance(p, ResourceValidationPolicy):
            assert run_resource(p, rtype, props) == []
    rtype, props = recorded()["kubernetes:keda.sh/v1alpha1:ScaledObject::test-llama-prefill-scaler"]
    props = copy.deepcopy(props)
    props["spec"]["triggers"][0]["metadata"]["serverAddress"] = UNKNOWN  # trigger metadata is scanned whole
    with pytest.raises(UnknownValueError):
        run_resource(policy(pack, "autoscaler-metric"), rtype, props)


def test_the_pack_dir_is_not_a_package_and_the_old_one_is_gone() -> None:
    # the pack runs as a directory (`python -m pulumi.policy <dir>`); the importable rules are gpuscale.policy
    assert not (PACK_DIR / "__init__.py").exists()
    assert not (REPO / "policy").exists()


def test_the_commands_print_the_pack_dir() -> None:
    from typer.testing import CliRunner

    from gpuscale.cli import app

    result = CliRunner().invoke(app, ["policy-path"])
    assert result.exit_code == 0 and result.output.strip() == str(PACK_DIR)
    lean = subprocess.run([sys.executable, "-m", "gpuscale.policy"], capture_output=True, text=True, check=True)
    assert lean.stdout.strip() == str(PACK_DIR)
