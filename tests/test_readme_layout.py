"""The README's layout table and docs/simulator.md's module table match the tree: every entry named exists, and every
module, package and document in the tree is named."""

from __future__ import annotations

import re

from tests.conftest import REPO

_CODE = re.compile(r"`([^`]+)`")


def _layout_rows() -> dict[str, str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    table = text[text.index("## Layout"):]
    rows: dict[str, str] = {}
    for line in table.splitlines()[4:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|", 1)]
        rows[cells[0].strip("`")] = cells[1]
    return rows


def _named(cell: str) -> set[str]:
    """Every file or folder a cell names (the first word of each code span that looks like a path)."""
    return {m.split()[0].rstrip(",") for m in _CODE.findall(cell) if re.fullmatch(r"[\w./-]+\.(py|md|toml)|[\w-]+/", m.split()[0])}


def test_the_core_row_names_every_module_and_package_of_gpuscale() -> None:
    named = _named(_layout_rows()["gpuscale/"])
    tree = {p.name + ("/" if p.is_dir() else "") for p in (REPO / "gpuscale").iterdir()
            if p.name not in ("__init__.py", "py.typed", "__pycache__") and (p.is_dir() or p.suffix == ".py")}
    assert tree - named == set(), "in the tree, not in the README's layout table"
    anywhere = {p.name + ("/" if p.is_dir() else "") for p in (REPO / "gpuscale").rglob("*")}
    assert {n for n in named if not n.startswith("docs/")} - anywhere == set(), "named, nowhere in gpuscale/"


def test_the_docs_and_bench_rows_list_their_folders() -> None:
    rows = _layout_rows()
    assert _named(rows["docs/"]) == {p.name for p in (REPO / "docs").glob("*.md")}
    bench = {p.name + ("/" if p.is_dir() else "") for p in (REPO / "bench").iterdir() if p.name != "__pycache__"}
    assert _named(rows["bench/"]) == bench


def test_the_simulator_doc_names_every_sim_module() -> None:
    text = (REPO / "docs" / "simulator.md").read_text(encoding="utf-8")
    table = text[text.index("## Layout"):]
    named = set(re.findall(r"`gpuscale/sim/([\w/]+(?:\.py)?)`", table))
    tree = {p.name + ("/" if p.is_dir() else "") for p in (REPO / "gpuscale" / "sim").iterdir()
            if p.name not in ("__init__.py", "__pycache__")}
    assert tree - named == set(), "sim modules docs/simulator.md does not describe"
    assert named - tree == set(), "docs/simulator.md describes modules that do not exist"
