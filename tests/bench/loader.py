"""Load a ``bench/*.py`` script as a module (the bench is scripts, not a package the tests import by name)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def bench_module(script: str) -> ModuleType:
    """``bench/<script>.py``, registered as ``bench_<script>`` (its dataclasses and pickling need a module name)."""
    name = f"bench_{script}"
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{script}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
