"""``gpuscale perf``: one replica's figures without a stack file; bad input exits 2 with the valid names, no traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuscale.sim import replica_load
from gpuscale.spec.catalogue import CATALOGUE, GPU_INSTANCE
from gpuscale.spec.model_catalogue import MODELS
from tests.cli.runner import FastRunner

runner = FastRunner()
FIELDS = {"ttft_mean_s", "ttft_p50_s", "ttft_p99_s", "itl_mean_s", "itl_p50_s", "itl_p99_s", "tpot_mean_s",
          "output_tokens_per_s", "requests_per_s", "kv_capacity_tokens"}
BASE = ["perf", "--model", "llama-3.3-70b", "--gpu", "H100-SXM", "--tp", "4", "--input-tokens", "1000",
        "--output-tokens", "200"]


def run_json(tmp_path: Path, *args: str) -> dict[str, float]:
    out = tmp_path / "perf.json"
    result = runner.invoke(args=[*args, "--json", str(out)])
    assert result.exit_code == 0, result.output
    got: dict[str, float] = json.loads(out.read_text())
    return got


def test_closed_loop_json_has_every_field_and_the_replica_is_the_simulators(tmp_path: Path) -> None:
    got = run_json(tmp_path, *BASE, "--concurrency", "8")
    assert set(got) == FIELDS
    # perf-model.md 3: ~469k KV tokens for Llama-3.x-70B BF16 on 4 x H100 at 0.9
    assert got["kv_capacity_tokens"] == pytest.approx(469_000, rel=0.01)
    assert got["ttft_p50_s"] <= got["ttft_p99_s"] and got["itl_p50_s"] <= got["itl_p99_s"]
    # a closed loop of 8: each client's request takes TTFT + (out - 1) x TPOT, so throughput is 8 / that
    per_request = got["ttft_mean_s"] + 199 * got["tpot_mean_s"]
    assert got["requests_per_s"] == pytest.approx(8 / per_request, rel=0.1)
    assert got["output_tokens_per_s"] == pytest.approx(200 * got["requests_per_s"], rel=0.05)


def test_offline_is_the_ceiling_of_the_open_loop(tmp_path: Path) -> None:
    small = ["perf", "--model", "llama-3.1-8b", "--gpu", "H100-SXM", "--tp", "1", "--input-tokens", "500",
             "--output-tokens", "100"]
    ceiling = run_json(tmp_path, *small, "--offline")
    light = run_json(tmp_path, *small, "--rate", "2", "--requests", "200")
    assert light["requests_per_s"] == pytest.approx(2.0, rel=0.15)
    assert ceiling["requests_per_s"] > 5 * light["requests_per_s"]
    over = runner.invoke(args=[*small, "--rate", f"{3 * ceiling['requests_per_s']:.0f}", "--requests", "300"])
    assert over.exit_code == 0 and "saturated" in over.output


def test_fp8_and_the_text_output(tmp_path: Path) -> None:
    bf16 = run_json(tmp_path, *BASE, "--offline", "--requests", "200")
    fp8 = run_json(tmp_path, *BASE, "--offline", "--requests", "200", "--precision", "fp8")
    assert fp8["kv_capacity_tokens"] > 1.3 * bf16["kv_capacity_tokens"]  # half the weights leave more KV
    text = runner.invoke(args=[*BASE, "--concurrency", "2"]).output
    assert "FP8" not in text and "KV capacity" in text and "TTFT" in text and "output tokens/s" in text


def test_an_architecture_file_or_a_config_json_answers_like_the_catalogue(tmp_path: Path) -> None:
    arch = tmp_path / "qwen.yaml"
    arch.write_text(json.dumps(MODELS["qwen2.5-7b"].model_dump()))
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"hidden_size": 3584, "intermediate_size": 18944, "max_position_embeddings": 32768,
                               "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4,
                               "vocab_size": 152064, "model_type": "qwen2"}))
    args = ["--gpu", "L40S", "--tp", "1", "--input-tokens", "300", "--output-tokens", "50", "--concurrency", "4"]
    named = run_json(tmp_path, "perf", "--model", "qwen2.5-7b", *args)
    assert run_json(tmp_path, "perf", "--model", str(arch), *args) == named
    from_cfg = run_json(tmp_path, "perf", "--model", str(cfg), *args)
    assert from_cfg["kv_capacity_tokens"] == pytest.approx(named["kv_capacity_tokens"], rel=0.01)


def _refused(*args: str) -> str:
    result = runner.invoke(args=list(args))
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    return " ".join(result.output.split())


def test_unknown_names_are_refused_with_the_valid_ones() -> None:
    text = _refused("perf", "--model", "llama-9", "--gpu", "B300", "--tp", "1", "--input-tokens", "1", "--output-tokens",
                    "1", "--offline")
    assert all(name in text for name in MODELS) and all(g in text for g in GPU_INSTANCE)


@pytest.mark.parametrize(("args", "says"), [
    (["--tp", "3", "--offline"], "must divide the model's 64 attention heads"),
    (["--tp", "16", "--offline"], "at most 8 GPUs"),
    (["--tp", "4", "--concurrency", "2", "--rate", "1"], "exactly one of"),
    (["--tp", "4"], "exactly one of"),
    (["--tp", "4", "--concurrency", "2", "--requests", "5"], "not with --concurrency"),
    (["--tp", "4", "--rate", "nan"], "finite number"),
    (["--tp", "4", "--rate", "20000"], "at most 10000"),
    (["--tp", "1", "--offline"], "leave no KV cache"),
])
def test_bad_shapes_and_loads_are_refused(args: list[str], says: str) -> None:
    text = _refused("perf", "--model", "llama-3.3-70b", "--gpu", "H100-SXM", "--input-tokens", "100", "--output-tokens",
                    "10", *args)
    assert says in text


def test_a_request_longer_than_the_replica_accepts_is_refused() -> None:
    text = _refused("perf", "--model", "qwen2.5-7b", "--gpu", "H100-SXM", "--tp", "1", "--input-tokens", "30000",
                    "--output-tokens", "100", "--offline")
    assert "accepts at most 32,768" in text


@pytest.mark.parametrize(("content", "says"), [
    ("params_b: 7\nlayers: 2\nlayers: 3\n", "arch.yaml: layers: duplicate key 'layers' (lines 2 and 3)"),
    ("- 1\n- 2\n", "expected a mapping"),
    ('{"params_b": 7, "layerz": 2}', "valid keys: params_b"),
    ('{"num_hidden_layers": 2}', "a config.json needs"),
    ("\xff", "not UTF-8"),
])
def test_a_bad_architecture_file_is_refused_naming_it(tmp_path: Path, content: str, says: str) -> None:
    path = tmp_path / "arch.yaml"
    path.write_bytes(content.encode("latin-1"))
    text = _refused("perf", "--model", str(path), "--gpu", "L4", "--tp", "1", "--input-tokens", "1", "--output-tokens",
                    "1", "--offline")
    assert str(path) in text and says in text


def test_json_under_a_file_is_refused_before_any_work(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("keep")
    text = _refused(*BASE, "--offline", "--json", str(tmp_path / "f" / "out.json"))
    assert "is a file, so no file can be created under it" in text
    assert (tmp_path / "f").read_text() == "keep"


def test_every_gpu_name_maps_to_an_instance_of_that_part() -> None:
    for name, instance in GPU_INSTANCE.items():
        part = CATALOGUE[instance].gpu
        assert name.startswith(part.name)
        if part.name == "A100":  # the two A100s differ only in memory, which the name says
            assert name.endswith(f"-{part.memory_gib:.0f}")
        assert replica_load.replica_alone(MODELS["llama-3.1-8b"], CATALOGUE[instance], 1).kv_capacity_tokens > 0


def test_the_readme_example_is_what_the_command_prints_today() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = readme.split("$ .venv/bin/gpuscale perf ", 1)[1].split("```", 1)[0]
    command, shown = block.split("\n", 1)
    result = runner.invoke(args=["perf", *command.split()])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == shown.strip(), "README's gpuscale perf example is stale"
