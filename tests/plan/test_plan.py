"""The plan document: every section, numbers equal to sizing and simulator, strict template, deterministic, snapshot."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jinja2
import pytest
from syrupy.assertion import SnapshotAssertion
from typer.testing import CliRunner

from gpuscale.cli import app
from gpuscale.plan.context import build_context
from gpuscale.plan.evidence import COLUMNS, Evidence, node_manifests, run_simulations
from gpuscale.plan.render import DEFAULT_OUT, TEMPLATE, environment, render_plan
from gpuscale.sim import ScenarioResult, simulate
from gpuscale.sim.scenarios import definition, plan_scenarios, scenario_names
from gpuscale.sizing import size_platform
from gpuscale.spec.platform import PlatformSpec
from gpuscale.synth.render import synth_spec
from tests.conftest import REPO, STACKS, stack_path

runner = CliRunner()
HEADINGS = [
    "## 1. Inputs", "## 2. The three layers", "## 3. Sizing", "## 4. Layer 1: nodes (Karpenter)",
    "## 5. Layer 2: scheduling (KAI Scheduler)", "## 6. Layer 3: replicas (app-level signals)", "## 7. Cold start",
    "## 8. Simulation", '## 9. Troubleshooting: "GPUs are free but the pod stays Pending"', "## 10. Checklist: the four numbers",
]
SHORT_S = 900.0


RESULTS: dict[tuple[str, str], ScenarioResult] = {}
"""Every simulation the plan ran, by (stack, scenario): the numbers the document must quote."""


def recording_simulate(spec: PlatformSpec, scenario: str, **kw: Any) -> ScenarioResult:
    result = simulate(spec, scenario, **kw)
    RESULTS[(spec.environment.name, scenario)] = result
    return result


def evidence(spec: PlatformSpec, stack: str, image_dir: Path, duration_s: float | None = SHORT_S) -> Evidence:
    objects = [o for _, o in synth_spec(spec, stack=stack).kubernetes_objects()]
    prefix = f"{DEFAULT_OUT.stem}-images"  # where `gpuscale plan` puts the images beside the document
    sims = run_simulations(
        spec, stack=stack, image_dir=image_dir, image_prefix=prefix, duration_s=duration_s, simulate=recording_simulate,
    )
    return Evidence(node_manifests=node_manifests(objects), simulations=sims)


@pytest.fixture(scope="module")
def rendered(stack_specs: dict[str, PlatformSpec], tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, Evidence]]:
    out = {}
    for stack in STACKS:
        spec = stack_specs[stack]
        ev = evidence(spec, stack, tmp_path_factory.mktemp(stack))
        out[stack] = (render_plan(build_context(stack, spec, size_platform(spec)), ev), ev)
    return out


@pytest.mark.parametrize("stack", STACKS)
def test_every_section_is_there(rendered: dict[str, tuple[str, Evidence]], stack: str) -> None:
    text, _ = rendered[stack]
    positions = [text.index(h) for h in HEADINGS]
    assert positions == sorted(positions)
    assert "```mermaid" in text and "PASS" in text


@pytest.mark.parametrize("stack", STACKS)
def test_numbers_equal_the_sizing_module(stack_specs: dict[str, PlatformSpec], rendered: dict[str, tuple[str, Evidence]], stack: str) -> None:
    text, _ = rendered[stack]
    for m in size_platform(stack_specs[stack]).models:
        row = next(line for line in text.splitlines() if line.startswith(f"| {m.model} | {m.weights_gib:.1f} |"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[4] == f"{m.kv_capacity_tokens:,}"
        assert cells[5] == f"{m.shape.tensor_parallel_size} x {m.shape.pipeline_parallel_size}"
        assert cells[6] == str(m.shape.gpus) and cells[7] == str(m.shape.nodes)
        assert cells[11] == f"{sum(r.replicas_at_base for r in m.roles)} / {sum(r.replicas_at_peak for r in m.roles)}"
        assert cells[12] == f"{m.gpu_hours_per_day:.0f}"
        assert f"**{int(m.cold_start.total_s)}**" in text


@pytest.mark.parametrize("stack", STACKS)
def test_numbers_equal_the_simulator(rendered: dict[str, tuple[str, Evidence]], stack: str) -> None:
    text, ev = rendered[stack]
    assert [s.scenario for s in ev.simulations] == plan_scenarios()
    for section in ev.simulations:
        result = RESULTS[(stack, section.scenario)]
        assert section.policies == [r.name for r in result.results]
        for r, row in zip(result.results, section.rows, strict=True):
            assert row == [COLUMNS[c][2](r, result) for c in definition(section.scenario).columns]
            assert "| " + " | ".join(row) + " |" in text
        for f in result.findings:
            assert f"- {f}" in text
    stack_section = ev.scenario("stack")
    assert set(stack_section.policies) >= {"dcgm-duty-cycle", "queue-depth", "gpuscale", "ceiling"}
    r = RESULTS[(stack, "stack")].result("gpuscale")
    assert stack_section.cell("gpuscale", "attainment") == f"{100 * r.slo_attainment:.1f}% / {100 * r.slo_attainment_servable:.1f}%"


def test_templates_name_no_scenario() -> None:
    import gpuscale.templates

    folder = Path(gpuscale.templates.__file__).parent
    text = "\n".join(p.read_text() for p in folder.glob("*.j2"))
    for name in scenario_names():
        assert f'"{name}"' not in text and f"'{name}'" not in text, name
    # the Makefile asks the registry (`--plan-scenarios`); `--stack`/`$(STACK)` are the stack, not a scenario
    code = [line.split("#", 1)[0] for line in (REPO / "Makefile").read_text().splitlines()]  # comments are prose
    makefile = "\n".join(code).replace("--stack", "").replace("STACK", "")
    assert "gpuscale simulate --plan-scenarios" in makefile
    for name in plan_scenarios():
        assert not re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", makefile), name


def test_prod_plan_shows_the_disaggregated_autoscalers(rendered: dict[str, tuple[str, Evidence]]) -> None:
    text, _ = rendered["prod"]
    assert "| llama-70b-fp8 | prefill | keda |" in text and "| llama-70b-fp8 | decode | keda |" in text
    assert "`NodePool/h100`" in text and "consolidationPolicy: WhenEmpty" in text
    assert 'kai_queue_allocated_gpus{queue_name="chat"}' in text


def test_missing_template_variable_fails_loudly(stack_specs: dict[str, PlatformSpec], rendered: dict[str, tuple[str, Evidence]]) -> None:
    spec = stack_specs["dev"]
    full = build_context("dev", spec, size_platform(spec))
    context = {name: getattr(full, name) for name in type(full).model_fields if name != "checklist"}
    with pytest.raises(jinja2.UndefinedError, match="checklist"):
        environment().get_template(TEMPLATE).render(c=context, e=rendered["dev"][1])


def test_two_renders_are_byte_identical(tmp_path: Path) -> None:
    args = ["plan", "--stack-file", str(stack_path("dev")), "--sim-duration-s", str(SHORT_S), "--no-schedule"]
    first = runner.invoke(app, [*args, "--out", str(tmp_path / "a" / "plan.md")])
    second = runner.invoke(app, [*args, "--out", str(tmp_path / "b" / "plan.md")])
    assert first.exit_code == 0 and second.exit_code == 0, first.output + second.output
    assert (tmp_path / "a" / "plan.md").read_bytes() == (tmp_path / "b" / "plan.md").read_bytes()
    images = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*.png"))
    assert len(images) == 3
    for rel in images:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes()


def test_invalid_stack_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("config:\n  gpuscale:models: 3\n")
    result = runner.invoke(app, ["plan", "--stack-file", str(bad), "--out", str(tmp_path / "plan.md")])
    assert result.exit_code == 2 and not (tmp_path / "plan.md").exists()


def test_dev_plan_snapshot(stack_specs: dict[str, PlatformSpec], tmp_path: Path, snapshot: SnapshotAssertion) -> None:
    # the document `make plan` writes for the dev stack (default simulation lengths)
    spec = stack_specs["dev"]
    text = render_plan(build_context("dev", spec, size_platform(spec)), evidence(spec, "dev", tmp_path, duration_s=None))
    assert text == snapshot
    # the committed plan is what `make plan` writes today
    assert (REPO / "outputs" / "skill-gpu-autoscaler-plan.md").read_text() == text
