"""The compiled request path (``gpuscale.sim.native``): loaded only from a build of the very source in the tree, and
computing what the interpreted modules compute, number for number."""

from __future__ import annotations

import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpuscale.sim import native
from gpuscale.sim.runner import Runner
from gpuscale.sim.scenarios import build_scenario
from gpuscale.sim.traffic import TraceTraffic
from tests.sim.conftest import spec_of, write_prefix_trace

SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


def full_json(tmp: Path) -> str:
    """The whole result of golden's ``prod-prefix-trace-pd`` case (disaggregated P/D, KV transfers, the cache-aware
    pick on prefix ids, every policy), nothing left out."""
    trace = TraceTraffic(path=write_prefix_trace(tmp / "prefix.csv", groups=40, per_bucket=12))
    sc = build_scenario("trace", spec_of("prod"), trace=trace)
    return json.dumps(Runner(sc, seed=0).run().model_dump(mode="json"), sort_keys=True)


def fake_build(root: Path, shared: int = 1, skip: str | None = None) -> Path:
    for m in native.MODULES:
        if m != skip:
            f = root.joinpath(*m.split(".")).with_suffix(SUFFIX)
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_bytes(b"")
    for i in range(shared):
        (root / f"{i:020x}__mypyc{SUFFIX}").write_bytes(b"")
    return root


def test_ext_files_maps_every_module_and_the_group_library(tmp_path: Path) -> None:
    files = native._ext_files(fake_build(tmp_path))
    assert files is not None
    assert set(files) == {*native.MODULES, f"{0:020x}__mypyc"}
    assert files["gpuscale.sim.vllm_engine"] == tmp_path / "gpuscale" / "sim" / f"vllm_engine{SUFFIX}"


@pytest.mark.parametrize(("shared", "skip"), [(1, "gpuscale.sim.router"), (0, None), (2, None)])
def test_ext_files_refuses_an_incomplete_build(tmp_path: Path, shared: int, skip: str | None) -> None:
    assert native._ext_files(fake_build(tmp_path, shared, skip)) is None


def test_digest_follows_every_compiled_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An edit to any compiled module is another digest, so the build of the old source is never loaded."""
    for m in native.MODULES:
        dst = tmp_path.joinpath(*m.split(".")).with_suffix(".py")
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(native._source(m), dst)
    monkeypatch.setattr(native, "ROOT", tmp_path)
    before = native.digest()
    assert native.digest() == before
    seen = {before}
    for m in native.MODULES:
        src = native._source(m)
        src.write_text(src.read_text() + "\n")
        seen.add(native.digest())
    assert len(seen) == len(native.MODULES) + 1


def activate_in_fresh_interpreter(build_root: Path) -> list[str]:
    """``activate`` against ``build_root`` in a new interpreter whose request-path modules are not imported yet."""
    code = (
        "import os, sys; from pathlib import Path; import gpuscale.sim.native as n; "
        f"os.environ.pop(n.ENV_SWITCH); n.BUILD_ROOT = Path({str(build_root)!r}); "
        "[sys.modules.pop(m, None) for m in n.MODULES]; import json; print(json.dumps(list(n.activate())))"
    )
    env = {**os.environ, native.ENV_SWITCH: "0"}  # the package's own activate() at import stays off
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return list(json.loads(out.stdout))


def test_activate_loads_only_a_complete_build_of_this_source(tmp_path: Path) -> None:
    """A build of another digest (marked complete), or of this one before it is marked complete, is not loaded;
    marked complete, this digest's build is."""
    build_root = tmp_path / "sim-native"
    other = fake_build(build_root / ("0" * 20))
    (other / "complete").touch()
    mine = fake_build(build_root / native.digest())
    assert activate_in_fresh_interpreter(build_root) == []
    (mine / "complete").touch()
    assert activate_in_fresh_interpreter(build_root) == list(native.MODULES)


def test_the_switch_forces_the_interpreted_modules() -> None:
    code = "from gpuscale.sim import native, simulation; print(list(native.active()))"
    env = {**os.environ, native.ENV_SWITCH: "0"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


@pytest.mark.skipif(not native.active(), reason="the compiled request path is not built here (make native)")
def test_compiled_and_interpreted_runs_are_the_same_numbers(tmp_path: Path) -> None:
    """One golden case run compiled here and interpreted in a subprocess: the same JSON, byte for byte."""
    assert set(native.active()) == set(native.MODULES)
    (tmp_path / "c").mkdir()
    (tmp_path / "i").mkdir()
    compiled = full_json(tmp_path / "c")
    code = (
        "import sys; from pathlib import Path; from gpuscale.sim import native; "
        "from tests.sim.test_native import full_json; assert not native.active(); "
        "sys.stdout.write(full_json(Path(sys.argv[1])))"
    )
    env = {**os.environ, native.ENV_SWITCH: "0"}
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "i")], env=env, cwd=root, capture_output=True, text=True,
        check=True,
    )
    assert out.stdout == compiled
