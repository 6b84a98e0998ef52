"""``bench/goal_table.py`` resumes: a cell the JSON holds at the same code and arguments is kept, not run again; any
change to the sources or the cell's arguments makes it stale."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.bench.loader import bench_module


@pytest.fixture(scope="module")
def gt() -> ModuleType:
    return bench_module("goal_table")


def job(gt: ModuleType, **change: Any) -> Any:
    base = {"stack": "prod", "trace": "code", "k": 1.0, "replay": "exact", "evals": 12, "work": "/tmp/x", "warm": 600.0,
            "holdout": 0.5}
    base |= change
    return tuple(base.values())


def test_a_cells_key_names_the_code_and_every_argument_but_the_work_directory(gt: ModuleType) -> None:
    code = gt.code_hash()
    assert code == gt.code_hash() and len(code) == 16  # stable for the same sources
    key = gt.cell_key(code, job(gt))
    assert key == gt.cell_key(code, job(gt, work="/elsewhere"))
    assert key.startswith(code + ":")
    for change in ({"stack": "dev"}, {"k": 2.0}, {"replay": "batch"}, {"evals": 10}, {"warm": 0.0}, {"holdout": 0.25}):
        assert gt.cell_key(code, job(gt, **change)) != key, change
    assert gt.cell_key("0" * 16, job(gt)) != key  # another code: every cell is stale


def test_earlier_cells_are_read_by_key_and_a_bad_file_holds_none(gt: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "g.json"
    assert gt.earlier_cells(path) == {}
    path.write_text("{not json")
    assert gt.earlier_cells(path) == {}
    path.write_text(json.dumps({"cells": [{"key": "a:b", "stack": "prod"}, {"stack": "old, no key"}]}))
    assert list(gt.earlier_cells(path)) == ["a:b"]


def test_a_run_whose_cells_are_all_measured_runs_none_and_rewrites_the_table(
    gt: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    traces = tmp_path / "traces"
    traces.mkdir()
    (traces / "azure2023_code_norm.csv").write_text("arrival_s,input_tokens,output_tokens\n0.013,10,10\n1.71,10,10\n")
    monkeypatch.setattr(gt, "TRACES", traces)
    monkeypatch.setattr(gt, "markdown", lambda path: "(table)")

    def never(args: Any) -> dict[str, Any]:
        raise AssertionError(f"ran {args}")

    monkeypatch.setattr(gt, "cell", never)
    out = tmp_path / "g.json"
    code = gt.code_hash()
    keys = [gt.cell_key(code, ("prod", "code", k, "exact", 12, "", 600.0, 0.5)) for k in (1.0, 2.0)]
    out.write_text(json.dumps({"cells": [{"key": k, "seconds": 5.0, "stack": "prod"} for k in reversed(keys)]}))
    monkeypatch.setattr(sys, "argv", ["goal_table.py", "--stacks", "prod", "--traces", "code", "--compress", "1,2",
                                      "--json", str(out)])
    gt.main()
    err = capsys.readouterr().err
    assert "2 cells planned" in err and "2 already measured" in err and "0 to run" in err
    data = json.loads(out.read_text())
    assert [c["key"] for c in data["cells"]] == keys  # the planned order
    assert data["code"] == code and data["seconds"] == 10.0 and data["planned_cells"] == 2


def test_the_cells_that_took_longest_before_run_first(gt: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "g.json"
    path.write_text(json.dumps({"cells": [
        {"stack": "prod", "trace": "code", "compress": 1.0, "replay": "exact", "seconds": 100.0},
        {"stack": "prod", "trace": "code", "compress": 2.0, "replay": "exact", "seconds": 900.0},
    ]}))
    todo = [(f"k{k}", ("prod", "code", k, "exact", 12, "", 600.0, 0.5)) for k in (1.0, 2.0, 3.0)]
    assert [key for key, _ in gt.longest_first(todo, path)] == ["k2.0", "k1.0", "k3.0"]


def test_the_docs_render_the_committed_goal_table_and_why_its_goals_are_missed(gt: ModuleType) -> None:
    """Between its markers ``docs/simulator.md`` holds exactly what ``--docs`` renders from the committed JSON: the
    table, then per run and goal the cells that miss it and why, so no figure there is typed by hand."""
    from gpuscale.plan.goal_table import load_goal_table
    from gpuscale.plan.render import goal_table_docs

    text = gt.DOCS.read_text()
    between = text.split(gt.BEGIN, 1)[1].split(gt.END, 1)[0]
    committed = load_goal_table(gt.ROOT / "bench" / "results" / "goal_table.json")
    assert between == "\n" + goal_table_docs(committed), (
        "docs/simulator.md is stale: run bench/goal_table.py --markdown-only --json bench/results/goal_table.json --docs")
    assert "Where the goals are missed, and why" in between
