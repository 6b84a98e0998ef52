"""The Pulumi runtime adapter: the one module that touches Pulumi SDK internals (not public API) gpuscale relies on.

Mocks are public (``pulumi.runtime.set_mocks``), but recording every registration with its parent, running a program
function to completion outside the CLI, reading the root stack's exports, and listing every config key of a namespace
(``pulumi.Config`` only answers keys you name) use private names. They are all here, checked against the SDK range
``pyproject.toml`` pins, so an SDK upgrade that moves one fails in one place, loudly.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from importlib.metadata import version
from typing import Any

import pulumi
from pulumi.runtime import config as _config
from pulumi.runtime import mocks as _mocks
from pulumi.runtime import rpc as _rpc
from pulumi.runtime import settings as _settings
from pulumi.runtime.stack import run_pulumi_func as _run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

SUPPORTED_RANGE = (3, 200), (4, 0)
"""``pulumi>=3.200,<4``: the range in pyproject.toml that these internals were checked against."""

MockMonitor: type[Any] = _mocks.MockMonitor
"""The SDK's in-process resource monitor; subclassed to record parents and providers."""


class SdkMismatchError(RuntimeError):
    """The installed Pulumi SDK lacks an internal the synth needs."""


def sdk_version() -> tuple[int, int]:
    major, minor, *_ = version("pulumi").split(".")
    return int(major), int(minor)


def check_sdk() -> None:
    """Refuse an SDK outside the checked range, naming what is missing, before anything runs."""
    lo, hi = SUPPORTED_RANGE
    found = sdk_version()
    missing = [
        name for name, holder, attr in (
            ("pulumi.runtime.mocks.MockMonitor", _mocks, "MockMonitor"),
            ("pulumi.runtime.settings.SETTINGS.rpc_manager", _settings.SETTINGS, "rpc_manager"),
            ("pulumi.runtime.settings.SETTINGS.outputs", _settings.SETTINGS, "outputs"),
            ("pulumi.runtime.settings.get_root_resource", _settings, "get_root_resource"),
            ("pulumi.runtime.settings.get_monitor", _settings, "get_monitor"),
            ("pulumi.runtime.config.CONFIG", _config, "CONFIG"),
            ("pulumi.runtime.config.get_config_env", _config, "get_config_env"),
        ) if not hasattr(holder, attr)
    ]
    if not lo <= found < hi or missing:
        raise SdkMismatchError(
            f"pulumi {'.'.join(map(str, found))} is outside the range the offline synth was checked against "
            f"(>={lo[0]}.{lo[1]},<{hi[0]}.{hi[1]})" + (f"; missing: {', '.join(missing)}" if missing else "")
        )


def program_run() -> object:
    """An object that lives exactly as long as one program run: the resource monitor (each mocked run has its own)."""
    return _settings.get_monitor()


def reset_runtime() -> None:
    """Forget outstanding RPCs and outputs of an earlier program run in this process."""
    _settings.SETTINGS.rpc_manager.clear()
    _settings.SETTINGS.outputs.clear()


def run_to_completion(program: Callable[[], object]) -> None:
    """Run a program function as the engine would, waiting for every ``apply``; its exceptions propagate."""

    def body() -> None:
        program()

    _sync_await(_run_pulumi_func(body))


def root_stack_outputs() -> dict[str, Any]:
    """The mutable exports of the root ``pulumi:pulumi:Stack`` (``pulumi.export`` writes here)."""
    outputs = getattr(_settings.get_root_resource(), "outputs", None)
    return outputs if isinstance(outputs, dict) else {}


def deserialize(struct: Any, *, keep_unknowns: bool = False) -> Any:
    return _rpc.deserialize_properties(struct, keep_unknowns=keep_unknowns)


def resolve_plain(values: dict[str, Any]) -> Any:
    """Outputs and Inputs in ``values`` resolved to plain data (unknowns kept as the SDK's marker)."""
    return deserialize(_sync_await(_rpc.serialize_properties(values, {})), keep_unknowns=True)


class _EngineLogHandler(logging.Handler):
    """What the engine would print for ``pulumi.log``: ``warning: <message>`` on stderr (looked up at each message, so
    a captured stderr sees it), instead of the bare message Python's last-resort handler prints for the mock engine."""

    def emit(self, record: logging.LogRecord) -> None:
        sys.stderr.write(f"{record.levelname.lower()}: {record.getMessage()}\n")


ENGINE_LOG = logging.getLogger("gpuscale.pulumi_runtime.engine")
"""The mock engine's log: components' ``pulumi.log.warn`` messages, each as a ``warning:`` line."""
ENGINE_LOG.propagate = False
ENGINE_LOG.setLevel(logging.WARNING)
ENGINE_LOG.addHandler(_EngineLogHandler())


def install_mocks(mocks: pulumi.runtime.Mocks, monitor: Any, *, project: str, stack: str, preview: bool) -> None:
    pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=preview, monitor=monitor, logger=ENGINE_LOG)
    reset_runtime()


def all_config_keys() -> list[str]:
    """Every ``<namespace>:<key>`` set for the running stack, as the language host passed it (explicitly set config,
    then the ``PULUMI_CONFIG`` bag); sorted."""
    return sorted({*_config.CONFIG.get(), *_config.get_config_env()})


def config_keys(namespace: str) -> list[str]:
    """Every key of ``namespace`` set for the running stack, without the namespace; sorted."""
    return [k.partition(":")[2] for k in all_config_keys() if k.partition(":")[0] == namespace and ":" in k]
