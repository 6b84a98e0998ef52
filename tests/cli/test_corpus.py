"""The bad-input corpus (tests/corpus/cases.yaml): every case is refused with its exit code, the YAML path of the value
to change and the file it is in, with no traceback and nothing written. In-process through the CLI (typer's
CliRunner); two cases also run as a real subprocess."""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuscale.cli import app
from tests.cli.runner import FastRunner
from tests.conftest import REPO, stack_path

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
CASES: list[dict[str, Any]] = yaml.safe_load((CORPUS / "cases.yaml").read_text(encoding="utf-8"))
runner = FastRunner()

_TOKEN = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _steps(path: str) -> list[str | int]:
    return [int(i) if i else key for key, i in _TOKEN.findall(path)]


def _parent(config: dict[str, Any], path: str) -> tuple[Any, str | int]:
    """The container holding the value at ``path`` (below ``config: gpuscale:``) and its key."""
    first, *rest = _steps(path)
    keys: list[str | int] = [f"gpuscale:{first}", *rest]
    node: Any = config
    for key in keys[:-1]:
        node = node[key]
    return node, keys[-1]


def stack_text(case: dict[str, Any]) -> bytes:
    """The stack file of a case: a corpus file, or a shipped stack with the case's changes."""
    if "file" in case:
        return (CORPUS / "files" / case["file"]).read_bytes()
    doc = yaml.safe_load(stack_path(case.get("base", "prod")).read_text())
    config = doc["config"]
    for path, value in (case.get("set") or {}).items():
        node, key = _parent(config, path)
        node[key] = copy.deepcopy(value)
    for path in case.get("delete") or []:
        node, key = _parent(config, path)
        del node[key]
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True).encode()


def _fill(text: str, stack: Path, tmp: Path) -> str:
    return text.replace("{stack}", str(stack)).replace("{tmp}", str(tmp))


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_bad_input_is_refused_cleanly(case: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    name = Path(case.get("file", "Pulumi.case.yaml"))
    stack = tmp_path / "stack" / name
    stack.parent.mkdir(parents=True, exist_ok=True)
    stack.write_bytes(stack_text(case))
    for rel, content in (case.get("setup") or {}).items():
        target = tmp_path / rel
        if rel.endswith("/"):
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content if isinstance(content, bytes) else content.encode())
    args = [_fill(a, stack, tmp_path) for a in case.get("args", ["validate", "--stack-file", "{stack}"])]

    result = runner.invoke(app, args)

    output = result.output
    assert result.exit_code == case["exit"], output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in output
    if "path" in case:
        assert f"gpuscale:{case['path']}: " in output, output
        assert f"error: {stack}: invalid input" in output, output
    for text in case.get("says", []):
        assert text in output, output
    for path in case.get("absent", []):
        assert not Path(_fill(path, stack, tmp_path)).exists()


def test_the_corpus_covers_every_class() -> None:
    ids = {c["id"] for c in CASES}
    assert len(ids) == len(CASES), "case ids must be unique"
    assert len(CASES) >= 100


@pytest.mark.parametrize("case_id", ["brackets-in-file-name", "emoji-code-in-a-value"])
def test_end_to_end_in_a_real_process(case_id: str, tmp_path: Path) -> None:
    """The installed entry point, as a user runs it: exit 2, the text exactly as written, no traceback."""
    case = next(c for c in CASES if c["id"] == case_id)
    stack = tmp_path / case["file"]
    stack.parent.mkdir(parents=True, exist_ok=True)
    stack.write_bytes(stack_text(case))
    proc = subprocess.run(
        [sys.executable, "-c", "from gpuscale.cli import main; main()", "validate", "--stack-file", str(stack)],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"error: {stack}: invalid input" in proc.stderr
    assert f"gpuscale:{case['path']}: " in proc.stderr
    for text in case["says"]:
        assert text in proc.stderr
