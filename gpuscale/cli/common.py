"""What every command shares: ``--stack``/``--stack-file``, exit codes, plain output, output paths, progress.

Every message is printed as plain text (``markup=False, emoji=False``): a file named ``old[/x].yaml`` or a value
``:bomb:`` reaches the terminal exactly as written. Styling goes through ``rich.text.Text``, never markup.
"""

from __future__ import annotations

import math
import os
import secrets
import signal
import stat
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.text import Text

from gpuscale import feasibility
from gpuscale.problems import Problem, Problems, Refusal
from gpuscale.sizing import PlatformSizing
from gpuscale.spec.platform import PlatformSpec
from gpuscale.stackfile import load_stack


def _console(stderr: bool) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    # wide lines when piped (CI logs, PR comments); the terminal's width otherwise
    return Console(stderr=stderr, width=None if stream.isatty() else 200, markup=False, emoji=False, highlight=False)


console = _console(stderr=False)
err_console = _console(stderr=True)

EXIT_OK = 0
EXIT_INVALID = 2
"""Invalid input: a stack file, an option, an input or output path. Nothing was written."""

EXIT_INTERRUPTED = 130
"""Ctrl-C, ``SIGTERM`` or ``SIGHUP`` while a file was written (the shell's code for an interrupt); nothing was written."""

EXIT_CODES_HELP = "Exit codes: 0 success; 2 invalid input (stack file, option or path), nothing written."
"""The line every command's help ends with (``diff`` and ``synth`` add their own code 1)."""

StackOpt = Annotated[
    str | None,
    typer.Option("--stack", help="Stack name: reads stacks/Pulumi.NAME.yaml. Use --stack or --stack-file, not both.",
                 show_default=False),
]
StackFileOpt = Annotated[
    Path | None,
    typer.Option("--stack-file", help="Any Pulumi stack file with gpuscale:* config (instead of --stack).",
                 dir_okay=False, show_default=False),
]


def say(text: str, *, style: str = "", stderr: bool = False) -> None:
    """Print user-facing text exactly as written (no markup, no emoji codes), wrapped at the console width."""
    (err_console if stderr else console).print(Text(text, style=style), soft_wrap=True)


def warn(text: str) -> None:
    """A ``warning:`` line on stderr."""
    err_console.print(Text.assemble(("warning", "bold yellow"), ": ", text), soft_wrap=True)


def fail(problems: list[Problem] | list[str], source: str = "gpuscale") -> NoReturn:
    """Print one line per problem and exit 2, never a traceback."""
    err_console.print(Text.assemble(("error", "bold red"), f": {source}: invalid input"), soft_wrap=True)
    for p in problems:
        err_console.print(Text(f"  {p.line() if isinstance(p, Problem) else p}"), soft_wrap=True)
    raise typer.Exit(EXIT_INVALID)


def fail_problems(exc: Problems, source: str = "gpuscale") -> NoReturn:
    fail(exc.problems, exc.source or source)


def fail_refusal(exc: Refusal) -> NoReturn:
    """Any refusal of bad input (the one family every command's errors belong to): its problems, exit 2."""
    if isinstance(exc, Problems):
        fail_problems(exc)
    fail(exc.lines(), exc.source)


def checked_sizing(spec: PlatformSpec, source: str = "gpuscale") -> PlatformSizing:
    """Sizing of a feasible spec whose layers agree; exit 2 with the paths and numbers otherwise."""
    try:
        return feasibility.checked_sizing(spec)
    except Problems as exc:
        fail_problems(exc, source)


def spec_from_options(stack: str | None, stack_file: Path | None) -> PlatformSpec:
    if stack is not None and stack_file is not None:
        fail(["pass either --stack or --stack-file, not both"])
    try:
        return load_stack(stack, stack_file)
    except Problems as exc:
        fail_problems(exc)


def source_of(stack: str | None, stack_file: Path | None) -> str:
    """What refusals name as their source: the stack file, however it was chosen."""
    return str(stack_file) if stack_file is not None else f"stacks/Pulumi.{stack}.yaml"


# --- options ------------------------------------------------------------------------------------------------------


def positive_finite(value: float | None) -> float | None:
    """Typer callback: a number > 0 that is neither infinite nor NaN (click's ranges let NaN through)."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise typer.BadParameter(f"must be a finite number > 0, got {value:g}")
    return value


# --- output paths: checked before any work, written whole or not at all ----------------------------------------------


def _nearest_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path(".")


def output_path_problem(path: Path, option: str, *, directory: bool = False) -> str | None:
    """Why ``path`` cannot be written as a file (or created as a directory), or None. Nothing is created."""
    what = "directory" if directory else "file"
    if path.exists():
        if directory and not path.is_dir():
            return f"{option} {path}: exists and is not a directory"
        if not directory and path.is_dir():
            return f"{option} {path}: is a directory; name the {what} to write"
        if not os.access(path, os.W_OK):
            return f"{option} {path}: not writable"
        parent = path if directory else Path(os.path.realpath(path)).parent  # a symlink's target is what is written
        if not directory and not os.access(parent, os.W_OK | os.X_OK):
            return f"{option} {path}: its directory {parent} is not writable"
        return None
    base = _nearest_existing(path.parent)
    if not base.is_dir():
        return f"{option} {path}: {base} is a file, so no {what} can be created under it"
    if not os.access(base, os.W_OK | os.X_OK):
        return f"{option} {path}: cannot create it in {base} (not writable)"
    return None


def check_outputs(*checks_: tuple[Path | None, str, bool]) -> None:
    """Refuse (exit 2) every unusable output path at once, before the work starts. Each item: (path, option, is_dir)."""
    problems = [p for path, option, directory in checks_
                if path is not None and (p := output_path_problem(path, option, directory=directory))]
    if problems:
        fail(problems)


def write_text(path: Path, text: str, option: str) -> None:
    """Write ``text`` to ``path`` whole or not at all; an OS error exits 2 naming the path (see ``write_bytes``)."""
    write_bytes(path, text.encode("utf-8"), option)


def write_bytes(path: Path, data: bytes, option: str) -> None:
    """Write ``data`` to ``path`` whole or not at all: a hidden temporary file beside the target, fsynced, renamed over
    it, and the directory fsynced (so a crash leaves the old file or the new one). Through a symlink the link's target
    is written and the link kept; an existing file keeps its mode and (where the process may set it) its owner, a new
    one gets the umask's (0666 & ~umask). A file with other hard links is rewritten in place instead (see
    ``_overwrite_linked``), since a rename would leave the other names on the old bytes. The temporary file is removed
    on every exit path (an error, Ctrl-C, ``SIGTERM``); an OS error exits 2 naming the path."""
    target = Path(os.path.realpath(path))
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        before = target.stat() if target.exists() else None
        with _signals_raise():
            # signals wait while the temporary file is created, so none can leave it behind unnamed
            previous = signal.pthread_sigmask(signal.SIG_BLOCK, _INTERRUPTS)
            tmp = _create_hidden(target)
            try:
                signal.pthread_sigmask(signal.SIG_SETMASK, previous)
                with tmp.open("wb") as fh:
                    if before is not None:
                        _keep_mode_and_owner(fh.fileno(), before)
                    fh.write(data)
                    fh.flush()
                    os.fsync(fh.fileno())
                if before is not None and before.st_nlink > 1:
                    _overwrite_linked(target, data)
                    tmp.unlink()
                else:
                    os.replace(tmp, target)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
        _fsync_dir(target.parent)
    except OSError as exc:
        fail([f"{option} {path}: cannot write it ({exc.strerror or exc})"])
    except KeyboardInterrupt:
        say(f"interrupted: {path} was not written (nothing changed)", stderr=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None


def _keep_mode_and_owner(fd: int, before: os.stat_result) -> None:
    """The new file takes the old one's mode, and its owner and group when they differ from the writer's and the
    process may give them (root, or a group the user belongs to); otherwise the rename would hand the file to whoever
    ran the command. ``fchown`` to a foreign owner fails with EPERM for a normal user: then the file stays the
    writer's, which is what any editor's save does."""
    os.fchmod(fd, stat.S_IMODE(before.st_mode))
    if (before.st_uid, before.st_gid) == (os.geteuid(), os.getegid()):
        return
    try:
        os.fchown(fd, before.st_uid, before.st_gid)
    except PermissionError:
        try:
            os.fchown(fd, -1, before.st_gid)
        except PermissionError:
            return  # neither may be given away by this user: the documented editor behaviour above
    os.fchmod(fd, stat.S_IMODE(before.st_mode))  # chown clears setuid/setgid bits; put the mode back


def _overwrite_linked(target: Path, data: bytes) -> None:
    """Rewrite a hard-linked file in place, so every name of the inode sees the new bytes. Not atomic as a rename is,
    so the old bytes are kept in memory and written back if the rewrite fails or is interrupted part way (the new
    bytes are already safe in the fsynced temporary file, which the caller removes only afterwards)."""
    old = target.read_bytes()
    fd = os.open(target, os.O_WRONLY | os.O_CLOEXEC)
    try:
        try:
            _write_all(fd, data)
            os.ftruncate(fd, len(data))
            os.fsync(fd)
        except BaseException:
            os.lseek(fd, 0, os.SEEK_SET)
            _write_all(fd, old)
            os.ftruncate(fd, len(old))
            os.fsync(fd)
            raise
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    os.lseek(fd, 0, os.SEEK_SET)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


_INTERRUPTS = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP})


def _create_hidden(target: Path) -> Path:
    """A new, empty ``.<name>.<random>`` beside ``target``, created with 0666 so the umask applies (``mkstemp`` would
    make it 0600, and the rename would give the user's file that mode)."""
    for _ in range(100):
        tmp = target.parent / f".{target.name}.{secrets.token_hex(4)}"
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666))
        except FileExistsError:
            continue
        return tmp
    raise FileExistsError(f"no free temporary name beside {target}")


@contextmanager
def _signals_raise() -> Iterator[None]:
    """While writing, ``SIGTERM`` and ``SIGHUP`` (which would end the process without unwinding) raise
    ``KeyboardInterrupt`` as Ctrl-C does, so the temporary file is removed; the previous handlers come back afterwards.
    (Only the main thread may set handlers; elsewhere the signals keep their handlers.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = {sig: signal.signal(sig, _raise) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# --- progress -----------------------------------------------------------------------------------------------------


@contextmanager
def step(doing: str, done: str) -> Iterator[None]:
    """A step that may take seconds: a spinner on a terminal, a line per start and end otherwise (CI logs)."""
    start = time.monotonic()
    if err_console.is_terminal:
        with err_console.status(Text(f"{doing}...")):
            yield
    else:
        err_console.print(Text(f"{doing}..."), soft_wrap=True)
        yield
    err_console.print(Text.assemble(("done", "green"), f": {done} ({time.monotonic() - start:.1f} s)"), soft_wrap=True)


PROGRESS_LINE_S = 5.0
"""Off a terminal, a long loop prints a progress line at most this often (and always its first and last step)."""


class ProgressLines:
    """Progress of a counted loop on stderr: a bar on a terminal; a line every ``PROGRESS_LINE_S`` seconds otherwise,
    so a CI log shows a long run is alive. ``phase`` names a step before the loop (one line each off a terminal)."""

    def __init__(self, description: str, total: int) -> None:
        self.description, self.total = description, total
        self._start = time.monotonic()
        self._last = -math.inf
        self._doing = "starting"
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    def __enter__(self) -> ProgressLines:
        if err_console.is_terminal:
            self._bar = Progress(
                TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                console=err_console, transient=True,
            )
            self._bar.__enter__()
            self._task = self._bar.add_task(self.description, total=self.total)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)

    def _line(self, text: str) -> None:
        err_console.print(Text(f"{self.description}: {text} ({time.monotonic() - self._start:.0f} s)"), soft_wrap=True)

    def phase(self, text: str) -> None:
        self._doing = text
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, description=f"{self.description}: {text}")
        else:
            self._line(text)
            self._last = time.monotonic()

    def update(self, done: int, total: int) -> None:
        self._doing = f"simulation {min(done + 1, total)} of {total}"
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, completed=done, total=total)
            return
        now = time.monotonic()
        if done in (1, total) or now - self._last >= PROGRESS_LINE_S:
            self._line(f"{done}/{total} simulations")
            self._last = now

    def within(self, fraction: float) -> None:
        """The simulation running is ``fraction`` done: off a terminal, a line when ``PROGRESS_LINE_S`` have passed
        since the last one (one simulation of a long trace takes minutes)."""
        now = time.monotonic()
        if self._bar is None and now - self._last >= PROGRESS_LINE_S:
            self._line(f"{self._doing}: {fraction:.0%} through")
            self._last = now
