"""Build the real controllers once per version, from the Go module proxy, into a cache outside the work tree.

Each binary pinned in ``gpuscale.versions.E2E_BINARIES`` is built from its wrapper module ``e2e/modules/<name>/go.mod``
(which requires the upstream module at the pinned version and lists the main packages as tools; no upstream source is
kept in this repository) into ``$GPUSCALE_E2E_CACHE/<name>-<version>/`` (default ``~/.cache/gpuscale-e2e``). A later run
whose wrapper module is unchanged reuses the binaries in well under a second. Each build's CPU seconds, wall time and
peak memory (``/usr/bin/time -v``) are kept in ``build.json`` beside the binaries.

``python -m e2e.build [NAME...]`` builds the named binaries (default: all) and prints what each cost.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gpuscale.versions import E2E_BINARIES, BinaryPin

WRAPPERS = Path(__file__).resolve().parent / "modules"
"""The wrapper modules, one folder per pin."""


TIME = Path("/usr/bin/time")
"""GNU time: ``-v`` reports the CPU seconds, wall time and peak memory of each build."""


class BuildError(RuntimeError):
    """A binary could not be built; the message says which and why."""


def cache_root() -> Path:
    return Path(os.environ.get("GPUSCALE_E2E_CACHE") or Path.home() / ".cache" / "gpuscale-e2e")


def bin_dir(pin: BinaryPin) -> Path:
    return cache_root() / f"{pin.name}-{pin.version}"


def wrapper(pin: BinaryPin) -> Path:
    return WRAPPERS / pin.name


def required_version(go_mod: str, module: str) -> str | None:
    """The version ``go.mod`` requires of ``module`` (single-line or block ``require``), or ``None``."""
    for match in re.finditer(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", go_mod, re.MULTILINE):
        return match.group(1)
    return None


def tools(go_mod: str) -> list[str]:
    """The packages a ``go.mod`` lists with ``tool`` directives."""
    out: list[str] = []
    block = False
    for line in go_mod.splitlines():
        text = line.split("//")[0].strip()
        if block:
            if text == ")":
                block = False
            elif text:
                out.append(text)
        elif text == "tool (":
            block = True
        elif text.startswith("tool "):
            out.append(text.removeprefix("tool ").strip())
    return out


def source_key(pin: BinaryPin) -> str:
    """What the binaries depend on: the wrapper module's files and the pin's build flags."""
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum"):
        path = wrapper(pin) / name
        digest.update(path.read_bytes() if path.exists() else b"")
    flags: list[object] = [pin.packages, pin.binaries, pin.ldflags]
    if pin.generated_json:  # only then, so that no other pin's cached build goes stale
        flags.append(pin.generated_json)
    digest.update(json.dumps(flags).encode())
    return digest.hexdigest()[:16]


def check_wrapper(pin: BinaryPin) -> None:
    """The wrapper module builds exactly what the pin says, at the pinned version."""
    go_mod_path = wrapper(pin) / "go.mod"
    if not go_mod_path.is_file():
        raise BuildError(f"{pin.name}: {go_mod_path} is missing")
    go_mod = go_mod_path.read_text(encoding="utf-8")
    found = required_version(go_mod, pin.module)
    if found != pin.version:
        raise BuildError(f"{pin.name}: {go_mod_path} requires {pin.module} {found}, the pin is {pin.version}")
    if sorted(tools(go_mod)) != sorted(pin.packages):
        raise BuildError(f"{pin.name}: {go_mod_path} lists tools {tools(go_mod)}, the pin builds {list(pin.packages)}")
    if len(pin.packages) != len(pin.binaries):
        raise BuildError(f"{pin.name}: {len(pin.packages)} packages but {len(pin.binaries)} binary names")


@dataclass(frozen=True)
class Cost:
    """What one ``go build`` cost, as ``/usr/bin/time -v`` reports it."""

    cpu_s: float
    wall_s: float
    max_rss_mib: float


def parse_time_v(text: str) -> Cost:
    """User + system CPU seconds, elapsed wall seconds and peak RSS from ``/usr/bin/time -v`` output."""

    def field(label: str) -> str:
        match = re.search(rf"^\s*{re.escape(label)}:\s*(\S+)\s*$", text, re.MULTILINE)
        if match is None:
            raise BuildError(f"/usr/bin/time -v output has no {label!r} line")
        return match.group(1)

    wall = 0.0
    for part in field("Elapsed (wall clock) time (h:mm:ss or m:ss)").split(":"):
        wall = wall * 60 + float(part)
    return Cost(
        cpu_s=round(float(field("User time (seconds)")) + float(field("System time (seconds)")), 1),
        wall_s=round(wall, 1),
        max_rss_mib=round(int(field("Maximum resident set size (kbytes)")) / 1024, 1),
    )


def go_binary() -> str:
    go = os.environ.get("GPUSCALE_GO") or shutil.which("go")
    if not go:
        raise BuildError("no Go toolchain: install Go 1.26+ (go on PATH, or GPUSCALE_GO)")
    return go


UNREACHABLE = ("dial tcp", "no such host", "i/o timeout", "connection refused", "network is unreachable",
               "TLS handshake timeout", "403 Forbidden", "410 Gone")
"""What ``go`` prints when it cannot download a module (a proxy or network failure, or a refused module)."""


def proxy_hint(stderr: str) -> str:
    """A headline for a build that failed because modules could not be downloaded, naming the proxy it used."""
    if not any(marker in stderr for marker in UNREACHABLE):
        return ""
    proxy = os.environ.get("GOPROXY") or "https://proxy.golang.org,direct (Go's default)"
    return f": the Go module proxy ({proxy}) is unreachable or refused a module"


def is_built(pin: BinaryPin) -> bool:
    stamp = bin_dir(pin) / "build.json"
    if not stamp.is_file():
        return False
    try:
        recorded = json.loads(stamp.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return recorded.get("source_key") == source_key(pin) and all(
        os.access(bin_dir(pin) / b, os.X_OK) for b in pin.binaries
    )


def build(pin: BinaryPin, *, log: Path | None = None) -> dict[str, object]:
    """Build ``pin``'s binaries unless the cache holds them for the same wrapper module; return its ``build.json``."""
    check_wrapper(pin)
    dest = bin_dir(pin)
    if is_built(pin):
        ensure_data(pin)
        return dict(json.loads((dest / "build.json").read_text(encoding="utf-8")), cached=True)
    go = go_binary()
    timer = TIME if TIME.exists() else None
    staging = dest.parent / f".{dest.name}.{os.getpid()}.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly -buildvcs=false"}
    costs: dict[str, dict[str, float]] = {}
    scratch = dest.parent / f".{dest.name}.{os.getpid()}.src"
    try:
        modfile = with_generated_files(pin, scratch)
        for package, binary in zip(pin.packages, pin.binaries, strict=True):
            cmd = [go, "build", "-trimpath", "-o", str(staging / binary), *modfile]
            if pin.ldflags:
                cmd += ["-ldflags", " ".join(pin.ldflags)]
            cmd.append(package)
            wrapped = ["nice", "-n", "15", *cmd]
            if timer is not None:
                wrapped = [str(timer), "-v", *wrapped]
            started = time.monotonic()
            proc = subprocess.run(wrapped, cwd=wrapper(pin), env=env, capture_output=True, text=True, check=False)
            if log is not None:
                with log.open("a", encoding="utf-8") as fh:
                    fh.write(f"== {pin.name} {binary}: {' '.join(cmd)}\n{proc.stdout}{proc.stderr}\n")
            if proc.returncode != 0:
                tail = "\n".join(proc.stderr.strip().splitlines()[-25:])
                raise BuildError(f"{pin.name}: go build {package} failed (exit {proc.returncode})"
                                 f"{proxy_hint(proc.stderr)}:\n{tail}")
            if timer is not None:
                cost = parse_time_v(proc.stderr)
            else:
                cost = Cost(cpu_s=float("nan"), wall_s=round(time.monotonic() - started, 1), max_rss_mib=float("nan"))
            costs[binary] = {"cpu_s": cost.cpu_s, "wall_s": cost.wall_s, "max_rss_mib": cost.max_rss_mib}
        version = subprocess.run([go, "version"], capture_output=True, text=True, check=True).stdout.strip()
        record: dict[str, object] = {
            "name": pin.name, "module": pin.module, "version": pin.version, "source_key": source_key(pin),
            "go": version, "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "costs": costs,
        }
        (staging / "build.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        shutil.rmtree(dest, ignore_errors=True)
        staging.rename(dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
    ensure_data(pin)
    return dict(record, cached=False)


def with_generated_files(pin: BinaryPin, scratch: Path) -> list[str]:
    """For a pin with ``generated_json``: copy the upstream module to ``scratch/src``, write the generated files there
    (what upstream's ``go generate`` would) and return the ``-modfile`` arguments of a copy of the wrapper's go.mod that
    replaces the module with that copy; ``[]`` for any other pin. The Go module cache is read-only and ``-overlay``
    refuses files beneath it, so a copy is the one way to add files to a dependency's package."""
    if not pin.generated_json:
        return []
    root = module_dir(pin)
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    src = scratch / "src"
    shutil.copytree(root, src)
    for path in [src, *src.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    for target, source, version in pin.generated_json:
        doc = json.loads((root / source).read_text(encoding="utf-8"))
        if version is not None:
            doc["version"] = version
        (src / target).write_text(json.dumps(doc, separators=(",", ":")), encoding="utf-8")
    go_mod = (wrapper(pin) / "go.mod").read_text(encoding="utf-8")
    (scratch / "go.mod").write_text(f"{go_mod}\nreplace {pin.module} => {src}\n", encoding="utf-8")
    shutil.copyfile(wrapper(pin) / "go.sum", scratch / "go.sum")  # -modfile X.mod reads X.sum beside it
    return ["-modfile", str(scratch / "go.mod")]


def module_dir(pin: BinaryPin) -> Path:
    """The pinned upstream module's root in Go's module cache (downloading it if needed)."""
    proc = subprocess.run([go_binary(), "mod", "download", "-json", f"{pin.module}@{pin.version}"],
                          cwd=wrapper(pin), capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise BuildError(f"{pin.name}: go mod download {pin.module}@{pin.version} failed:\n{proc.stderr.strip()}")
    return Path(json.loads(proc.stdout)["Dir"])


def ensure_data(pin: BinaryPin) -> None:
    """Copy the pin's ``data`` files from the upstream module into ``<bin dir>/data/`` (once)."""
    if not pin.data:
        return
    target = bin_dir(pin) / "data"
    stamp = target / ".complete"
    if stamp.is_file() and stamp.read_text(encoding="utf-8") == json.dumps(pin.data):
        return
    root = module_dir(pin)
    for pattern in pin.data:
        matches = sorted(root.glob(pattern))
        if not matches:
            raise BuildError(f"{pin.name}: {pin.module}@{pin.version} has no {pattern}")
        for path in matches:
            dest = target / path.relative_to(root)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest)
    stamp.write_text(json.dumps(pin.data), encoding="utf-8")


def data_files(pin: BinaryPin, pattern: str) -> list[Path]:
    """The copied data files of ``pin`` matching ``pattern`` (relative to the module root)."""
    files = sorted((bin_dir(pin) / "data").glob(pattern))
    if not files:
        raise BuildError(f"{pin.name}: no {pattern} under {bin_dir(pin) / 'data'}: run python -m e2e.build {pin.name}")
    return files


def binary(pin: BinaryPin, name: str) -> Path:
    """The path of one built binary (the pin must have been built)."""
    if name not in pin.binaries:
        raise KeyError(f"{pin.name} builds {pin.binaries}, not {name}")
    return bin_dir(pin) / name


def main(argv: Sequence[str] | None = None) -> int:
    names = list(argv if argv is not None else sys.argv[1:]) or list(E2E_BINARIES)
    unknown = [n for n in names if n not in E2E_BINARIES]
    if unknown:
        print(f"error: unknown binaries {unknown}; valid: {', '.join(E2E_BINARIES)}", file=sys.stderr)
        return 2
    log = cache_root() / "build.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    failed = 0
    started = time.monotonic()
    cold_cpu = 0.0
    for name in names:
        pin = E2E_BINARIES[name]
        if not is_built(pin):
            print(f"building {name} {pin.version} into {bin_dir(pin)} (Go module proxy; minutes on a cold cache)...",
                  file=sys.stderr, flush=True)
        try:
            record = build(pin, log=log)
        except BuildError as exc:
            print(f"error: {exc}", file=sys.stderr)
            failed += 1
            continue
        costs = record["costs"]
        assert isinstance(costs, dict)
        total_cpu = sum(c["cpu_s"] for c in costs.values())
        total_wall = sum(c["wall_s"] for c in costs.values())
        cold_cpu += total_cpu
        state = "cached" if record["cached"] else "built"
        print(f"{name} {pin.version}: {state} ({total_cpu:.0f} CPU-s, {total_wall:.0f} s wall when built) "
              f"in {bin_dir(pin)}", flush=True)
    print(f"e2e binaries: {time.monotonic() - started:.0f} s this run; a cold build of these cost "
          f"{cold_cpu:.0f} CPU-s (each build.json){f'; {failed} failed' if failed else ''}", flush=True)
    if failed:
        # loud on purpose: CI runs the real-controllers tier, and a tier that cannot build must fail, not skip
        print(f"ERROR: {failed} of {len(names)} e2e binaries could not be built (the errors above). The "
              "real-controllers tier cannot run without them, so make e2e fails here instead of skipping its "
              "scenarios (README \"Running the real controllers\": it needs Go 1.26+ and the Go module proxy).",
              file=sys.stderr, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
