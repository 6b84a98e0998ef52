"""The CRDs the tests hold (``tests/crds``) are the upstream files they name, byte for byte below their header."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

CRDS = Path(__file__).parent / "crds"
FILES = sorted(CRDS.rglob("*.yaml"))


def git_blob(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(CRDS)) for p in FILES])
def test_body_is_the_upstream_blob_the_header_names(path: Path) -> None:
    text = path.read_bytes()
    lines = text.splitlines(keepends=True)
    header = [ln for ln in lines if ln.startswith(b"#")]
    body = b"".join(lines[len(header):])
    named = re.search(rb"git blob ([0-9a-f]{12})", b"".join(header))
    assert named, f"{path}: the header names no git blob"
    assert git_blob(body).startswith(named.group(1).decode()), f"{path}: not the upstream file it names"
    readme = (CRDS / "README.md").read_text(encoding="utf-8")
    assert str(path.relative_to(CRDS)) in readme and named.group(1).decode() in readme


def test_every_held_crd_is_listed() -> None:
    assert FILES, "tests/crds holds no CRD"
