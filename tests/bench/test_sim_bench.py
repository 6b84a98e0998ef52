"""``bench/sim_bench.py`` and ``bench/prefix_routing.py``: the docs show exactly their committed JSON (numbers never
typed), and the speed table's verdicts follow from the rows (a speed is never asserted: no timed test)."""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[f"bench_{name}"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def sim_bench() -> ModuleType:
    return load("sim_bench")


@pytest.fixture(scope="module")
def prefix_routing() -> ModuleType:
    return load("prefix_routing")


def committed(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((ROOT / "bench" / "results" / f"{name}.json").read_text())
    return doc


def between(module: ModuleType) -> str:
    text = (ROOT / "docs" / "simulator.md").read_text()
    return str(text.split(module.BEGIN, 1)[1].split(module.END, 1)[0])


def test_docs_render_the_committed_speed_json(sim_bench: ModuleType) -> None:
    assert between(sim_bench) == "\n" + sim_bench.markdown(committed("sim_bench")), \
        "docs/simulator.md is stale: run bench/sim_bench.py --markdown-only --json bench/results/sim_bench.json --docs"


def test_docs_render_the_committed_routing_json(prefix_routing: ModuleType) -> None:
    assert between(prefix_routing) == "\n" + prefix_routing.markdown(committed("prefix_routing")), \
        "docs/simulator.md is stale: run bench/prefix_routing.py --markdown-only --json bench/results/prefix_routing.json --docs"


def test_the_speed_verdicts_follow_from_the_rows(sim_bench: ModuleType) -> None:
    doc = copy.deepcopy(committed("sim_bench"))
    for w in doc["workloads"]:
        for p in w["policies"]:
            p["requests_per_cpu_s"] = 60_000 if w["workload"] == "conv" else 10_000
            p["cpu_s"] = 1.0 if w["workload"] == "long" else 1.9 if p["policy"] == "gpuscale" else 2.1
    text = sim_bench.markdown(doc)
    plain = sum(len(w["policies"]) for w in doc["workloads"] if w["workload"] != "long-prefix")
    conv = sum(len(w["policies"]) for w in doc["workloads"] if w["workload"] == "conv")
    assert f"met in {conv} of {plain} rows" in text
    assert "Prefix path within 2x of the plain one: 1 of 4 policies (1.90-2.10x)" in text
    assert "speed-up" in text.splitlines()[0]  # the committed run carries its baseline


def test_the_routing_table_states_the_work_picks_difference(prefix_routing: ModuleType) -> None:
    doc = committed("prefix_routing")
    text = prefix_routing.markdown(doc)
    for row in doc["rows"]:
        diff = row["cache-aware-work"]["misses"] - row["cache-aware"]["misses"]
        assert any(line.startswith(f"| x{row['compress']:g} |") and line.endswith(f"| {diff:+d} |")
                   for line in text.splitlines())
