"""Offline synth: deterministic files, redacted secrets, parents and providers by name, valid manifests."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml

from gpuscale.spec.platform import PlatformSpec
from gpuscale.synth.render import (
    REDACTED,
    UNKNOWN,
    ProgramUnavailableError,
    SynthResult,
    clean_value,
    manifest_file_name,
    synth_spec,
    synthesize,
)
from tests.conftest import requires_shared
from tests.synth.programs import SECRET_KUBECONFIG, SECRET_TOKEN, Knobs, platform_program


def synth(knobs: Knobs | None = None, stack: str = "test") -> SynthResult:
    return synthesize(platform_program(knobs or Knobs()), region="us-east-1", stack=stack)


@pytest.fixture(scope="module")
def result() -> SynthResult:
    return synth(Knobs(extra_models=3))


def by_key(result: SynthResult) -> dict[str, dict[str, Any]]:
    return {r["key"]: r for r in result.resources}


def read_tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_two_synths_of_the_same_program_are_byte_identical(tmp_path: Path) -> None:
    first, second = synth(Knobs(extra_models=3)), synth(Knobs(extra_models=3))
    first.write(tmp_path / "a")
    second.write(tmp_path / "b")
    a, b = read_tree(tmp_path / "a"), read_tree(tmp_path / "b")
    assert a == b
    assert {"resources.json", "charts.yaml", "manifests/karpenter.sh_v1_NodePool.yaml"} <= set(a)


def test_the_stack_name_only_appears_in_the_header(tmp_path: Path) -> None:
    dev, prod = synth(stack="dev").files(), synth(stack="prod").files()
    assert json.loads(dev["resources.json"])["stack"] == "dev"
    assert {k: v for k, v in dev.items() if k != "resources.json"} == {
        k: v for k, v in prod.items() if k != "resources.json"
    }
    strip = [json.loads(f["resources.json"])["resources"] for f in (dev, prod)]
    assert strip[0] == strip[1]


def test_secrets_are_redacted_everywhere(result: SynthResult) -> None:
    files = result.files()
    for name, text in files.items():
        assert SECRET_TOKEN not in text, name
        assert SECRET_KUBECONFIG not in text, name
    res = by_key(result)
    assert res["kubernetes:core/v1:Secret::test-hf-token"]["inputs"]["stringData"] == REDACTED
    assert res["pulumi:providers:kubernetes::test-k8s"]["inputs"]["kubeconfig"] == REDACTED
    assert result.outputs["kubeconfig"] == REDACTED
    secret_doc = files["manifests/core_v1_Secret.yaml"]
    assert "# Redacted (secret): stringData" in secret_doc
    assert "stringData" not in yaml.safe_load(secret_doc)


def test_every_resource_is_listed_with_type_name_parent_provider_and_inputs(result: SynthResult) -> None:
    res = by_key(result)
    nodepool = res["kubernetes:karpenter.sh/v1:NodePool::test-h100-nodepool"]
    assert nodepool["type"] == "kubernetes:karpenter.sh/v1:NodePool"
    assert nodepool["name"] == "test-h100-nodepool"
    assert nodepool["custom"] is True
    assert nodepool["parent"] == "gpuscale:index:TestPool::test-h100"
    assert res["gpuscale:index:TestPool::test-h100"]["parent"] == "gpuscale:index:TestPlatform::test"
    assert res["gpuscale:index:TestPlatform::test"]["parent"] is None  # the Stack is not a resource of ours
    assert nodepool["provider"] == "pulumi:providers:kubernetes::test-k8s"  # inherited through the component
    assert nodepool["dependsOn"] == ["kubernetes:karpenter.k8s.aws/v1:EC2NodeClass::test-h100-nodeclass"]
    assert nodepool["inputs"]["spec"]["disruption"] == {
        "budgets": [{"nodes": "1"}], "consolidateAfter": "1h", "consolidationPolicy": "WhenEmpty",
    }
    assert nodepool["inputs"]["spec"]["limits"]["nvidia.com/gpu"] == 64  # an int again after the wire's double
    role = res["aws:iam/role:Role::test-node-role"]
    assert role["custom"] is True and role["provider"] is None  # the default AWS provider
    assert json.loads(role["inputs"]["assumeRolePolicy"])["Statement"][0]["Principal"]["Service"] == "ec2.amazonaws.com"
    assert res["gpuscale:index:TestModel::test-llama"]["custom"] is False
    assert len(result.resources) == 14 + 2 * 3


def test_resources_are_in_tree_order(result: SynthResult) -> None:
    seen: set[str] = set()
    for r in result.resources:
        assert r["parent"] is None or r["parent"] in seen, r["key"]
        seen.add(r["key"])
    siblings = [r["key"] for r in result.resources if r["parent"] == "gpuscale:index:TestPool::test-h100"]
    assert siblings == sorted(siblings)


def test_stack_exports_are_recorded(result: SynthResult) -> None:
    assert result.outputs == {
        "endpoint": "https://test.example",
        "nodeRoleArn": "arn:aws:iam::123456789012:role/test-node-role",
        "kubeconfig": REDACTED,
    }
    # a second program that exports less does not inherit the first one's exports
    other = synthesize(lambda: pulumi.export("only", 1), region="us-east-1", stack="test")
    assert other.outputs == {"only": 1}


def test_manifests_one_file_per_kind_sorted_by_namespace_and_name(result: SynthResult) -> None:
    files = result.files()
    kinds = sorted(k for k in files if k.startswith("manifests/"))
    assert kinds == [
        "manifests/apps_v1_Deployment.yaml",
        "manifests/core_v1_Namespace.yaml",
        "manifests/core_v1_Secret.yaml",
        "manifests/karpenter.k8s.aws_v1_EC2NodeClass.yaml",
        "manifests/karpenter.sh_v1_NodePool.yaml",
        "manifests/keda.sh_v1alpha1_ScaledObject.yaml",
        "manifests/leaderworkerset.x-k8s.io_v1_LeaderWorkerSet.yaml",
    ]
    docs = list(yaml.safe_load_all(files["manifests/keda.sh_v1alpha1_ScaledObject.yaml"]))
    names = [d["metadata"]["name"] for d in docs]
    assert names == sorted(names) == ["extra-000", "extra-001", "extra-002", "llama-decode", "llama-prefill"]
    assert all(d["apiVersion"] == "keda.sh/v1alpha1" and d["kind"] == "ScaledObject" for d in docs)
    text = files["manifests/karpenter.sh_v1_NodePool.yaml"]
    assert text.startswith("# Source: kubernetes:karpenter.sh/v1:NodePool::test-h100-nodepool (in gpuscale:index:TestPool")
    assert yaml.safe_load(text)["spec"]["template"]["spec"]["taints"] == [
        {"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "true"}
    ]
    # charts and providers are not Kubernetes objects
    assert not any("helm" in k or "providers" in k for k in kinds)


def test_charts_summary(result: SynthResult) -> None:
    charts = yaml.safe_load(result.files()["charts.yaml"])["charts"]
    assert charts == [{
        "chart": "keda",
        "namespace": "keda",
        "parent": "gpuscale:index:TestPlatform::test",
        "release": None,
        "repository": "https://kedacore.github.io/charts",
        "resource": "kubernetes:helm.sh/v4:Chart::test-keda",
        "values": {"podIdentity": {"aws": {"irsa": {"enabled": False}}},
                   "resources": {"operator": {"requests": {"cpu": "100m"}}}},
        "version": "2.20.2",
    }]


@requires_shared
def test_every_manifest_is_valid_against_the_upstream_schemas(tmp_path: Path) -> None:
    from tests.k8s_schema import validate_object

    synth(Knobs(extra_models=1)).write(tmp_path)
    docs = [d for f in sorted((tmp_path / "manifests").glob("*.yaml")) for d in yaml.safe_load_all(f.read_text())]
    assert len(docs) == 8 + 2
    problems = {f"{d['kind']}/{d['metadata']['name']}": p for d in docs if (p := validate_object(d))}
    assert problems == {}


def test_write_replaces_a_previous_synth(tmp_path: Path) -> None:
    synth(Knobs(extra_models=1)).write(tmp_path)
    stale = tmp_path / "manifests" / "apps_v1_StatefulSet.yaml"
    stale.write_text("kind: StatefulSet\n")

    def only_namespace() -> None:
        k8s.core.v1.Namespace("ns", metadata={"name": "x"})

    synthesize(only_namespace, region="us-east-1", stack="t").write(tmp_path)
    assert sorted(p.name for p in (tmp_path / "manifests").iterdir()) == ["core_v1_Namespace.yaml"]


def test_an_object_without_metadata_name_is_a_warning() -> None:
    def unnamed() -> None:
        k8s.core.v1.ConfigMap("cm", data={"a": "b"})

    result = synthesize(unnamed, region="us-east-1", stack="t")
    assert len(result.warnings) == 1
    assert "kubernetes:core/v1:ConfigMap::cm: no metadata.name" in result.warnings[0]


def test_clean_value() -> None:
    secret = {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", "value": "x"}
    assert clean_value({"a": 3.0, "b": 0.5, "c": [secret, True, None], "d": "04da6b54-80e4-46f7-96ec-b56ff0331ba9"}) == {
        "a": 3, "b": 0.5, "c": [REDACTED, True, None], "d": UNKNOWN,
    }
    assert clean_value(object()) == "[object]"  # never a repr with an address


def test_manifest_file_name() -> None:
    assert manifest_file_name({"apiVersion": "v1", "kind": "Service"}) == "core_v1_Service.yaml"
    assert manifest_file_name({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler"}) == (
        "autoscaling_v2_HorizontalPodAutoscaler.yaml"
    )


def test_synth_spec_runs_the_platform_program(monkeypatch: pytest.MonkeyPatch, dev_spec: PlatformSpec) -> None:
    seen: list[PlatformSpec] = []

    def deploy(spec: PlatformSpec) -> None:
        seen.append(spec)
        platform_program()()

    monkeypatch.setitem(sys.modules, "gpuscale.program", types.SimpleNamespace(deploy=deploy))
    result = synth_spec(dev_spec)
    assert seen == [dev_spec]
    assert (result.stack, result.region) == (dev_spec.environment.name, dev_spec.environment.aws_region)
    assert result.kubernetes_objects()


def test_synth_spec_without_the_platform_program(monkeypatch: pytest.MonkeyPatch, dev_spec: PlatformSpec) -> None:
    monkeypatch.setitem(sys.modules, "gpuscale.program", None)  # import fails as if the module did not exist
    with pytest.raises(ProgramUnavailableError, match=r"gpuscale\.program"):
        synth_spec(dev_spec)


def test_a_type_and_name_used_under_two_parents_gets_the_parent_in_its_key() -> None:
    def two_parents() -> None:
        for token, name in (("gpuscale:index:A", "a"), ("gpuscale:index:B", "b")):
            parent = pulumi.ComponentResource(token, name)
            k8s.core.v1.Namespace("ns", metadata={"name": name}, opts=pulumi.ResourceOptions(parent=parent))

    keys = [r["key"] for r in synthesize(two_parents, region="us-east-1", stack="t").resources]
    assert keys == [
        "gpuscale:index:A::a",
        "kubernetes:core/v1:Namespace::ns@gpuscale:index:A::a",
        "gpuscale:index:B::b",
        "kubernetes:core/v1:Namespace::ns@gpuscale:index:B::b",
    ]
