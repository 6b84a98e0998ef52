"""The simulator's request path compiled by mypyc: the same source as C extensions, used only when built from exactly
the source in this tree.

Why: after the closed-form decode runs and the lazy decode engines, a simulated request still cost about 120 Python
function calls (arrival, API-server hand-over, prefill step, KV transfer, decode join and completion, the ledger), and
CPython's per-call and per-attribute overhead was most of the time (``docs/simulator.md``, Speed). mypyc compiles these
typed modules to C without changing what they compute: every golden hash is the same compiled and interpreted
(``tests/sim/test_native.py`` runs one case both ways and compares the JSON).

How it stays honest:

* ``build()`` (``make native``, which ``make test``, ``make plan`` and ``make bench`` run first) compiles ``MODULES``
  into ``build/sim-native/<digest>/``, where the digest covers every compiled source file, the interpreter's ABI tag
  and the mypy version. An edited module has another digest, so a stale build is never loaded: the simulator runs interpreted
  until it is rebuilt.
* ``activate()`` (at the import of ``gpuscale.sim``) loads the extensions only if the directory of the current digest is
  complete, through a finder for exactly those module names (so nothing is written next to the sources and no
  ``.so`` shadows a ``.py`` in the package). ``GPUSCALE_SIM_NATIVE=0`` forces the interpreted modules.
* ``active()`` says which modules run compiled; ``bench/sim_bench.py`` records it beside its speeds.

No compiler, or a module mypyc refuses: ``build()`` says so and the simulator runs interpreted (slower, same results).
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

MODULES = (
    "gpuscale.sim.events",
    "gpuscale.sim.prefix_cache",
    "gpuscale.sim.vllm_engine",
    "gpuscale.sim.router",
    "gpuscale.sim.accounting",
    "gpuscale.sim.replica_set",
)
"""The modules on the per-request path (the profile's top entries); each compiles as it is, with ``mypy --strict``.
The controllers (``policies``, ``signals``) stay interpreted, and so does ``simulation``: the dashboard snapshot
subclasses ``Simulation`` (``gpuscale/dashboards/snapshot.py``), and an interpreted class cannot inherit from a
compiled one. A class added here must have no interpreted subclass anywhere."""

ENV_SWITCH = "GPUSCALE_SIM_NATIVE"
"""``0``: run the interpreted modules even when a build of the current source exists."""

ROOT = Path(__file__).resolve().parents[2]
BUILD_ROOT = ROOT / "build" / "sim-native"
_COMPLETE = "complete"

_active: tuple[str, ...] = ()


def _source(module: str) -> Path:
    return ROOT.joinpath(*module.split(".")).with_suffix(".py")


def digest() -> str:
    """What a build is of: the compiled sources, the interpreter's ABI and the compiler's version."""
    h = hashlib.sha256()
    h.update(sys.implementation.cache_tag.encode())
    h.update(str(sysconfig.get_config_var("EXT_SUFFIX")).encode())
    try:  # from its metadata: importing mypy loads its own compiled library (~70 ms at every import of the simulator)
        mypy_version = importlib.metadata.version("mypy")
    except importlib.metadata.PackageNotFoundError:  # no mypy: nothing can be built here, and no build matches "none"
        mypy_version = "none"
    h.update(mypy_version.encode())
    for m in MODULES:
        h.update(m.encode())
        h.update(_source(m).read_bytes())
    return h.hexdigest()[:20]


def _ext_files(build: Path) -> dict[str, Path] | None:
    """Module name -> extension file of a complete build, the shared library of the group included; None if any is
    missing."""
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    files = {m: build.joinpath(*m.split(".")).with_suffix(suffix) for m in MODULES}
    shared = sorted(build.glob(f"*__mypyc{suffix}"))
    if len(shared) != 1 or not all(f.exists() for f in files.values()):
        return None
    files[shared[0].name[: -len(suffix)]] = shared[0]
    return files


class _Finder(importlib.abc.MetaPathFinder):
    """Finds exactly the compiled modules of one build; every other import goes on as before."""

    def __init__(self, files: dict[str, Path]) -> None:
        self.files = files

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None,
    ) -> ModuleSpec | None:
        f = self.files.get(fullname)
        return importlib.util.spec_from_file_location(fullname, f) if f is not None else None


def activate() -> tuple[str, ...]:
    """Load the compiled modules from the build of the current source, if there is one and none is imported yet."""
    global _active
    if _active or os.environ.get(ENV_SWITCH, "1") == "0" or any(m in sys.modules for m in MODULES):
        return _active
    try:
        build = BUILD_ROOT / digest() if BUILD_ROOT.is_dir() else None
    except OSError:  # a source not readable as a file (a zipped install): interpreted
        build = None
    files = _ext_files(build) if build is not None and (build / _COMPLETE).exists() else None
    if files is None:
        return _active
    sys.meta_path.insert(0, _Finder(files))
    _active = MODULES
    return _active


def active() -> tuple[str, ...]:
    """The modules that run compiled in this process (empty: all interpreted)."""
    return tuple(m for m in _active if m in sys.modules and not str(sys.modules[m].__file__).endswith(".py"))


_BUILD_SCRIPT = """
import sys
from mypyc.build import mypycify
from setuptools import Distribution
out, tmp, *paths = sys.argv[1:]
exts = mypycify(paths, opt_level="3", target_dir=tmp + "/c")
dist = Distribution({"name": "gpuscale-sim-native", "ext_modules": exts})
dist.script_name = "native"
dist.script_args = ["build_ext", "--build-lib", out, "--build-temp", tmp + "/o"]
dist.parse_command_line()
dist.run_commands()
"""


def build(quiet: bool = True) -> Path | None:
    """Compile ``MODULES`` into ``build/sim-native/<digest>/`` (nothing to do if that build is complete). Returns the
    build, or None with the reason on stderr (the simulator then runs interpreted)."""
    dest = BUILD_ROOT / digest()
    if (dest / _COMPLETE).exists():
        return dest
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        print(f"gpuscale.sim.native: no C compiler ({cc}): the simulator runs interpreted", file=sys.stderr)
        return None
    BUILD_ROOT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=BUILD_ROOT, prefix=".tmp-") as tmp:
        lib = Path(tmp) / "lib"
        paths = [str(_source(m).relative_to(ROOT)) for m in MODULES]
        proc = subprocess.run(
            [sys.executable, "-c", _BUILD_SCRIPT, str(lib), tmp, *paths], cwd=ROOT, capture_output=quiet, text=True,
            check=False,
        )
        if proc.returncode != 0 or _ext_files(lib) is None:
            tail = (proc.stdout or "")[-2000:] + (proc.stderr or "")[-2000:] if quiet else ""
            print(f"gpuscale.sim.native: mypyc failed (exit {proc.returncode}): the simulator runs interpreted\n{tail}",
                  file=sys.stderr)
            return None
        (lib / _COMPLETE).touch()
        try:
            lib.rename(dest)  # a new directory: a process that loaded an older build keeps its files
        except OSError:
            if not (dest / _COMPLETE).exists():  # not a concurrent build of the same digest that finished first
                raise
    for old in BUILD_ROOT.iterdir():  # earlier digests (unlinking a loaded library is safe; it stays mapped)
        if old.name != dest.name and not old.name.startswith("."):  # not a build under way, not make's stamp
            shutil.rmtree(old, ignore_errors=True)
    return dest


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["build"]:
        built = build(quiet="-v" not in args)
        print(f"gpuscale.sim.native: {built}" if built else "gpuscale.sim.native: not built", file=sys.stderr)
        return 0  # an interpreted simulator is slower, not wrong: the build never fails the make
    print("usage: native.main(['build', '-v'?]) (make native)", file=sys.stderr)
    return 2
