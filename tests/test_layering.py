"""The core never imports its components, and the spec never imports what is derived from it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMPOSITION_ROOTS = {"gpuscale/program.py"}
"""The Pulumi program wires components together; the CLI reaches components only through it."""


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def _offenders(folder: str, forbidden: tuple[str, ...], allowed: set[str] = frozenset()) -> list[str]:  # type: ignore[assignment]
    out = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if rel in allowed:
            continue
        bad = sorted(n for n in _imports(path) if n.startswith(forbidden))
        if bad:
            out.append(f"{rel}: {bad}")
    return out


def test_core_never_imports_components() -> None:
    assert _offenders("gpuscale", ("gpuscale.components",), COMPOSITION_ROOTS) == []


def test_spec_is_structural_and_imports_nothing_derived() -> None:
    derived = ("gpuscale.sizing", "gpuscale.feasibility", "gpuscale.cross_layer", "gpuscale.manifests", "gpuscale.sim",
               "gpuscale.plan", "gpuscale.synth", "gpuscale.cli")
    assert _offenders("gpuscale/spec", derived) == []


def test_builders_create_no_pulumi_resources() -> None:
    assert _offenders("gpuscale/manifests", ("pulumi", "gpuscale.components")) == []


def test_guardrails_import_nothing_they_guard() -> None:
    """The spec imports the guardrails, so they import nothing of gpuscale but its constants (no cycle, no sizing)."""
    allowed = ("gpuscale.labels", "gpuscale.versions", "gpuscale.guardrails")
    bad = {
        str(path.relative_to(ROOT)): names
        for path in sorted((ROOT / "gpuscale/guardrails").rglob("*.py"))
        if (names := sorted(n for n in _imports(path)
                            if n.startswith("gpuscale.") and not n.startswith(allowed)))
    }
    assert bad == {}


def test_signals_sit_below_sizing_and_the_builders() -> None:
    """Sizing, the builders and the simulator read the signal objects; the signals read only the spec."""
    derived = ("gpuscale.sizing", "gpuscale.feasibility", "gpuscale.cross_layer", "gpuscale.manifests", "gpuscale.sim",
               "gpuscale.plan", "gpuscale.synth", "gpuscale.cli", "gpuscale.versions", "gpuscale.components")
    assert _offenders("gpuscale/signals", derived) == []


def test_components_never_import_the_offline_tools() -> None:
    """The components reach the Pulumi runtime through ``gpuscale.pulumi_runtime``, never the synth, simulator,
    plan or CLI (a Pulumi program installs the components without them)."""
    tools = ("gpuscale.synth", "gpuscale.sim", "gpuscale.plan", "gpuscale.cli", "gpuscale.tune", "gpuscale.schedule")
    assert _offenders("components", tools) == []
