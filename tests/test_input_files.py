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


# --- every reader of gpuscale's own earlier output (--synth, --sim-dir, --goal-table, diff) is bounded too ----------

def _sparse(path: Path, size: int) -> Path:
    """A file that says it is ``size`` bytes without taking the disk (the readers refuse it from ``fstat``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        fh.truncate(size)
    return path


def _device(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to("/dev/zero")
    return path


def _readers() -> list[tuple[str, object]]:
    from gpuscale.input_files import GOAL_TABLE_MAX_BYTES, SIM_RESULT_MAX_BYTES, SYNTH_FILE_MAX_BYTES
    from gpuscale.plan.evidence import load_result, manifests_from_synth_dir
    from gpuscale.plan.goal_table import load_goal_table
    from gpuscale.schedule.stack import charts_from_synth_dir
    from gpuscale.synth.diff import load_synth

    return [
        ("sim result", (lambda d: d / "r.json", load_result, SIM_RESULT_MAX_BYTES)),
        ("goal table", (lambda d: d / "g.json", load_goal_table, GOAL_TABLE_MAX_BYTES)),
        ("synth manifest", (lambda d: d / "manifests" / "a.yaml", lambda f: manifests_from_synth_dir(f.parent.parent),
                            SYNTH_FILE_MAX_BYTES)),
        ("synth resources", (lambda d: d / "resources.json", lambda f: load_synth(f.parent), SYNTH_FILE_MAX_BYTES)),
        ("synth charts", (lambda d: d / "charts.yaml", lambda f: charts_from_synth_dir(f.parent), SYNTH_FILE_MAX_BYTES)),
    ]


@pytest.mark.parametrize("reader", [r for _, r in _readers()], ids=[n for n, _ in _readers()])
@pytest.mark.parametrize("make", ["oversized", "device"])
def test_read_back_files_are_refused_when_endless_or_too_large(tmp_path: Path, reader: object, make: str) -> None:
    from gpuscale.problems import Refusal

    where, read, limit = reader  # type: ignore[misc]
    file = where(tmp_path)
    if make == "oversized":
        _sparse(file, limit + 1)
    else:
        _device(file)
    with pytest.raises(Refusal) as refused:
        read(file)
    said = str(refused.value)
    # load_synth looks for a regular resources.json before reading, so a device there is "no resources.json"
    expected = ("larger than",) if make == "oversized" else ("character device", "no resources.json")
    assert any(e in said for e in expected), said
