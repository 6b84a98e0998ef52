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
from gpuscale.doctor.dump import KUBECTL_COMMAND
from gpuscale.plan.context import build_context
from gpuscale.plan.evidence import COLUMNS, Evidence, node_manifests, run_simulations
from gpuscale.plan.render import DEFAULT_OUT, TEMPLATE, environment, render_plan
from gpuscale.sim import ScenarioResult, simulate
from gpuscale.sim.scenarios import definition, plan_runs, plan_scenarios, scenario_names
from gpuscale.sizing import size_platform
from gpuscale.spec.platform import PlatformSpec
from gpuscale.synth.render import SynthResult
from tests.conftest import REPO, STACKS, stack_path

runner = CliRunner()
HEADINGS = [
    "## 1. Inputs", "## 2. The three layers", "## 3. Sizing", "## 4. Layer 1: nodes (Karpenter)",
    "## 5. Layer 2: scheduling (KAI Scheduler)", "## 6. Layer 3: replicas (app-level signals)", "## 7. Cold start",
    "## 8. Simulation", '## 9. Troubleshooting: "GPUs are free but the pod stays Pending"', "## 10. Checklist: the four numbers",
]
SHORT_S = 900.0


RESULTS: dict[tuple[str, str, str], ScenarioResult] = {}
"""Every simulation the plan ran, by (stack, scenario, model): the numbers the document must quote."""


def recording_simulate(spec: PlatformSpec, scenario: str, **kw: Any) -> ScenarioResult:
    result = simulate(spec, scenario, **kw)
    RESULTS[(spec.environment.name, scenario, result.model)] = result
    return result


def evidence(spec: PlatformSpec, stack: str, synth: SynthResult, image_dir: Path, duration_s: float | None = SHORT_S) -> Evidence:
    objects = [o for _, o in synth.kubernetes_objects()]
    prefix = f"{DEFAULT_OUT.stem}-images"  # where `gpuscale plan` puts the images beside the document
    sims = run_simulations(
        spec, stack=stack, image_dir=image_dir, image_prefix=prefix, duration_s=duration_s, simulate=recording_simulate,
    )
    return Evidence(node_manifests=node_manifests(objects), simulations=sims)


@pytest.fixture(scope="module")
def image_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return {stack: tmp_path_factory.mktemp(stack) for stack in STACKS}


@pytest.fixture(scope="module")
def rendered(stack_specs: dict[str, PlatformSpec], stack_synths: dict[str, SynthResult],
             image_dirs: dict[str, Path]) -> dict[str, tuple[str, Evidence]]:
    out = {}
    for stack in STACKS:
        spec = stack_specs[stack]
        ev = evidence(spec, stack, stack_synths[stack], image_dirs[stack])
        out[stack] = (render_plan(build_context(stack, spec, size_platform(spec)), ev), ev)
    return out


@pytest.mark.parametrize("stack", STACKS)
def test_every_section_is_there(rendered: dict[str, tuple[str, Evidence]], stack: str) -> None:
    text, _ = rendered[stack]
    positions = [text.index(h) for h in HEADINGS]
    assert positions == sorted(positions)
    assert "```mermaid" in text and "PASS" in text


@pytest.mark.parametrize("stack", STACKS)
def test_troubleshooting_starts_with_the_doctor(stack_specs: dict[str, PlatformSpec],
                                                rendered: dict[str, tuple[str, Evidence]], stack: str) -> None:
    """The dump the doctor reads, the doctor over it and its exit codes come first; the manual steps confirm."""
    text, _ = rendered[stack]
    section = text[text.index(HEADINGS[8]):text.index(HEADINGS[9])]
    first_block = section[section.index("```sh\n") + 6:section.index("\n```", section.index("```sh\n"))]
    assert first_block.splitlines() == [KUBECTL_COMMAND, f"gpuscale doctor --dump dump.json --stack {stack}"]
    assert section.index("Exit 0: nothing is stuck") < section.index("1. **KAI (scheduling)")
    # Karpenter v1.14.1 labels the resource as its name (nvidia.com/gpu), as the doctor's confirm queries do
    for pool in stack_specs[stack].topology.gpu_pools:
        assert f'karpenter_nodepools_usage{{nodepool="{pool.name}",resource_type="nvidia.com/gpu"}}' in section
    assert "nvidia_com_gpu" not in text


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
def test_numbers_equal_the_simulator(
    stack_specs: dict[str, PlatformSpec], rendered: dict[str, tuple[str, Evidence]], stack: str,
) -> None:
    text, ev = rendered[stack]
    runs = [(sc, model) for sc in plan_scenarios() for model, _ in plan_runs(stack_specs[stack], sc)]
    assert [(s.scenario, s.model) for s in ev.simulations] == runs
    for section in ev.simulations:
        result = RESULTS[(stack, section.scenario, section.model)]
        assert section.policies == [r.name for r in result.results]
        for r, row in zip(result.results, section.rows, strict=True):
            assert row == [COLUMNS[c][2](r, result) for c in definition(section.scenario).columns]
            assert "| " + " | ".join(row) + " |" in text
        for f in result.findings:
            assert f"- {f}" in text
    stack_section = ev.scenario("stack")
    assert set(stack_section.policies) >= {"dcgm-duty-cycle", "queue-depth", "gpuscale", "ceiling"}
    r = RESULTS[(stack, "stack", stack_section.model)].result("gpuscale")
    assert stack_section.cell("gpuscale", "attainment") == f"{100 * r.slo_attainment:.1f}% / {100 * r.slo_attainment_servable:.1f}%"


def test_the_front_door_numbers_equal_sizing(stack_specs: dict[str, PlatformSpec], rendered: dict[str, tuple[str, Evidence]]) -> None:
    text, ev = rendered["dev"]
    (ms,) = size_platform(stack_specs["dev"]).models
    door = ms.front_door
    assert door is not None
    row = next(line for line in text.splitlines() if line.startswith(f"| {ms.model} | **{int(door.first_answer.total_s)}** |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3] == f"{int(door.first_answer.request_timeout_s)}"
    assert cells[6:10] == [str(door.hold_limit_s), f"{door.queue_bound:,}", f"{door.per_replica:,}", str(door.retry_after_s)]
    assert "503 with `Retry-After`" in text
    # the scale-from-zero scenario is quoted for the model that may scale to zero, and only for it
    assert [(s.scenario, s.model) for s in ev.section("cold-start") if s.scenario == "scale-from-zero"] == [("scale-from-zero", ms.model)]
    _, prod_ev = rendered["prod"]
    assert not [s for s in prod_ev.simulations if s.scenario == "scale-from-zero"]  # prod keeps every model warm


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


def test_the_cli_renders_the_same_bytes_as_the_library(rendered: dict[str, tuple[str, Evidence]], image_dirs: dict[str, Path],
                                                      tmp_path: Path) -> None:
    # a second, independent run (the CLI, in a fresh output folder) writes the document and images byte for byte
    target = tmp_path / DEFAULT_OUT.name
    args = ["plan", "--stack-file", str(stack_path("dev")), "--sim-duration-s", str(SHORT_S), "--no-schedule"]
    result = runner.invoke(app, [*args, "--out", str(target)])
    assert result.exit_code == 0, result.output
    assert target.read_text() == rendered["dev"][0]
    images = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*.png"))
    assert len(images) == 3
    for rel in images:
        assert (tmp_path / rel).read_bytes() == (image_dirs["dev"] / rel.relative_to(rel.parts[0])).read_bytes()


def test_invalid_stack_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("config:\n  gpuscale:models: 3\n")
    result = runner.invoke(app, ["plan", "--stack-file", str(bad), "--out", str(tmp_path / "plan.md")])
    assert result.exit_code == 2 and not (tmp_path / "plan.md").exists()


def test_dev_plan_snapshot(rendered: dict[str, tuple[str, Evidence]], snapshot: SnapshotAssertion) -> None:
    # the document's shape on short simulations; `make plan-check` (run by CI) holds the committed full-length plan
    # to what `make plan` writes today
    assert rendered["dev"][0] == snapshot


def test_the_plan_lists_what_synth_will_warn_about(rendered: dict[str, tuple[str, Evidence]],
                                                   stack_specs: dict[str, PlatformSpec]) -> None:
    from gpuscale.sizing import size_platform
    from gpuscale.stack_warnings import stack_warnings

    prod = stack_warnings(stack_specs["prod"], size_platform(stack_specs["prod"]))
    assert any("runs on EFA with the stock image" in w for w in prod)
    for w in prod:
        assert f"- {w}\n" in rendered["prod"][0]
    assert stack_warnings(stack_specs["dev"], size_platform(stack_specs["dev"])) == []
    assert "Warnings (`gpuscale validate`" not in rendered["dev"][0]
