"""Model architectures by name, for questions asked without a stack file (``gpuscale perf --model``).

Each entry is the model's Hugging Face ``config.json`` (``num_hidden_layers``, ``num_attention_heads``,
``num_key_value_heads``, ``hidden_size`` / ``num_attention_heads`` as the head dimension, ``vocab_size``,
``tie_word_embeddings``, ``max_position_embeddings`` as the context), with ``params_b`` the parameter count its model
card and safetensors index give; each count is also what the architecture implies (embeddings, attention, gated MLP of
``intermediate_size``, ``dense_params_b``), which ``tests/test_model_catalogue.py`` checks to 1 %. Precision is BF16;
``gpuscale perf --precision`` changes it. ``from_hf_config`` reads any dense model's config.json the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from gpuscale.spec.model import ModelArchitecture


def _arch(params_b: float, layers: int, heads: int, kv_heads: int, hidden: int, vocab: int, context: int) -> ModelArchitecture:
    return ModelArchitecture(
        params_b=params_b, layers=layers, attention_heads=heads, kv_heads=kv_heads, head_dim=hidden // heads,
        hidden_size=hidden, vocab_size=vocab, max_context_tokens=context,
    )


INTERMEDIATE_SIZE: Mapping[str, int] = MappingProxyType({
    "llama-3.1-8b": 14336, "llama-3.1-70b": 28672, "llama-3.3-70b": 28672, "llama-3.1-405b": 53248,
    "qwen2.5-7b": 18944, "qwen2.5-72b": 29568, "mistral-7b-v0.3": 14336,
})
"""``intermediate_size`` of each config.json: not a number the performance model reads (``params_b`` carries it), kept
so the parameter counts can be checked against the architecture."""

MODELS: Mapping[str, ModelArchitecture] = MappingProxyType({
    # meta-llama/Llama-3.1-8B-Instruct config.json: 32 layers, 32 heads, 8 KV heads, hidden 4096, vocab 128256, 131072
    "llama-3.1-8b": _arch(8.03, 32, 32, 8, 4096, 128256, 131072),
    # meta-llama/Llama-3.1-70B-Instruct and Llama-3.3-70B-Instruct (same config.json): 80 layers, 64 heads, 8 KV, 8192
    "llama-3.1-70b": _arch(70.55, 80, 64, 8, 8192, 128256, 131072),
    "llama-3.3-70b": _arch(70.55, 80, 64, 8, 8192, 128256, 131072),
    # meta-llama/Llama-3.1-405B-Instruct config.json: 126 layers, 128 heads, 8 KV heads, hidden 16384
    "llama-3.1-405b": _arch(405.85, 126, 128, 8, 16384, 128256, 131072),
    # Qwen/Qwen2.5-7B-Instruct config.json: 28 layers, 28 heads, 4 KV heads, hidden 3584, vocab 152064, 32768
    "qwen2.5-7b": _arch(7.62, 28, 28, 4, 3584, 152064, 32768),
    # Qwen/Qwen2.5-72B-Instruct config.json: 80 layers, 64 heads, 8 KV heads, hidden 8192, vocab 152064, 32768
    "qwen2.5-72b": _arch(72.71, 80, 64, 8, 8192, 152064, 32768),
    # mistralai/Mistral-7B-Instruct-v0.3 config.json: 32 layers, 32 heads, 8 KV heads, hidden 4096, vocab 32768, 32768
    "mistral-7b-v0.3": _arch(7.25, 32, 32, 8, 4096, 32768, 32768),
})
"""Every model ``gpuscale perf --model`` knows by name."""


def dense_params_b(layers: int, heads: int, kv_heads: int, head_dim: int, hidden: int, intermediate: int, vocab: int,
                   tie_word_embeddings: bool = False) -> float:
    """Parameters of a dense decoder (billions): embeddings (and an untied LM head), per layer the query, key/value and
    output projections, a gated MLP (gate, up, down) and two norms, plus the final norm. Biases are left out (<0.01 %)."""
    embed = vocab * hidden * (1 if tie_word_embeddings else 2)
    attn = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2
    mlp = 3 * hidden * intermediate
    return (embed + layers * (attn + mlp + 2 * hidden) + hidden) / 1e9


HF_CONFIG_KEYS = ("num_hidden_layers", "num_attention_heads", "hidden_size", "intermediate_size", "vocab_size",
                  "max_position_embeddings")
"""The config.json keys ``from_hf_config`` needs (``num_key_value_heads``, ``head_dim``, ``tie_word_embeddings`` are
optional, with the transformers defaults: as many KV heads as heads, hidden / heads, untied)."""


def from_hf_config(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The ``ModelArchitecture`` fields of a dense model's Hugging Face config.json (``params_b`` from
    ``dense_params_b``); a missing key raises ``KeyError`` naming it. MoE configs (``num_experts``...) are refused:
    their active and total parameters differ, which this model does not represent."""
    moe = [k for k in ("num_experts", "num_local_experts", "n_routed_experts") if k in cfg]
    if moe:
        raise ValueError(f"{moe[0]}: mixture-of-experts models are not supported (only dense decoders)")
    missing = [k for k in HF_CONFIG_KEYS if k not in cfg]
    if missing:
        raise KeyError(", ".join(missing))
    heads, hidden = int(cfg["num_attention_heads"]), int(cfg["hidden_size"])
    kv_heads = int(cfg.get("num_key_value_heads") or heads)
    head_dim = int(cfg.get("head_dim") or hidden // heads)
    tie = bool(cfg.get("tie_word_embeddings", False))
    layers, vocab = int(cfg["num_hidden_layers"]), int(cfg["vocab_size"])
    return {
        "params_b": round(dense_params_b(layers, heads, kv_heads, head_dim, hidden, int(cfg["intermediate_size"]), vocab,
                                         tie), 3),
        "layers": layers, "attention_heads": heads, "kv_heads": kv_heads, "head_dim": head_dim, "hidden_size": hidden,
        "vocab_size": vocab, "tie_word_embeddings": tie, "max_context_tokens": int(cfg["max_position_embeddings"]),
    }
