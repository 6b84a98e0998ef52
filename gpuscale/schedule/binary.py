"""Build the KAI replay program (``kai/``, Go) once per source hash and toolchain, into a cache directory.

The module is shipped as package data (``*.go``, ``go.mod``, ``go.sum``), so a wheel install builds it too. Modules
come from the Go module proxy (``GOPROXY``), compiled packages from Go's own build cache (``GOCACHE``); the finished
binary lives in ``$GPUSCALE_CACHE_DIR`` (default ``$XDG_CACHE_HOME/gpuscale``, else ``~/.cache/gpuscale``) under
``kai-schedule/<hash>/``, and later runs reuse it. Concurrent builders (``pytest -n``) serialise on a lock file.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from gpuscale.schedule.errors import ScheduleRefusal

SOURCE_DIR = Path(__file__).resolve().parent / "kai"
SOURCE_GLOBS = ("*.go", "go.mod", "go.sum")
BINARY_NAME = "kai-schedule"
GO_INSTALL_HINT = (
    "gpuscale schedule runs the real KAI Scheduler, a Go program built on first use: install Go 1.26 or newer "
    "(https://go.dev/dl/) so that `go` is on PATH (or set GPUSCALE_GO to its path); the first build downloads "
    "KAI v0.17.0 and its dependencies from the Go module proxy"
)


class GoUnavailableError(ScheduleRefusal):
    """No Go toolchain: says what to install."""


class BuildError(ScheduleRefusal):
    """``go build`` failed; carries the tail of its output."""


GO_ENV_TIMEOUT_S = 60.0
"""``go env`` answers in well under a second; a program that does not within this is not a usable Go."""
GO_BUILD_TIMEOUT_S = 3 * 3600.0
"""The first build took 16-28 minutes on a loaded 2-core machine (README); a build still running after this is stuck."""


def _go_setting(go: str) -> str:
    """Where ``go`` came from, as the user would change it."""
    return f"GPUSCALE_GO={go}" if os.environ.get("GPUSCALE_GO") else f"`go` on PATH ({go})"


def go_executable() -> str:
    explicit = os.environ.get("GPUSCALE_GO")
    go = explicit or shutil.which("go")
    if not go:
        raise GoUnavailableError(GO_INSTALL_HINT)
    if not Path(go).is_file():
        raise GoUnavailableError(f"{GO_INSTALL_HINT} (GPUSCALE_GO={go} is not a file)" if explicit else GO_INSTALL_HINT)
    return go


def go_version(go: str) -> str:
    """``go env GOVERSION GOOS GOARCH`` (the toolchain part of the cache key); ``GoUnavailableError`` when ``go`` does
    not run, takes longer than ``GO_ENV_TIMEOUT_S`` or does not answer as Go does."""
    where = _go_setting(go)
    try:
        out = subprocess.run([go, "env", "GOVERSION", "GOOS", "GOARCH"], capture_output=True, text=True,
                             timeout=GO_ENV_TIMEOUT_S, check=True, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise GoUnavailableError(f"{where}: `go env` did not answer within {GO_ENV_TIMEOUT_S:g} s; {GO_INSTALL_HINT}") from None
    except (OSError, subprocess.SubprocessError, UnicodeDecodeError) as exc:
        raise GoUnavailableError(f"{where} does not run as Go ({exc}); {GO_INSTALL_HINT}") from None
    fields = out.stdout.split()
    if len(fields) != 3 or not fields[0].startswith("go"):
        raise GoUnavailableError(
            f"{where} is not a Go toolchain (`go env GOVERSION GOOS GOARCH` printed {out.stdout.strip()[:80]!r}); "
            f"{GO_INSTALL_HINT}"
        )
    return " ".join(fields)


def check_cache_dir() -> None:
    """``BuildError`` naming the setting when the cache directory exists and is not a writable directory."""
    root = cache_root()
    for d in (root, *root.parents):
        if d.exists():
            if not d.is_dir() or not os.access(d, os.W_OK | os.X_OK):
                what = "not a directory" if not d.is_dir() else "not writable"
                raise BuildError(f"{_cache_setting(root)}: {d} is {what}; point GPUSCALE_CACHE_DIR at a writable directory")
            return


def _cache_setting(root: Path) -> str:
    if os.environ.get("GPUSCALE_CACHE_DIR"):
        return f"GPUSCALE_CACHE_DIR={root}"
    return f"the cache directory {root}"


def source_files() -> list[Path]:
    files = sorted({p for pattern in SOURCE_GLOBS for p in SOURCE_DIR.glob(pattern) if not p.name.endswith("_test.go")})
    if not any(p.name == "go.mod" for p in files):
        raise BuildError(f"the KAI replay program's sources are missing from {SOURCE_DIR} (a broken install?)")
    return files


def source_hash(toolchain: str) -> str:
    h = hashlib.sha256(toolchain.encode())
    for path in source_files():
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def cache_root() -> Path:
    explicit = os.environ.get("GPUSCALE_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "gpuscale"


def ensure_binary(*, quiet: bool = False) -> Path:
    """The built program, building it first if this source and toolchain have not been built yet."""
    go = go_executable()
    digest = source_hash(go_version(go))
    target_dir = cache_root() / BINARY_NAME / digest
    binary = target_dir / BINARY_NAME
    if binary.is_file():
        return binary
    check_cache_dir()
    try:
        return _build(go, target_dir, binary, quiet=quiet)
    except OSError as exc:
        raise BuildError(f"{_cache_setting(cache_root())}: cannot build into {target_dir} ({exc.strerror or exc})") from None


def _build(go: str, target_dir: Path, binary: Path, *, quiet: bool) -> Path:
    target_dir.mkdir(parents=True, exist_ok=True)
    with open(target_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if binary.is_file():  # another process built it while we waited
            return binary
        if not quiet:
            print(f"building the KAI Scheduler replay program into {target_dir} (first use; this takes minutes)",
                  file=sys.stderr)
        with tempfile.TemporaryDirectory(dir=target_dir, prefix="src-") as work:
            for path in source_files():
                shutil.copy2(path, Path(work) / path.name)
            env = {**os.environ, "GOFLAGS": f"{os.environ.get('GOFLAGS', '')} -mod=readonly".strip()}
            try:
                proc = subprocess.run([go, "build", "-trimpath", "-o", str(Path(work) / BINARY_NAME), "."], cwd=work,
                                      env=env, capture_output=True, text=True, timeout=GO_BUILD_TIMEOUT_S,
                                      stdin=subprocess.DEVNULL)
            except subprocess.TimeoutExpired:
                raise BuildError(f"go build of the KAI replay program ({_go_setting(go)}) did not finish within "
                                 f"{GO_BUILD_TIMEOUT_S / 3600:g} h") from None
            if proc.returncode != 0:
                raise BuildError(_build_failure(proc.returncode, proc.stdout + proc.stderr))
            if not (Path(work) / BINARY_NAME).is_file():
                raise BuildError(f"{_go_setting(go)}: `go build` exited 0 but wrote no program; is it Go?")
            os.replace(Path(work) / BINARY_NAME, binary)
    return binary


def _build_failure(returncode: int, output: str) -> str:
    """First line: go's first error (so one-line displays name it); then the distinct lines of its output."""
    lines = list(dict.fromkeys(line.strip() for line in output.splitlines() if line.strip()))
    errors = [line for line in lines if not line.startswith("go: downloading")]
    first = errors[0] if errors else f"exit {returncode}"
    return f"go build of the KAI replay program failed: {first}\n" + "\n".join(errors[1:15])


def main() -> int:
    """``python -m gpuscale.schedule.binary``: build (or find) the program and print its path; CI runs this once."""
    try:
        print(ensure_binary())
    except (GoUnavailableError, BuildError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
