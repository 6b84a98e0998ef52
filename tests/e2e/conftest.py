"""The real-controllers tier. ``make e2e`` runs it (``GPUSCALE_E2E=1``, inside a private network namespace, after
building the binaries); ``make test`` does not: every test here that needs the cluster (the ``harness`` fixture) is
marked ``e2e`` and skipped without that variable. The harness's own unit tests (``test_units.py``) run everywhere.

One cluster per session (``harness``); controllers start on first use. Each scenario records its verdict and
observations in ``out/e2e/report.json`` and dumps the cluster under ``out/e2e/dumps/<scenario>.json``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

E2E_ENV = "GPUSCALE_E2E"
REPO = Path(__file__).resolve().parents[2]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: runs the real controllers (make e2e); skipped by make test")


_expected = pytest.StashKey[dict[str, str]]()
"""Every scenario collected (its report name -> its test's node id), so the report lists those that did not run."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    # what starts the KEDA lanes (test_keda) runs right after the acceptance tests: side by side with the Karpenter
    # scenarios, and never beside acceptance, whose re-apply check a running KEDA would disturb (its HPAs scaling the
    # acceptance Deployments)
    early = [i for i in items if getattr(getattr(i, "function", None), "starts_lanes", False)]
    if early:
        rest = [i for i in items if i not in early]
        after = max((k + 1 for k, i in enumerate(rest) if Path(str(i.fspath)).name == "test_acceptance.py"), default=0)
        items[:] = rest[:after] + early + rest[after:]
    skip = pytest.mark.skip(reason=f"real-controllers tier: run by make e2e ({E2E_ENV}=1)")
    expected = config.stash.setdefault(_expected, {})
    for item in items:
        if here in Path(str(item.fspath)).parents and "harness" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.e2e)
            if os.environ.get(E2E_ENV) != "1":
                item.add_marker(skip)
            if "scenario" in getattr(item, "fixturenames", ()):
                expected[scenario_name(item.name)] = item.nodeid


def pytest_deselected(items: list[pytest.Item]) -> None:
    for item in items:
        _not_run[item.nodeid] = "deselected"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    why = None
    if report.skipped:
        why = f"skipped: {report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr}"
    elif report.failed and report.when == "setup":
        why = f"error before the scenario started: {_failure(report)}"
    if why is not None:
        _not_run[report.nodeid] = why


_not_run: dict[str, str] = {}
"""Node id -> why its scenario did not run (skipped, an error before it started, deselected)."""


def scenario_name(test_name: str) -> str:
    """A scenario's name in the report (the ``scenario`` fixture's)."""
    return test_name.removeprefix("test_")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
    rep = yield
    if rep.when == "call" or (rep.when == "setup" and rep.failed):
        item.stash[_outcome] = rep
    return rep


_outcome = pytest.StashKey[pytest.TestReport]()


@pytest.fixture(scope="session")
def report(request: pytest.FixtureRequest) -> Iterator[Any]:
    from e2e.harness import OUT
    from e2e.report import Report

    rep = Report(OUT / "report.json")
    rep.write()  # an earlier run's report must not pass for this one's while it runs or if it dies
    yield rep
    # every scenario collected is in the report: those that did not run say why, and count as not passed
    recorded = {s["name"] for s in rep.scenarios}
    for name, nodeid in request.config.stash.get(_expected, {}).items():
        if name not in recorded:
            rep.record(name, False, {"not_run": _not_run.get(nodeid, "not run (the session ended before it)")})


@pytest.fixture(scope="session")
def harness(report: Any) -> Iterator[Any]:
    from e2e.harness import Harness, in_private_netns

    if not in_private_netns():
        pytest.fail("run through make e2e: the tier runs inside a private network namespace (unshare -n)")
    from e2e.prometheus import prometheus_version

    report.extra_versions["prometheus"] = f"debian prometheus {prometheus_version()}"
    work = Path(tempfile.mkdtemp(prefix="gpuscale-e2e-"))
    h = Harness(work)
    try:
        h.start()
        yield h
    finally:
        h.stop()
        from e2e.harness import OUT

        keep = OUT / "logs"
        shutil.rmtree(keep, ignore_errors=True)
        shutil.copytree(work / "logs", keep, dirs_exist_ok=True)
        shutil.rmtree(work, ignore_errors=True)


class Scenario:
    """What a scenario observed; recorded with the test's outcome when it ends."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.observed: dict[str, Any] = {}


@pytest.fixture
def scenario(request: pytest.FixtureRequest, harness: Any, report: Any) -> Iterator[Scenario]:
    sc = Scenario(request.node.name.removeprefix("test_"))
    started = time.monotonic()
    yield sc
    # the scenario's own time, setup excluded; a scenario run in a lane (e2e.lanes) brings its own, and its dump
    sc.observed.setdefault("wall_s", round(time.monotonic() - started, 1))
    rep = request.node.stash.get(_outcome, None)
    passed = bool(rep is not None and rep.passed)
    if rep is not None and rep.failed:
        sc.observed.setdefault("failure", _failure(rep))
    if "dump" not in sc.observed:
        sc.observed["dump"] = str(harness.dump(sc.name))
    report.record(sc.name, passed, sc.observed)


def _failure(rep: pytest.TestReport) -> str:
    """The exception's own message (a kubectl error's stderr, an assertion's text), not the traceback's last line,
    which names only the file and the exception type."""
    crash = getattr(rep.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(rep.longrepr or "")
    return text[:4000]


@pytest.fixture(scope="session")
def keda_lanes(request: pytest.FixtureRequest, harness: Any, synth_dir: Any) -> Any:
    """The KEDA scenarios, started once in their lanes (``tests/e2e/test_keda.py`` ``start_lanes``); session-wide
    because the Karpenter module's tests run between the start and the verdicts."""
    from tests.e2e.test_keda import start_lanes

    return start_lanes(request.session, harness, synth_dir)


SYNTH_DIR_ENV = "GPUSCALE_E2E_SYNTH_DIR"
"""Run the scenarios against manifests synthesised elsewhere (another commit's ``gpuscale synth --out <dir>/<stack>``):
``<dir>/<stack>/manifests`` is read as is instead of synthesising this tree's stack."""


@pytest.fixture(scope="session")
def synth_dir() -> Any:
    """``gpuscale synth --out`` of a shipped stack, once per session (``out/e2e/synth/<stack>``), or the manifests
    under ``$GPUSCALE_E2E_SYNTH_DIR/<stack>`` when that is set."""
    from e2e.acceptance import synth

    done: dict[str, Path] = {}
    given = os.environ.get(SYNTH_DIR_ENV)

    def get(stack: str) -> Path:
        if given:
            manifests = Path(given) / stack / "manifests"
            if not any(manifests.glob("*.yaml")):
                pytest.fail(f"{SYNTH_DIR_ENV}={given}: no {manifests}/*.yaml (gpuscale synth --out {given}/{stack})")
            return manifests
        if stack not in done:
            out = REPO / "out" / "e2e" / "synth" / stack
            shutil.rmtree(out, ignore_errors=True)
            done[stack] = synth(REPO / "stacks" / f"Pulumi.{stack}.yaml", out)
        return done[stack]

    return get
