"""Files the commands write (``common.write_bytes``): whole or not at all, fsynced, through symlinks, keeping modes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import typer

from gpuscale.cli import common


def _hidden(directory: Path) -> list[Path]:
    return [p for p in directory.iterdir() if p.name.startswith(".")]


def test_an_existing_file_keeps_its_mode_and_a_new_one_gets_the_umask(tmp_path: Path) -> None:
    old = tmp_path / "old.yaml"
    old.write_text("a: 1\n")
    old.chmod(0o640)
    common.write_bytes(old, b"a: 2\n", "--out")
    assert old.read_bytes() == b"a: 2\n" and stat.S_IMODE(old.stat().st_mode) == 0o640
    umask = os.umask(0o027)
    try:
        common.write_bytes(tmp_path / "new.json", b"{}", "--json")
    finally:
        os.umask(umask)
    assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == 0o640  # 0666 & ~027


def test_a_symlink_is_written_through_and_stays_a_link(tmp_path: Path) -> None:
    real = tmp_path / "real" / "Pulumi.dev.yaml"
    real.parent.mkdir()
    real.write_text("old\n")
    link = tmp_path / "link.yaml"
    link.symlink_to(real)
    common.write_bytes(link, b"new\n", "--stack-file")
    assert link.is_symlink() and real.read_bytes() == b"new\n"
    assert _hidden(real.parent) == [] and _hidden(tmp_path) == []


def test_the_file_and_its_directory_are_fsynced_before_and_after_the_rename(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"),
                                                 real_fsync(fd))[1])
    monkeypatch.setattr(os, "replace", lambda a, b: (calls.append("rename"), real_replace(a, b))[1])
    common.write_bytes(tmp_path / "f.txt", b"x", "--out")
    assert calls == ["file", "rename", "dir"]


@pytest.mark.parametrize("failure", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_a_failed_or_interrupted_write_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: BaseException,
) -> None:
    target = tmp_path / "stack.yaml"
    target.write_bytes(b"before\n")

    def broken(fd: int) -> None:
        raise failure

    monkeypatch.setattr(os, "fsync", broken)
    with pytest.raises(typer.Exit) as exit_:
        common.write_bytes(target, b"after\n", "--stack-file")
    assert exit_.value.exit_code == (common.EXIT_INTERRUPTED if isinstance(failure, KeyboardInterrupt) else common.EXIT_INVALID)
    assert target.read_bytes() == b"before\n"
    assert _hidden(tmp_path) == []


def test_a_hard_linked_file_is_rewritten_in_place_so_every_name_sees_the_new_bytes(tmp_path: Path) -> None:
    first = tmp_path / "Pulumi.prod.yaml"
    first.write_bytes(b"old\n")
    other = tmp_path / "shared" / "prod.yaml"
    other.parent.mkdir()
    os.link(first, other)
    inode = first.stat().st_ino
    common.write_bytes(first, b"new\n", "--stack-file")
    assert first.stat().st_ino == inode and first.stat().st_nlink == 2
    assert other.read_bytes() == b"new\n"
    assert _hidden(tmp_path) == []


def test_a_failed_in_place_rewrite_puts_the_old_bytes_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = tmp_path / "a.yaml"
    first.write_bytes(b"the old content\n")
    os.link(first, tmp_path / "b.yaml")
    real_ftruncate = os.ftruncate
    calls = {"n": 0}

    def failing_once(fd: int, length: int) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError(28, "No space left on device")
        real_ftruncate(fd, length)

    monkeypatch.setattr(os, "ftruncate", failing_once)
    with pytest.raises(typer.Exit) as exited:
        common.write_bytes(first, b"new\n", "--stack-file")
    assert exited.value.exit_code == 2
    assert (tmp_path / "b.yaml").read_bytes() == b"the old content\n" and _hidden(tmp_path) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another owner needs root")
def test_an_existing_file_keeps_its_owner_and_group(tmp_path: Path) -> None:
    target = tmp_path / "stack.yaml"
    target.write_bytes(b"a: 1\n")
    os.chown(target, 4321, 4322)
    target.chmod(0o2640)  # setgid, which chown clears, must come back
    common.write_bytes(target, b"a: 2\n", "--stack-file")
    st = target.stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (4321, 4322, 0o2640)
    assert target.read_bytes() == b"a: 2\n"
