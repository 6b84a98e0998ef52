"""A generated block of ``docs/simulator.md``: the text between a bench script's two markers, rendered from its JSON."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parents[1] / "docs" / "simulator.md"


def write_block(begin: str, end: str, body: str, docs: Path = DOCS) -> None:
    """Replace what stands between ``begin`` and ``end`` in ``docs`` with ``body``."""
    text = docs.read_text()
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    docs.write_text(f"{head}{begin}\n{body}{end}{tail}")


def render_only(path: Path | None, render: Callable[[dict[str, Any]], str], begin: str, end: str, docs: bool) -> None:
    """``--markdown-only``: print (and with ``--docs`` write) the block of a committed JSON; simulate nothing."""
    if path is None:
        sys.exit("--markdown-only reads --json")
    body = render(json.loads(path.read_text()))
    if docs:
        write_block(begin, end, body)
    print(body, end="")
