"""The CLI contract: exit 0 and a sizing table on valid stacks, exit 2 with YAML paths and no traceback otherwise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from gpuscale.cli import app
from gpuscale.sizing import size_platform
from gpuscale.stackfile import load_stack_file
from tests.conftest import STACKS, stack_path

runner = CliRunner()


def write_stack(tmp_path: Path, mutate) -> Path:  # type: ignore[no-untyped-def]
    doc = yaml.safe_load(stack_path("prod").read_text())
    mutate(doc["config"])
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize("stack", STACKS)
def test_validate_each_stack(stack: str) -> None:
    result = runner.invoke(app, ["validate", "--stack-file", str(stack_path(stack))])
    assert result.exit_code == 0, result.output
    assert "valid" in result.output and "KV tokens/replica" in result.output


def test_validate_prints_the_sizing_numbers() -> None:
    result = runner.invoke(app, ["validate", "--stack-file", str(stack_path("prod"))])
    assert "678,094" in result.output  # KV tokens per replica of the 70B FP8 TP4 model
    assert "vllm:num_requests_waiting" in result.output and "vllm:kv_cache_usage_perc" in result.output


def test_validate_prints_the_front_door_numbers_of_a_model_at_zero() -> None:
    sized = size_platform(load_stack_file(stack_path("dev"))).model("llama-8b")
    door = sized.front_door
    assert door is not None
    result = runner.invoke(app, ["validate", "--stack-file", str(stack_path("dev"))], terminal_width=400)
    assert result.exit_code == 0, result.output
    (row,) = [line for line in result.output.splitlines() if line.startswith("│ llama-8b") and "image_pull" in line]
    cells = [c.strip() for c in row.strip("│").split("│")]
    assert cells[1:3] == [f"{door.first_answer.total_s:.0f}", f"{door.first_answer.request_timeout_s:g}"]
    assert cells[4:] == [str(door.hold_limit_s), f"{door.queue_bound:,}", f"{door.per_replica:,}",
                         str(door.retry_after_s), str(door.retry_after_saturated_s), str(door.idle_window_s)]
    # prod keeps warm replicas everywhere: no door, no table
    prod = runner.invoke(app, ["validate", "--stack-file", str(stack_path("prod"))], terminal_width=400)
    assert "Front door" not in prod.output


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda c: c["gpuscale:models"][0]["slo"].update(ttft_p99_s="fast"), "gpuscale:models[0].slo.ttft_p99_s: Input should be a valid number"),
        (lambda c: c["gpuscale:models"][0].update(colour="blue"), "gpuscale:models[0].colour: unknown key"),
        (lambda c: c["gpuscale:models"][0]["workload"].update(peak_rps=-5), "gpuscale:models[0].workload.peak_rps: Input should be greater than 0"),
        (lambda c: c["gpuscale:topology"]["gpu_pools"][0].update(consolidation_policy="WhenEmptyOrUnderutilized"),
         "gpuscale:topology.gpu_pools[0].consolidation_policy: GPU pool h100: consolidation_policy WhenEmptyOrUnderutilized lets Karpenter evict in-flight inference"),
        (lambda c: (c["gpuscale:topology"]["gpu_pools"][1].update(instance_types=["g6e.12xlarge"]),
                    c["gpuscale:models"][1].update(parallelism={"tensor_parallel_size": 4})),
         "gpuscale:models[1].parallelism.tensor_parallel_size: TP group of 4 GPUs is wider than one NVLink domain"),
    ],
    ids=["wrong-type", "unknown-key", "negative", "underutilized", "tp-wider-than-nvlink"],
)
def test_invalid_input_exits_2_with_path(tmp_path: Path, mutate, expected: str) -> None:  # type: ignore[no-untyped-def]
    result = runner.invoke(app, ["validate", "--stack-file", str(write_stack(tmp_path, mutate))])
    assert result.exit_code == 2
    assert expected in result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_missing_file(tmp_path: Path) -> None:
    result = runner.invoke(app, ["validate", "--stack-file", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2 and "file not found" in result.output


def test_non_mapping_yaml(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- a\n- b\n")
    result = runner.invoke(app, ["validate", "--stack-file", str(path)])
    assert result.exit_code == 2 and "expected a mapping with a 'config:' key, got list" in result.output


def test_broken_yaml(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("config: {gpuscale:models: [\n")
    result = runner.invoke(app, ["validate", "--stack-file", str(path)])
    assert result.exit_code == 2 and "not valid YAML" in result.output


def test_stack_and_stack_file_are_exclusive() -> None:
    result = runner.invoke(app, ["validate", "--stack", "dev", "--stack-file", str(stack_path("dev"))])
    assert result.exit_code == 2 and "not both" in result.output


def test_validate_by_stack_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(stack_path("dev").parents[1] / "infra")
    result = runner.invoke(app, ["validate", "--stack", "staging"])
    assert result.exit_code == 0 and "gpuscale-staging" in result.output


def test_schema_describes_the_stack_file(tmp_path: Path) -> None:
    out = tmp_path / "schema.json"
    result = runner.invoke(app, ["schema", "--out", str(out)])
    assert result.exit_code == 0
    schema = json.loads(out.read_text())
    config = schema["properties"]["config"]
    assert set(config["required"]) == {"gpuscale:environment", "gpuscale:topology", "gpuscale:teams", "gpuscale:models"}
    slo = schema["$defs"]["SloSpec"]["properties"]["ttft_p99_s"]
    assert slo["description"].startswith("Time to first token") and slo["exclusiveMinimum"] == 0


def test_schema_validates_the_stack_files() -> None:
    import jsonschema

    result = runner.invoke(app, ["schema"])
    schema = json.loads(result.output)
    for stack in STACKS:
        jsonschema.validate(yaml.safe_load(stack_path(stack).read_text()), schema)


def test_committed_schema_is_current(tmp_path: Path) -> None:
    # stacks/gpuscale.schema.json is what editors read; it must match the spec models
    out = tmp_path / "schema.json"
    assert runner.invoke(app, ["schema", "--out", str(out)]).exit_code == 0
    assert out.read_text() == (stack_path("dev").parent / "gpuscale.schema.json").read_text()
