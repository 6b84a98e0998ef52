"""``gpuscale schedule``'s settings (``GPUSCALE_GO``, ``GPUSCALE_CACHE_DIR``): what is not usable is named, in time."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuscale.schedule import binary


def test_a_program_that_is_not_go_is_named_by_its_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUSCALE_GO", "/bin/echo")
    with pytest.raises(binary.GoUnavailableError, match=r"GPUSCALE_GO=/bin/echo is not a Go toolchain \(`go env"):
        binary.go_version(binary.go_executable())


def test_a_go_that_does_not_answer_times_out(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "go"
    fake.write_text("#!/bin/sh\nexec sleep 60\n")
    fake.chmod(0o755)
    monkeypatch.setenv("GPUSCALE_GO", str(fake))
    monkeypatch.setattr(binary, "GO_ENV_TIMEOUT_S", 0.5)
    with pytest.raises(binary.GoUnavailableError, match=r"did not answer within 0.5 s"):
        binary.go_version(binary.go_executable())


def test_a_missing_explicit_go_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GPUSCALE_GO", str(tmp_path / "nope"))
    with pytest.raises(binary.GoUnavailableError, match=r"Go module proxy \(GPUSCALE_GO=.*nope is not a file\)"):
        binary.go_executable()


@pytest.mark.parametrize("layout", ["file", "under-a-file"])
def test_a_cache_dir_that_is_not_a_directory_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, layout: str) -> None:
    (tmp_path / "f").write_text("x")
    monkeypatch.setenv("GPUSCALE_CACHE_DIR", str(tmp_path / "f" if layout == "file" else tmp_path / "f" / "cache"))
    with pytest.raises(binary.BuildError, match=r"GPUSCALE_CACHE_DIR=.*: .*/f is not a directory"):
        binary.check_cache_dir()
