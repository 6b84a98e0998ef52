"""Start the controllers as child processes, each in its own process group, and stop every one of them.

Stopping is idempotent and runs from the pytest fixture's teardown, from ``atexit`` and from SIGTERM/SIGINT/SIGHUP,
so a failed or interrupted run leaves nothing behind: each group gets SIGTERM, then SIGKILL after a grace period.
Only the groups this module started are signalled (by their recorded ids)."""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType


class StartError(RuntimeError):
    """A process exited or never became ready; the message carries the tail of its log."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class Child:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None


@dataclass
class Supervisor:
    """The processes of one run. ``stop()`` ends them in reverse start order."""

    logs: Path
    children: list[Child] = field(default_factory=list)
    _previous: dict[int, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.logs.mkdir(parents=True, exist_ok=True)
        atexit.register(self.stop)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            self._previous[sig] = signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.stop()
        previous = self._previous.get(signum)
        if callable(previous):
            previous(signum, frame)
        raise SystemExit(128 + signum)

    def start(self, name: str, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
              cwd: Path | None = None) -> Child:
        log = self.logs / f"{name}.log"
        fh = log.open("ab")
        try:
            popen = subprocess.Popen(
                list(argv), stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, **(env or {})}, cwd=cwd, start_new_session=True,
            )
        finally:
            fh.close()
        child = Child(name, popen, log)
        self.children.append(child)
        return child

    def wait_ready(self, child: Child, probe: Callable[[], bool], *, timeout_s: float = 120.0) -> None:
        """Poll ``probe`` until it is true; refuse if the process exits or ``timeout_s`` passes."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not child.alive:
                raise StartError(f"{child.name} exited with {child.popen.returncode}:\n{tail(child.log)}")
            with contextlib.suppress(Exception):
                if probe():
                    return
            time.sleep(0.25)
        raise StartError(f"{child.name} not ready after {timeout_s:.0f} s:\n{tail(child.log)}")

    def check_alive(self) -> list[str]:
        """Names of started processes that have exited (a controller that crashed mid-scenario)."""
        return [c.name for c in self.children if not c.alive]

    def stop(self, grace_s: float = 10.0) -> None:
        for child in reversed(self.children):
            if child.alive:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(child.popen.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for child in reversed(self.children):
            remaining = max(0.0, deadline - time.monotonic())
            try:
                child.popen.wait(timeout=remaining)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(child.popen.pid, signal.SIGKILL)
                child.popen.wait(timeout=5)
            # a grandchild left in the group after its leader exited
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.popen.pid, signal.SIGKILL)
        self.children.clear()


def http_ok(url: str, *, context: ssl.SSLContext | None = None, headers: Mapping[str, str] | None = None) -> bool:
    """True when ``url`` answers 200 (a readiness probe)."""
    request = urllib.request.Request(url, headers=dict(headers or {}))
    try:
        with urllib.request.urlopen(request, timeout=2, context=context) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0
