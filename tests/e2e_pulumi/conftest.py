"""The real Pulumi engine tier. ``make e2e-pulumi`` runs it (``GPUSCALE_E2E_PULUMI=1``, after building the CLI and the
Kubernetes provider); ``make test`` does not: every test here that needs the engine (the ``engine`` fixture) is
skipped without that variable. With it, a binary not built or the team's CRDs absent stops the run with the reason
(never a skip, which would let CI pass without the engine having run).

One local cluster and one engine (a file backend in a temporary directory) per session. Each scenario records its
verdict and what it observed in ``out/e2e/pulumi-report.json``.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Scenario, _failure  # the real-controllers tier's scenario record

ENV = "GPUSCALE_E2E_PULUMI"
REPO = Path(__file__).resolve().parents[2]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e_pulumi: runs the real Pulumi engine (make e2e-pulumi)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    reason = None
    if os.environ.get(ENV) != "1":
        reason = f"real Pulumi engine tier: run by make e2e-pulumi ({ENV}=1)"
    else:  # make e2e-pulumi built everything first: a skip now would pass a CI run that never ran the engine
        from e2e import pulumi_engine, pulumi_engine_cluster

        missing = pulumi_engine.missing() or pulumi_engine_cluster.missing()
        if missing:
            raise pytest.UsageError(f"the real Pulumi engine tier cannot run: {missing}")
    for item in items:
        if here in Path(str(item.fspath)).parents and "engine" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.e2e_pulumi)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


_outcome = pytest.StashKey[pytest.TestReport]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
    """Keep the outcome a scenario is recorded with: the call's, or the setup's when it failed or skipped (a
    binary not built yet)."""
    rep = yield
    if rep.when == "call" or (rep.when == "setup" and not rep.passed):
        item.stash[_outcome] = rep
    if rep.when == "setup" and rep.skipped and "scenario" in getattr(item, "fixturenames", ()) \
            and os.environ.get(ENV) == "1":  # skipped before its scenario record existed: record it here
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        _report().record(item.name.removeprefix("test_"), False, {"skipped": reason})
    return rep


def out_dir() -> Path:
    return Path(os.environ.get("GPUSCALE_E2E_OUT") or REPO / "out" / "e2e")


@pytest.fixture(scope="session")
def work() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="gpuscale-e2e-pulumi-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@functools.cache
def _report() -> Any:
    from e2e.pulumi_engine import PulumiReport

    return PulumiReport(out_dir() / "pulumi-report.json")


@pytest.fixture(scope="session")
def report() -> Any:
    return _report()


@pytest.fixture(scope="session")
def cluster(work: Path) -> Iterator[Any]:
    from e2e.pulumi_engine_cluster import LocalCluster

    started = LocalCluster.start(work / "local")
    try:
        yield started
    finally:
        started.stop()
        logs = out_dir() / "pulumi-logs"
        shutil.rmtree(logs, ignore_errors=True)
        shutil.copytree(work / "local" / "logs", logs, dirs_exist_ok=True)


@pytest.fixture(scope="session")
def engine(work: Path, cluster: Any) -> Any:
    from e2e.pulumi_engine import Engine

    return Engine(work / "engine")


@pytest.fixture
def scenario(request: pytest.FixtureRequest, engine: Any, report: Any) -> Iterator[Scenario]:
    sc = Scenario(request.node.name.removeprefix("test_"))
    yield sc
    rep = request.node.stash.get(_outcome, None)
    if rep is not None and rep.failed:
        sc.observed.setdefault("failure", _failure(rep))
    report.record(sc.name, bool(rep is not None and rep.passed), sc.observed)
