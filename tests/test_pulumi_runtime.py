"""The Pulumi SDK internals the synth relies on live in one adapter, checked against the range pyproject pins."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from gpuscale import pulumi_runtime

ROOT = Path(__file__).resolve().parents[1]


def test_adapter_range_is_the_pinned_dependency_range() -> None:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (pin,) = [d for d in deps if re.match(r"pulumi\s*[<>=]", d)]
    found = re.fullmatch(r"pulumi>=(\d+)\.(\d+),<(\d+)", pin.replace(" ", ""))
    assert found is not None, pin
    major, minor, upper = map(int, found.groups())
    assert ((major, minor), (upper, 0)) == pulumi_runtime.SUPPORTED_RANGE


def test_installed_sdk_has_every_internal_the_synth_uses() -> None:
    pulumi_runtime.check_sdk()  # raises SdkMismatchError naming what is missing


def test_an_sdk_outside_the_range_is_refused_with_the_range(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pulumi_runtime, "sdk_version", lambda: (4, 1))
    with pytest.raises(pulumi_runtime.SdkMismatchError, match=r"pulumi 4\.1 is outside the range .*>=3\.200,<4\.0"):
        pulumi_runtime.check_sdk()


def test_only_the_adapter_imports_sdk_internals() -> None:
    private = re.compile(r"pulumi\.runtime\.(rpc|settings|stack|sync_await|mocks)\b|from pulumi\.runtime(\.\w+)? import")
    offenders = [
        str(p.relative_to(ROOT)) for folder in ("gpuscale", "components") for p in (ROOT / folder).rglob("*.py")
        if p.name != "pulumi_runtime.py" and private.search(p.read_text())
    ]
    assert offenders == []
