"""The real Pulumi engine, driven through the Automation API against a local file backend in a temporary directory.

The CLI (``pulumi``) and the Kubernetes provider (``pulumi-resource-kubernetes``) are built from the Go module proxy by
``e2e.build`` (pins ``gpuscale.versions.E2E_PULUMI_BINARIES``). The Python language host cannot be built (the proxy
refuses ``github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3``), so every program is an inline program:
the Automation API serves it from this process (``pulumi.automation._server.LanguageServer``) and the CLI connects to
it, so the host is never needed.

The policy pack without the language host: the CLI runs a policy pack *directory* only through its language's
plugin (``newPlugin`` in pulumi/pulumi ``pkg/resource/plugin/plugin.go`` at v3.274.1 loads ``PulumiPolicy.yaml`` and
asks the host for the ``python`` language runtime, which is ``pulumi-language-python``: "no language plugin
'pulumi-language-python' found"; the older ``pulumi-analyzer-policy-python`` fallback is gone from
``pkg/resource/plugin/analyzer_plugin.go``). ``NewPolicyAnalyzer`` there also takes an *executable* as the pack: it
starts it as the analyzer plugin with the engine's address, reading ``PulumiPolicy.yaml`` beside it. So
``policy_pack()`` makes a directory holding a link to the pack's ``PulumiPolicy.yaml`` and a two-line executable that
runs the pip SDK's own policy entry point on the pack (``python -m pulumi.policy ENGINE PACK_DIR``:
``pulumi/policy/__main__.py`` runs ``PACK_DIR/__main__.py``, where ``pulumi_policy.PolicyPack`` serves the analyzer
and prints its port) with this interpreter, whose environment has gpuscale and pulumi-policy. The policies, their
names and enforcement levels are the pack's own; only the launcher differs from ``--policy-pack <dir>``.

Nothing leaves the machine: no update check (``PULUMI_SKIP_UPDATE_CHECK``), no plugin download
(``PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION``); the provider is found on ``PATH`` (an "ambient" plugin).
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pulumi import automation as auto

from e2e import build
from e2e.pulumi_engine_program import KUBECONFIG_KEY
from e2e.report import Report
from gpuscale.policy import pack_dir
from gpuscale.versions import E2E_ETCD, E2E_KUBERNETES, E2E_PULUMI, E2E_PULUMI_KUBERNETES

PROJECT = "gpuscale-e2e"
"""The inline programs' project. Its own config namespace holds the kubeconfig; the spec stays under ``gpuscale:``."""
POLICY_LAUNCHER = "gpuscale-policy-pack"
REPLACE_STEPS = frozenset(op.value for op in (auto.OpType.REPLACE, auto.OpType.CREATE_REPLACEMENT,
                                              auto.OpType.DELETE_REPLACED, auto.OpType.DISCARD_REPLACED))
"""The engine's step ops of one replacement (``pulumi.automation.OpType``)."""


class EngineError(RuntimeError):
    """The engine could not be set up; the message says what is missing."""


def missing(*, provider: bool = True) -> str | None:
    """Why the engine (with the Kubernetes provider, unless ``provider`` is false) cannot run here, or ``None``."""
    for pin in (E2E_PULUMI, E2E_PULUMI_KUBERNETES) if provider else (E2E_PULUMI,):
        if not build.is_built(pin):
            return f"{pin.name} {pin.version} is not built: python -m e2e.pulumi_engine build (or make e2e-pulumi)"
    return None


def ensure_built() -> dict[str, dict[str, object]]:
    """Build (or find in the cache) the CLI and the provider; their ``build.json`` records by name."""
    log = build.cache_root() / "build.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    records = {}
    for pin in (E2E_PULUMI, E2E_PULUMI_KUBERNETES):
        try:
            records[pin.name] = build.build(pin, log=log)
        except build.BuildError as exc:
            raise EngineError(str(exc)) from None
    return records


@dataclass
class Events:
    """The engine events of one operation, and what the tests read from them."""

    events: list[auto.EngineEvent] = field(default_factory=list)

    def __call__(self, event: auto.EngineEvent) -> None:
        self.events.append(event)

    def steps(self) -> Iterator[auto.StepEventMetadata]:
        """Every resource step the engine planned or took (``ResourcePreEvent``), providers and components included."""
        for e in self.events:
            if e.resource_pre_event is not None:
                yield e.resource_pre_event.metadata

    def ops(self) -> dict[str, str]:
        """URN -> the step's op (``create``, ``same``, ``update``, ``replace``, ``delete`` ...)."""
        return {s.urn: str(s.op.value) for s in self.steps()}

    def planned(self, keep: Callable[[str], bool]) -> dict[str, str]:
        """``type::name`` -> the step the engine plans for each resource whose type ``keep`` accepts, other than
        ``same``. A replace is several steps of one URN (``create-replacement``, ``replace``, ``delete-replaced``, in an
        order that depends on delete-before-replace); they fold into one ``replace``, the word ``gpuscale diff`` uses."""
        out: dict[str, str] = {}
        for s in self.steps():
            op = str(s.op.value)
            if not keep(s.type) or op == "same":
                continue
            key = f"{s.type}::{s.urn.rsplit('::', 1)[-1]}"
            out[key] = "replace" if op in REPLACE_STEPS or out.get(key) == "replace" else op
        return out

    def policy(self) -> list[auto.PolicyEvent]:
        return [e.policy_event for e in self.events if e.policy_event is not None]

    def diagnostics(self) -> list[auto.DiagnosticEvent]:
        return [e.diagnostic_event for e in self.events if e.diagnostic_event is not None]


@dataclass
class Engine:
    """A Pulumi home, a file backend and a project directory under ``work``, and the CLI that uses them."""

    work: Path
    passphrase: str = field(default_factory=lambda: secrets.token_urlsafe(24))

    def __post_init__(self) -> None:
        reason = missing(provider=False)
        if reason:
            raise EngineError(reason)
        self.bin = self.work / "bin"
        self.bin.mkdir(parents=True, exist_ok=True)
        for pin, name in ((E2E_PULUMI, "pulumi"), (E2E_PULUMI_KUBERNETES, "pulumi-resource-kubernetes")):
            link = self.bin / name
            link.unlink(missing_ok=True)
            if build.is_built(pin):  # without the provider, only programs that register no Kubernetes object run
                link.symlink_to(build.binary(pin, name))
        self.home = self.work / "home"
        self.state = self.work / "state"
        self.project = self.work / "project"
        for d in (self.home, self.state, self.project):
            d.mkdir(parents=True, exist_ok=True)

    @property
    def env(self) -> dict[str, str]:
        """The environment of every CLI run: this work tree only, nothing fetched."""
        venv_bin = str(Path(sys.executable).parent)
        return {
            "PATH": os.pathsep.join([str(self.bin), venv_bin, os.environ.get("PATH", "/usr/bin:/bin")]),
            "PULUMI_HOME": str(self.home),
            "PULUMI_BACKEND_URL": self.state.as_uri(),
            "PULUMI_CONFIG_PASSPHRASE": self.passphrase,
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "PULUMI_SKIP_CONFIRMATIONS": "true",
            "PULUMI_DIY_BACKEND_NO_LEGACY_WARNING": "true",
        }

    def policy_pack(self) -> str:
        """What ``--policy-pack`` takes for gpuscale's pack here: the launcher (see the module docstring)."""
        folder = self.work / "policy"
        folder.mkdir(exist_ok=True)
        manifest = folder / "PulumiPolicy.yaml"
        manifest.unlink(missing_ok=True)
        manifest.symlink_to(pack_dir() / "PulumiPolicy.yaml")
        launcher = folder / POLICY_LAUNCHER
        launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" -u -m pulumi.policy "$1" "{pack_dir()}"\n',
                            encoding="utf-8")
        launcher.chmod(0o755)
        return str(launcher)

    def command(self) -> auto.PulumiCommand:
        return auto.PulumiCommand(root=str(self.work))  # runs <root>/bin/pulumi

    def stack(self, name: str, program: Callable[[], None], *, stack_file: Path | None = None,
              kubeconfig: str | None = None) -> auto.Stack:
        """Select (or create) stack ``name`` of the inline ``program``; ``stack_file`` (a gpuscale stack file) becomes
        its ``Pulumi.<name>.yaml`` as it is, bytes unchanged, before the stack is created; ``kubeconfig`` is set as
        the secret the program's provider reads (``e2e.pulumi_engine_program.KUBECONFIG_KEY``)."""
        if stack_file is not None:
            shutil.copyfile(stack_file, self.project / f"Pulumi.{name}.yaml")
        opts = auto.LocalWorkspaceOptions(
            work_dir=str(self.project), pulumi_home=str(self.home), env_vars=self.env,
            project_settings=auto.ProjectSettings(name=PROJECT, runtime="python"),
            secrets_provider="passphrase", pulumi_command=self.command(),
        )
        stack = auto.create_or_select_stack(name, project_name=PROJECT, program=program, opts=opts)
        if kubeconfig is not None:
            stack.set_config(f"{PROJECT}:{KUBECONFIG_KEY}", auto.ConfigValue(kubeconfig, secret=True))
        return stack

    def export(self, stack: auto.Stack) -> str:
        """``pulumi stack export`` as a user runs it, secrets encrypted (the Automation API's ``export_stack``
        passes ``--show-secrets``)."""
        proc = subprocess.run([str(self.bin / "pulumi"), "stack", "export", "--stack", stack.name],
                              cwd=self.project, env={**os.environ, **self.env}, capture_output=True, text=True,
                              timeout=120, check=False)
        if proc.returncode != 0:
            raise EngineError(f"pulumi stack export --stack {stack.name} failed:\n{proc.stderr.strip()}")
        return proc.stdout


class PulumiReport(Report):
    """``out/e2e/pulumi-report.json``: the real-controllers report's shape, with this tier's versions."""

    def versions(self) -> dict[str, str]:
        from importlib.metadata import version as dist_version

        pins = {p.name: f"{p.module}@{p.version}" for p in (E2E_ETCD, E2E_KUBERNETES, E2E_PULUMI, E2E_PULUMI_KUBERNETES)}
        sdks = {f"{d} (pip)": dist_version(d) for d in ("pulumi", "pulumi-kubernetes", "pulumi-policy")}
        return {**pins, **sdks, **self.extra_versions}


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args != ["build"]:
        print("usage: python -m e2e.pulumi_engine build", file=sys.stderr)
        return 2
    try:
        for name, record in ensure_built().items():
            costs = record["costs"]
            assert isinstance(costs, dict)
            cpu = sum(c["cpu_s"] for c in costs.values())
            state = "cached" if record["cached"] else "built"
            print(f"{name}: {state} ({cpu:.0f} CPU-s when built)", flush=True)
    except EngineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
