"""Opening the files a user names (stack files, traces): regular files only, read within a size bound.

A character device (``/dev/zero``), a FIFO or a socket never ends or blocks, so it is refused before a byte is read; a
regular file is read through ``BoundedReader``, which refuses the byte past the limit, so a file that grows while it is
read (or lies in ``st_size``) still cannot take more memory or time than the limit allows.
"""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path

MIB = 1024 * 1024

# The files gpuscale reads back from its own earlier runs, bounded like the files users write: a directory passed as
# --synth or --sim-dir may hold anything. Each bound is far above what the command writes for the largest shipped
# stack (resources.json of prod ~1 MiB, a simulate --json result ~2 MiB, the goal table ~150 KiB).
SYNTH_FILE_MAX_BYTES = 64 * MIB
"""Largest file of a ``gpuscale synth --out`` directory read (``resources.json``, ``manifests/*.yaml``, ``charts.yaml``)."""
SIM_RESULT_MAX_BYTES = 64 * MIB
"""Largest ``gpuscale simulate --json`` result read (``plan --sim-dir``)."""
GOAL_TABLE_MAX_BYTES = 16 * MIB
"""Largest goal-table JSON read (``plan --goal-table``)."""


class InputFileError(ValueError):
    """A file that cannot be read as input; the message names the file and what would be valid."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def limit_text(limit_bytes: int) -> str:
    return f"{limit_bytes / MIB:g} MiB" if limit_bytes >= MIB else f"{limit_bytes:,} bytes"


class BoundedReader(io.RawIOBase):
    """A file descriptor read at most ``limit`` bytes; one more raises ``InputFileError``."""

    def __init__(self, fd: int, path: Path, limit: int, what: str) -> None:
        self._fd, self._path, self._left, self._limit, self._what = fd, path, limit, limit, what

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        want = len(buffer)
        data = os.read(self._fd, min(want, self._left + 1))
        if len(data) > self._left:
            raise InputFileError(too_large(self._path, self._limit, self._what))
        self._left -= len(data)
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            os.close(self._fd)
        super().close()


def too_large(path: Path, limit: int, what: str) -> str:
    return f"{path}: larger than {limit_text(limit)}, the most gpuscale reads as {what}"


def open_bounded(path: Path, limit: int, what: str) -> BoundedReader:
    """``path`` opened for reading if it is a regular file of at most ``limit`` bytes; ``InputFileError`` otherwise.

    Opened non-blocking (a FIFO would block ``open`` until a writer comes) and checked with ``fstat`` on the open file
    (no window between the check and the read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise InputFileError(f"file not found: {path}") from None
    except IsADirectoryError:
        raise InputFileError(f"{path} is a directory, not {what}") from None
    except OSError as exc:
        raise InputFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputFileError(f"{path} is {_kind(st.st_mode)}, not {what}: name a regular file")
        if st.st_size > limit:
            raise InputFileError(too_large(path, limit, what))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return BoundedReader(fd, path, limit, what)


def read_text_bounded(path: Path, limit: int, what: str) -> str:
    """``read_bounded`` decoded as UTF-8 (a ``UnicodeDecodeError``, a ``ValueError``, for other bytes)."""
    return read_bounded(path, limit, what).decode("utf-8")


def read_bounded(path: Path, limit: int, what: str) -> bytes:
    """The bytes of ``path``, a regular file of at most ``limit`` bytes (``InputFileError`` otherwise)."""
    with open_bounded(path, limit, what) as raw:
        try:
            return io.BufferedReader(raw).read()
        except OSError as exc:
            raise InputFileError(f"cannot read {path}: {exc.strerror or exc}") from None
