"""Input files are regular files read within a bound, whatever ``stat`` says."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuscale.input_files import InputFileError, read_bounded


def test_a_regular_file_within_the_limit_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 100)
    assert read_bounded(path, 100, "a test file") == b"x" * 100


def test_the_byte_past_the_limit_is_refused_even_when_st_size_says_zero() -> None:
    # /proc files report st_size 0 and yield bytes when read: the reader, not stat, enforces the bound
    with pytest.raises(InputFileError, match="larger than 16 bytes, the most gpuscale reads as a test file"):
        read_bounded(Path("/proc/self/status"), 16, "a test file")


@pytest.mark.parametrize(("make", "kind"), [
    (lambda p: os.mkfifo(p), "a FIFO"),
    (lambda p: p.mkdir(), "a directory"),
])
def test_what_is_not_a_regular_file_is_refused_before_a_byte_is_read(tmp_path: Path, make: object, kind: str) -> None:
    path = tmp_path / "x"
    make(path)  # type: ignore[operator]
    with pytest.raises(InputFileError, match=kind):
        read_bounded(path, 1 << 20, "a test file")


def test_a_character_device_is_refused() -> None:
    with pytest.raises(InputFileError, match="/dev/zero is a character device, not a test file"):
        read_bounded(Path("/dev/zero"), 1 << 20, "a test file")
