"""Property: whatever is done to a shipped stack file, `gpuscale validate` exits 0 or 2 and never with a traceback.

Mutations: delete a key, put an odd value anywhere (other types, extreme and non-finite numbers, odd strings),
rename a key, duplicate or drop a line of the YAML text. Deterministic (derandomized, no example database), bounded
and deadline-free, so it runs in a few seconds in CI.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuscale.cli import app
from tests.cli.runner import FastRunner
from tests.conftest import STACKS, stack_path

runner = FastRunner()
DOCS = {name: yaml.safe_load(stack_path(name).read_text()) for name in STACKS}

_ODD_STRINGS = ["", " ", "\n", "1h\n", "old[/x]", ":bomb:", "gpuscale:secret", "0 8 * * 1-5", "@daily", "us-east-1a",
                "null", "true", "1e999", "-1", "café", "\x00", "a" * 300, "[bold]x[/]", "{}", "- a"]
_ODD_NUMBERS = [0, -1, 1, 2**31, 2**63, 10**40, -(10**40), 0.5, 1e-320, 1e308, -1e308, float("inf"), float("-inf"),
                float("nan")]

odd_values = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from(_ODD_NUMBERS),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(_ODD_STRINGS),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12),
    st.lists(st.sampled_from([0, "x", None, 1.5]), max_size=3),
    st.dictionaries(st.sampled_from(["name", "x", "gpu_limit", "Models"]), st.sampled_from([0, "x", None]), max_size=2),
)


def _slots(node: Any) -> Iterator[tuple[Any, Any]]:
    """Every (container, key-or-index) in a YAML tree, depth first."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield node, k
            yield from _slots(v)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield node, i
            yield from _slots(v)


@st.composite
def mutated_stack(draw: st.DrawFn) -> str:
    doc = copy.deepcopy(DOCS[draw(st.sampled_from(STACKS))])
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        slots = list(_slots(doc["config"]))
        container, key = draw(st.sampled_from(slots))
        op = draw(st.sampled_from(["delete", "replace", "replace", "rename"]))
        if op == "delete":
            del container[key]
        elif op == "replace":
            container[key] = draw(odd_values)
        elif isinstance(container, dict):
            container[draw(st.sampled_from(["Name", "colour", "gpuscale:x", "name\n", "1"]))] = container.pop(key)
    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    lines = text.splitlines(keepends=True)
    line_op = draw(st.sampled_from(["none", "duplicate", "drop"]))
    if line_op != "none" and len(lines) > 2:
        i = draw(st.integers(min_value=1, max_value=len(lines) - 1))
        lines[i:i + 1] = [lines[i], lines[i]] if line_op == "duplicate" else []
    return "".join(lines)


@settings(max_examples=80, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(text=mutated_stack())
def test_mutated_stacks_exit_0_or_2_never_a_traceback(text: str, tmp_path_factory: Any) -> None:
    path = Path(tmp_path_factory.mktemp("fuzz")) / "Pulumi.fuzz.yaml"
    path.write_text(text, encoding="utf-8")
    result = runner.invoke(app, ["validate", "--stack-file", str(path)])
    assert result.exception is None or isinstance(result.exception, SystemExit), (repr(result.exception), text)
    assert result.exit_code in (0, 2), (result.output, text)
    assert "Traceback" not in result.output
    if result.exit_code == 2:
        assert f"error: {path}: invalid input" in result.output, result.output
