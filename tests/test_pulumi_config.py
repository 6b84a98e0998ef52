"""``pulumi up`` reads the stack's config through the same validation as ``gpuscale validate``: same config, same answer."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pulumi
import pytest
from pulumi.runtime import config as runtime_config

from gpuscale.stackfile import StackConfigError, load_from_pulumi_config, validate_config
from tests.specs import small_raw


@pytest.fixture
def stack_config(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """The config bag the Pulumi language host hands a program (``project:key`` -> JSON or plain strings)."""
    values: dict[str, str] = {}
    monkeypatch.setattr(pulumi, "get_stack", lambda: "t")
    monkeypatch.setattr(pulumi, "get_project", lambda: "gpuscale")
    token = runtime_config.CONFIG.set(values)
    yield values
    runtime_config.CONFIG.reset(token)


def test_the_program_reads_what_the_cli_reads(stack_config: dict[str, str]) -> None:
    raw = small_raw()
    stack_config.update({f"gpuscale:{k}": json.dumps(v) for k, v in raw.items()})
    stack_config["aws:region"] = "us-east-1"  # other namespaces are not ours
    assert load_from_pulumi_config() == validate_config(raw, "t")


def test_an_unknown_key_is_refused_under_pulumi_up_as_by_validate(stack_config: dict[str, str]) -> None:
    raw = small_raw()
    stack_config.update({f"gpuscale:{k}": json.dumps(v) for k, v in raw.items()})
    stack_config["gpuscale:observabilty"] = json.dumps({"install_prometheus_stack": False})
    stack_config["gpuscale:note"] = "plain text, not JSON"
    with pytest.raises(StackConfigError) as info:
        load_from_pulumi_config()
    assert info.value.source == "stack t"
    unknown = [line for line in info.value.lines() if "unknown key" in line]
    assert [line.split(":")[1] for line in unknown] == ["note", "observabilty"]
    with pytest.raises(StackConfigError) as cli:
        validate_config({**raw, "observabilty": {"install_prometheus_stack": False}, "note": "plain text, not JSON"}, "f")
    assert sorted(cli.value.lines()) == sorted(info.value.lines())
