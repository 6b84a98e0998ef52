"""The bad-input corpus (tests/corpus/cases.yaml): every case is refused with its exit code, the YAML path of the value
to change and the file it is in, with no traceback and nothing written; the write-back cases end with the user's file
kept as it was but for the tuned values. In-process through the CLI (typer's CliRunner); exhaustion cases
(``limits: true``) and interrupted writes run as a real subprocess under a memory, CPU and wall-clock limit, so a
regression fails instead of hanging CI; two more cases also run as a real subprocess."""

from __future__ import annotations

import copy
import difflib
import os
import re
import resource
import signal
import stat
import subprocess
import sys
import time
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
    return text.replace("{stack}", str(stack)).replace("{tmp}", str(tmp)).replace("{files}", str(CORPUS / "files"))


def _content(content: Any) -> bytes:
    """A setup file's bytes: text, bytes, or a list of [text, times] pieces (a 140,000-character cell in one line)."""
    if isinstance(content, list):
        return b"".join(str(text).encode() * int(times) for text, times in content)
    return content if isinstance(content, bytes) else str(content).encode()


def _prepare(case: dict[str, Any], stack: Path, tmp: Path) -> None:
    """Files of the case: ``setup`` (content), ``exec`` (made executable), ``fifo``, ``sparse`` ({path: size}, holes),
    ``link`` ({link: target}), ``mode`` ({path: octal})."""
    for rel, content in (case.get("setup") or {}).items():
        target = tmp / rel
        if rel.endswith("/"):
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(_content(content))
    for rel in case.get("exec") or []:
        (tmp / rel).chmod(0o755)
    for rel in case.get("fifo") or []:
        os.mkfifo(tmp / rel)
    for rel, size in (case.get("sparse") or {}).items():
        with open(tmp / rel, "wb") as fh:
            fh.truncate(int(size))
    for link, target in (case.get("link") or {}).items():
        (tmp / link).symlink_to(_fill(target, stack, tmp))
    for path, mode in (case.get("mode") or {}).items():
        Path(_fill(path, stack, tmp)).chmod(int(str(mode), 8))


CASE_MEMORY_BYTES = 2 << 30
"""Address space of an exhaustion case's process (the CLI with numpy and the simulator loaded takes well under it)."""
CASE_CPU_S = 60
CASE_WALL_S = 90.0


def _limited() -> None:  # runs in the child before exec
    resource.setrlimit(resource.RLIMIT_AS, (CASE_MEMORY_BYTES, CASE_MEMORY_BYTES))
    resource.setrlimit(resource.RLIMIT_CPU, (CASE_CPU_S, CASE_CPU_S))


_SLOW_FSYNC = (
    "import os, time\n"
    "_fsync = os.fsync\n"
    "def _slow(fd):\n"
    "    time.sleep(60)\n"
    "    _fsync(fd)\n"
    "os.fsync = _slow\n"
)


def _run_limited(case: dict[str, Any], args: list[str], env: dict[str, str], stack: Path) -> tuple[int, str]:
    """The CLI in its own process under ``_limited``; with ``interrupt: true``, ``os.fsync`` is slowed and the process
    gets SIGTERM once its temporary file exists beside the stack file (an interrupted write-back)."""
    code = (_SLOW_FSYNC if case.get("interrupt") else "") + "from gpuscale.cli import main; main()"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args], cwd=REPO, env={**os.environ, "OPENBLAS_NUM_THREADS": "1", **env},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, preexec_fn=_limited,
    )
    if case.get("interrupt"):
        deadline = time.monotonic() + CASE_WALL_S
        while not list(stack.parent.glob(f".{stack.name}.*")):
            assert proc.poll() is None and time.monotonic() < deadline, "the write-back never created its temporary file"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
    try:
        out, _ = proc.communicate(timeout=CASE_WALL_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"no answer within {CASE_WALL_S:g} s: {out[-2000:]}")
    return proc.returncode, out


def _check_files(case: dict[str, Any], stack: Path, tmp: Path, before: bytes) -> None:
    """``modes`` ({path: octal, or "umask" for a new file}), ``links`` (still symlinks), ``contains`` ({path: [text]}),
    ``unchanged_except`` ({path: [keys]}: every changed line of the file names one of them), ``no_hidden`` (no
    temporary file left beside the stack file), ``unchanged`` (the stack file's bytes)."""
    umask = os.umask(0)
    os.umask(umask)
    for path, mode in (case.get("modes") or {}).items():
        want = 0o666 & ~umask if mode == "umask" else int(str(mode), 8)
        got = stat.S_IMODE(Path(_fill(path, stack, tmp)).stat().st_mode)
        assert got == want, f"{path}: mode {got:o}, expected {want:o}"
    for path in case.get("links") or []:
        assert Path(_fill(path, stack, tmp)).is_symlink(), f"{path} is no longer a symlink"
    for path, texts in (case.get("contains") or {}).items():
        data = Path(_fill(path, stack, tmp)).read_bytes()
        for text in texts:
            assert text.encode() in data, f"{path} lacks {text!r}"
    for path, keys in (case.get("unchanged_except") or {}).items():
        after = Path(_fill(path, stack, tmp)).read_bytes()
        old, new = (b.decode("utf-8", "surrogateescape").split("\n") for b in (before, after))
        changed = [d[2:] for d in difflib.ndiff(old, new) if d[:2] in ("- ", "+ ")]
        assert changed, f"{path} did not change"
        stray = [ln for ln in changed if not any(f"{k}:" in ln for k in keys)]
        assert not stray, f"{path}: lines changed that were not tuned: {stray}"
        if b"\r\n" in before:
            assert all(ln.endswith("\r") for ln in new[:-1]), f"{path}: line endings changed"
        assert after.startswith(b"\xef\xbb\xbf") == before.startswith(b"\xef\xbb\xbf"), f"{path}: byte-order mark changed"
    if case.get("no_hidden"):
        assert not list(stack.parent.glob(f".{stack.name}.*")), "a temporary file was left beside the stack file"
    if case.get("unchanged"):
        assert stack.read_bytes() == before, "the stack file changed"


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_bad_input_is_refused_cleanly(case: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    name = Path(case.get("file", "Pulumi.case.yaml"))
    stack = tmp_path / "stack" / name
    stack.parent.mkdir(parents=True, exist_ok=True)
    stack.write_bytes(stack_text(case))
    _prepare(case, stack, tmp_path)
    before = stack.read_bytes()
    args = [_fill(a, stack, tmp_path) for a in case.get("args", ["validate", "--stack-file", "{stack}"])]
    env = {k: _fill(str(v), stack, tmp_path) for k, v in (case.get("env") or {}).items()}

    if case.get("limits") or case.get("interrupt"):
        code, output = _run_limited(case, args, env, stack)
    else:
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        result = runner.invoke(app, args)
        code, output = result.exit_code, result.output
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert code == case["exit"], output
    assert "Traceback" not in output
    if "path" in case:
        assert f"gpuscale:{case['path']}: " in output, output
        assert f"error: {stack}: invalid input" in output, output
    for text in case.get("says", []):
        assert text in output, output
    for path in case.get("absent", []):
        assert not Path(_fill(path, stack, tmp_path)).exists()
    _check_files(case, stack, tmp_path, before)


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
