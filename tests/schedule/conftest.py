"""The KAI replay program, built once per test session, and each spec's synth output, computed once."""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from gpuscale.schedule.binary import BuildError, GoUnavailableError, ensure_binary
from gpuscale.sizing import PlatformSizing, size_platform
from gpuscale.spec.platform import PlatformSpec
from gpuscale.stackfile import load_stack_file
from gpuscale.synth.render import synth_spec
from tests.conftest import stack_path
from tests.schedule.fixture_specs import fixture_spec, prod_variant_spec

REQUIRE_ENV = "GPUSCALE_REQUIRE_KAI"
"""Set to 1 to fail instead of skip when the program cannot be built (a machine that must run the real scheduler)."""


@dataclass(frozen=True)
class Synthesized:
    spec: PlatformSpec
    sizing: PlatformSizing
    objects: list[dict[str, Any]]
    charts: list[dict[str, Any]]


SPECS = {
    "fixture": fixture_spec,
    "prod-variant": prod_variant_spec,
    **{name: (lambda name=name: load_stack_file(stack_path(name))) for name in ("dev", "staging", "prod")},
}


_shared_dir: Path | None = None
"""Under pytest-xdist: a directory every worker of this run sees, so each spec is synthesized once per run."""


@pytest.fixture(scope="session", autouse=True)
def _share_synths_between_workers(tmp_path_factory: pytest.TempPathFactory) -> None:
    global _shared_dir
    if os.environ.get("PYTEST_XDIST_WORKER"):
        _shared_dir = tmp_path_factory.getbasetemp().parent


def _synth_objects(name: str, spec: PlatformSpec) -> dict[str, Any]:
    result = synth_spec(spec, stack=name)
    return {"objects": [o for _, o in result.kubernetes_objects()], "charts": result.charts()}


@cache
def synthesized(name: str) -> Synthesized:
    """The spec, its sizing and its synth output (Kubernetes objects and charts), once per test run."""
    spec = SPECS[name]()
    if _shared_dir is None:
        doc = _synth_objects(name, spec)
    else:
        path = _shared_dir / f"schedule-synth-{name}.json"
        with open(_shared_dir / f"schedule-synth-{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not path.is_file():
                path.write_text(json.dumps(_synth_objects(name, spec)))
            doc = json.loads(path.read_text())
    return Synthesized(spec, size_platform(spec), doc["objects"], doc["charts"])


@pytest.fixture(scope="session")
def kai_binary() -> Path:
    try:
        return ensure_binary(quiet=True)
    except GoUnavailableError as exc:
        pytest.skip(f"no Go toolchain: {exc}")
    except BuildError as exc:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 and the KAI replay program does not build: {exc}")
        lines = str(exc).splitlines()  # Go repeats one module error per import: the first says why
        more = f" (+{len(lines) - 1} more lines)" if len(lines) > 1 else ""
        pytest.skip(f"the KAI replay program does not build here: {lines[0] if lines else exc}{more}")
