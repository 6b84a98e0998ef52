"""``validate`` and the plan say what synth will warn about, from the same warning functions the components log."""

from __future__ import annotations

import logging

import pytest
from typer.testing import CliRunner

from gpuscale.cli import app
from gpuscale.sizing import size_platform
from gpuscale.stack_warnings import stack_warnings
from gpuscale.stackfile import load_stack_file
from gpuscale.synth.render import synth_spec
from tests.conftest import STACKS, stack_path


@pytest.mark.parametrize("stack", STACKS)
def test_the_warnings_are_exactly_those_synth_logs(stack: str, caplog: pytest.LogCaptureFixture) -> None:
    spec = load_stack_file(stack_path(stack))
    with caplog.at_level(logging.WARNING):
        synth_spec(spec, stack=stack)
    # the components' pulumi.log.warn calls reach the mock engine's logger
    logged = sorted(r.getMessage() for r in caplog.records if r.name.startswith("gpuscale.pulumi_runtime"))
    assert sorted(stack_warnings(spec, size_platform(spec))) == logged


def test_validate_prints_the_efa_stock_image_warning_of_prod() -> None:
    result = CliRunner().invoke(app, ["validate", "--stack-file", str(stack_path("prod"))], terminal_width=400)
    assert result.exit_code == 0, result.output
    assert "warning: llama-70b-fp8: runs on EFA with the stock image" in result.output
