"""The real Pulumi engine tier. ``make e2e-pulumi`` runs it (``GPUSCALE_E2E_PULUMI=1``, after building the CLI and the
Kubernetes provider); ``make test`` does not: every test here that needs the engine (the ``engine`` fixture) is
skipped without that variable, and with it when a binary is not built (the reason names which).

One local cluster and one engine (a file backend in a temporary directory) per session. Each scenario records its
verdict and what it observed in ``out/e2e/pulumi-report.json``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ENV = "GPUSCALE_E2E_PULUMI"
REPO = Path(__file__).resolve().parents[2]
_outcome = pytest.StashKey[pytest.TestReport]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e_pulumi: runs the real Pulumi engine (make e2e-pulumi)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    reason = None
    if os.environ.get(ENV) != "1":
        reason = f"real Pulumi engine tier: run by make e2e-pulumi ({ENV}=1)"
    else:
        from e2e import pulumi_engine, pulumi_engine_cluster

        reason = pulumi_engine.missing() or pulumi_engine_cluster.missing()
    for item in items:
        if here in Path(str(item.fspath)).parents and "engine" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.e2e_pulumi)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
    rep = yield
    if rep.when == "call" or (rep.when == "setup" and rep.failed):
        item.stash[_outcome] = rep
    return rep


def out_dir() -> Path:
    return Path(os.environ.get("GPUSCALE_E2E_OUT") or REPO / "out" / "e2e")


@pytest.fixture(scope="session")
def work() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="gpuscale-e2e-pulumi-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def report() -> Any:
    from e2e.pulumi_engine import PulumiReport

    return PulumiReport(out_dir() / "pulumi-report.json")


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


class Scenario:
    """What a scenario observed; recorded with the test's outcome when it ends."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.observed: dict[str, Any] = {}


@pytest.fixture
def scenario(request: pytest.FixtureRequest, engine: Any, report: Any) -> Iterator[Scenario]:
    sc = Scenario(request.node.name.removeprefix("test_"))
    yield sc
    rep = request.node.stash.get(_outcome, None)
    if rep is not None and rep.failed:
        crash = getattr(rep.longrepr, "reprcrash", None)
        sc.observed.setdefault("failure", (crash.message if crash is not None else str(rep.longrepr))[:4000])
    report.record(sc.name, bool(rep is not None and rep.passed), sc.observed)
