"""Runs everywhere (no engine): the engine tier's program and comparison, under mocks.

The Kubernetes half the engine deploys (``e2e.pulumi_engine_program.cluster_half``) is ``InferencePlatform``'s own
composition (``platform_layers``) without charts or AWS resources; these tests hold it to the platform program: for
every shipped stack (and one on existing subnets) it registers the same Kubernetes objects with the same inputs as
``gpuscale synth``, except what it says it leaves out and the listed differences, each with its reason. So the engine
tier's verdict on the cluster half is a verdict on the platform program."""

from __future__ import annotations

import json
import tomllib
from importlib.metadata import version as dist_version
from pathlib import Path
from typing import Any

import pytest

from e2e import build
from e2e.pulumi_engine_compare import (
    KNOWN_DIFFERENCES,
    chart_components,
    compare,
    differences,
    is_object,
    not_as_set,
    strip_skip_await,
)
from e2e.pulumi_engine_program import NODE_ROLE_NAME, SKIP_AWAIT, ClusterHalf, cluster_half, left_out, with_skip_await
from gpuscale import versions
from gpuscale.components.kubernetes_provider import kubernetes_provider
from gpuscale.components.platform_layers import CHART_LEFT_OUT, PlatformLayersArgs
from gpuscale.components.serving_layer import FRONT_DOOR_LEFT_OUT
from gpuscale.feasibility import checked_sizing
from gpuscale.spec.platform import PlatformSpec
from gpuscale.stackfile import load_stack_file
from gpuscale.synth.render import synth_spec, synthesize

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted((REPO / "stacks").glob("Pulumi.*.yaml"))


def on_existing_subnets() -> PlatformSpec:
    """The dev stack on subnets that exist: the node pools name them instead of selecting by discovery tag."""
    raw = load_stack_file(REPO / "stacks" / "Pulumi.dev.yaml").model_dump(exclude_unset=True)
    raw["environment"]["networking"] = {"vpc_id": "vpc-0abc", "private_subnet_ids": ["subnet-0a1", "subnet-0b2"]}
    return PlatformSpec.model_validate(raw)


SPECS = {**{p.name.split(".")[1]: (lambda p=p: load_stack_file(p)) for p in SHIPPED},
         "dev-existing-subnets": on_existing_subnets}


def half(spec: PlatformSpec) -> tuple[dict[str, dict[str, Any]], ClusterHalf]:
    made: list[ClusterHalf] = []
    result = synthesize(lambda: made.append(cluster_half(spec, kubernetes_provider("local-cluster", "unused under mocks"))),
                        region=spec.environment.aws_region, stack=spec.environment.name)
    objects = {f"{r['type']}::{r['name']}": r["inputs"] for r in result.resources if r["custom"] and is_object(r["type"])}
    return objects, made[0]


@pytest.mark.parametrize("name", list(SPECS))
def test_the_cluster_half_emits_what_the_platform_program_does(name: str, tmp_path: Path) -> None:
    spec = SPECS[name]()
    synth_spec(spec).write(tmp_path)
    result = compare(name, tmp_path / "resources.json", half(spec)[0], left_out(spec))
    assert not result.unexplained, result.unexplained
    assert len(result.same) >= 10, result.same
    # every known difference is there for a reason that applies: the node role, on every EC2NodeClass compared
    assert {p for d in result.known.values() for p in d} == {p for (_, p) in KNOWN_DIFFERENCES}
    # what is not compared is only chart components' objects and the left-out components' (prod's EFA pool)
    assert all("Helm chart" in why or "placement group" in why for why in result.not_in_engine.values())


@pytest.mark.parametrize("name", list(SPECS))
def test_the_cluster_half_names_exactly_what_it_leaves_out(name: str, tmp_path: Path) -> None:
    """Every component of the platform program that installs a Helm chart (a chart child in the synth) is left out
    and said to be, and nothing else is but the pools with a placement group."""
    spec = SPECS[name]()
    synth_spec(spec).write(tmp_path)
    said = half(spec)[1].left_out
    charts = {c.rsplit("::", 1)[-1] for c in chart_components(tmp_path / "resources.json")}
    assert {k for k, why in said.items() if why in (CHART_LEFT_OUT, FRONT_DOOR_LEFT_OUT)} == charts
    assert {k: why for k, why in said.items() if k not in charts} == left_out(spec)


def test_without_charts_the_node_role_must_be_given() -> None:
    spec = load_stack_file(REPO / "stacks" / "Pulumi.dev.yaml")
    with pytest.raises(ValueError, match="node_role_name"):
        PlatformLayersArgs(spec=spec, sizing=checked_sizing(spec), cluster_name="c", charts=False)
    assert PlatformLayersArgs(spec=spec, sizing=checked_sizing(spec), cluster_name="c", charts=False,
                              node_role_name=NODE_ROLE_NAME).node_role_name == NODE_ROLE_NAME


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


def test_not_as_set_ignores_only_what_the_server_adds() -> None:
    wanted = {"probe": {"path": "/health", "port": 8000}, "args": ["--a"]}
    live = {"probe": {"path": "/health", "port": 8000, "scheme": "HTTP"}, "args": ["--a"], "dnsPolicy": "ClusterFirst"}
    assert list(not_as_set(wanted, live)) == []
    assert list(not_as_set(wanted, {**live, "args": ["--b"]})) == ["args[0]"]
    assert list(not_as_set(wanted, {"args": ["--a"]})) == ["probe"]
    assert list(not_as_set(wanted, {**live, "args": ["--a", "--b"]})) == ["args"]


def test_differences_name_each_path() -> None:
    a = {"spec": {"x": [1, {"y": 2}], "only_a": 1}, "same": "s"}
    b = {"spec": {"x": [1, {"y": 3}]}, "same": "s"}
    assert list(differences(a, b)) == ["spec.only_a", "spec.x[1].y"]
    assert list(differences([1], [1, 2])) == ["(whole value)"]


def release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.removeprefix("v").split("-")[0].split("."))


@pytest.mark.parametrize("name", list(versions.E2E_PULUMI_BINARIES))
def test_each_engine_wrapper_module_requires_the_pinned_version(name: str) -> None:
    pin = versions.E2E_PULUMI_BINARIES[name]
    build.check_wrapper(pin)
    assert (build.wrapper(pin) / "go.sum").is_file()
    assert not list(build.wrapper(pin).rglob("*.go")), "no Go source: the upstream packages are built as tools"
    assert not list(build.wrapper(pin).rglob("*.json")), "the embed files are generated at build time, never kept"


def test_the_engine_pins_agree_with_the_python_sdks_the_project_allows() -> None:
    """The Automation API of the installed pip SDK drives the CLI: same major, CLI not older (it refuses an older
    CLI than its minimum); the provider's skew against the pip Kubernetes SDK is stated, not hidden."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    cli = release(versions.E2E_PULUMI.version)
    sdk = release(dist_version("pulumi"))
    assert cli[0] == sdk[0] and cli >= sdk, (cli, sdk)
    allowed = {d.split(">=")[0]: d.split(">=")[1].split(",") for d in project if d.startswith("pulumi")}
    low, high = allowed["pulumi"]  # pulumi>=3.200,<4: the CLI is inside the range the project allows
    assert release(low) <= cli < release(high.removeprefix("<")), (cli, allowed["pulumi"])
    assert release(allowed["pulumi-kubernetes"][0]) <= release(dist_version("pulumi-kubernetes"))
    assert versions.E2E_PULUMI.ldflags == (
        f"-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version={versions.E2E_PULUMI.version}",)
    k8s_pin = versions.E2E_PULUMI_KUBERNETES
    assert k8s_pin.skew and dist_version("pulumi-kubernetes") in k8s_pin.skew
    assert any(version == k8s_pin.version.removeprefix("v") for _, _, version in k8s_pin.generated_json)


def test_the_providers_embed_files_are_generated_from_the_module_zip(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    pin = versions.E2E_PULUMI_KUBERNETES
    module = tmp_path / "module"
    (module / "cmd" / "pulumi-resource-kubernetes").mkdir(parents=True)
    (module / "cmd" / "pulumi-resource-kubernetes" / "schema.json").write_text('{\n  "name": "kubernetes"\n}\n')
    (module / "cmd" / "pulumi-resource-kubernetes" / "terraform-mapping.json").write_text('{ "a": [1, 2] }')
    (module / "cmd" / "pulumi-resource-kubernetes").chmod(0o555)  # the module cache is read-only
    monkeypatch.setattr(build, "module_dir", lambda _: module)
    args = build.with_generated_files(pin, tmp_path / "scratch")
    src = tmp_path / "scratch" / "src" / "cmd" / "pulumi-resource-kubernetes"
    assert json.loads((src / "schema-embed.json").read_text()) == {"name": "kubernetes",
                                                                   "version": pin.version.removeprefix("v")}
    assert (src / "terraform-mapping-embed.json").read_text() == '{"a":[1,2]}'
    assert args == ["-modfile", str(tmp_path / "scratch" / "go.mod")]
    go_mod = (tmp_path / "scratch" / "go.mod").read_text()
    assert go_mod.startswith((build.wrapper(pin) / "go.mod").read_text())
    assert go_mod.endswith(f"replace {pin.module} => {tmp_path / 'scratch' / 'src'}\n")
    assert build.with_generated_files(versions.E2E_PULUMI, tmp_path / "other") == []
