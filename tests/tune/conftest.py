"""Small traces written on the fly (never committed) and the tiny stacks of the simulator tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def write_trace(path: Path, times: np.ndarray, prompt: int | np.ndarray, output: int | np.ndarray) -> Path:
    """A ``*_norm.csv`` trace: one row per arrival."""
    p = np.broadcast_to(np.asarray(prompt), times.shape)
    o = np.broadcast_to(np.asarray(output), times.shape)
    rows = ["arrival_s,input_tokens,output_tokens"] + [f"{t:.3f},{int(a)},{int(b)}" for t, a, b in zip(times, p, o, strict=True)]
    path.write_text("\n".join(rows) + "\n")
    return path


def steady(rate_rps: float, span_s: float) -> np.ndarray:
    return np.arange(0.0, span_s, 1.0 / rate_rps)
