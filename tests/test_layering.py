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


def _module_graph() -> dict[str, set[str]]:
    """Every gpuscale module and the gpuscale modules it imports, wherever the import is (module level,
    ``TYPE_CHECKING`` or inside a function: a cycle through any of them is a design cycle)."""
    modules: dict[str, Path] = {}
    for path in sorted((ROOT / "gpuscale").rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
                for alias in node.names:
                    target = f"{base}.{alias.name}"
                    edges.add(target if target in modules else base)
            elif isinstance(node, ast.Import):
                edges.update(a.name for a in node.names)
        graph[name] = {e for e in edges if e in modules and e != name}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_anywhere_in_the_package() -> None:
    graph = _module_graph()
    assert "gpuscale.sim.scheduler" in graph["gpuscale.sim.simulation"]  # the graph sees the imports
    assert import_cycles(graph) == []
