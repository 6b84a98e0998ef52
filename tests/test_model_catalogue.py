"""The model catalogue's numbers agree with their config.json: each parameter count is what the architecture implies."""

from __future__ import annotations

import pytest

from gpuscale import perf
from gpuscale.spec.model_catalogue import INTERMEDIATE_SIZE, MODELS, dense_params_b, from_hf_config


@pytest.mark.parametrize("name", list(MODELS))
def test_parameter_count_matches_the_architecture(name: str) -> None:
    a = MODELS[name]
    implied = dense_params_b(a.layers, a.attention_heads, a.kv_heads, a.head_dim, a.hidden_size, INTERMEDIATE_SIZE[name],
                             a.vocab_size, a.tie_word_embeddings)
    assert implied == pytest.approx(a.params_b, rel=0.01)


def test_kv_bytes_per_token_as_perf_model_md_says() -> None:
    # perf-model.md 3: 320 KiB per token for Llama-3-70B, 128 KiB for Llama-3.1-8B (BF16)
    assert perf.kv_bytes_per_token(MODELS["llama-3.3-70b"]) == 320 * 1024
    assert perf.kv_bytes_per_token(MODELS["llama-3.1-8b"]) == 128 * 1024


def test_hf_config_reads_a_qwen_config() -> None:
    cfg = {"hidden_size": 3584, "intermediate_size": 18944, "max_position_embeddings": 32768, "num_attention_heads": 28,
           "num_hidden_layers": 28, "num_key_value_heads": 4, "vocab_size": 152064, "tie_word_embeddings": False}
    got = from_hf_config(cfg)
    assert got["params_b"] == pytest.approx(MODELS["qwen2.5-7b"].params_b, rel=0.01)
    assert {k: v for k, v in got.items() if k != "params_b"} == {
        k: v for k, v in MODELS["qwen2.5-7b"].model_dump().items()
        if k not in ("params_b", "weight_precision", "kv_cache_precision")
    }
    with pytest.raises(KeyError, match="intermediate_size"):
        from_hf_config({k: v for k, v in cfg.items() if k != "intermediate_size"})
    with pytest.raises(ValueError, match="mixture-of-experts"):
        from_hf_config({**cfg, "num_experts": 64})
