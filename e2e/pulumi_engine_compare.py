"""Does the offline synth show what the engine plans? ``gpuscale synth``'s ``resources.json`` (the platform program
under mocks) against the inputs of every step of a real ``pulumi preview`` of the Kubernetes half
(``e2e.pulumi_engine_program``), object by object (type and logical name).

Every synth object is either planned by the engine with the same inputs, or accounted for: it belongs to a component
that installs a Helm chart (the component has a ``helm.sh`` Chart child in the synth, and charts stay under mocks) or
to a component the program left out (it says which and why). Inputs that differ are listed by path; each must be in
``KNOWN_DIFFERENCES`` with its reason, or the comparison fails.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pulumi import automation as auto

from e2e.pulumi_engine_program import NODE_ROLE_NAME, SKIP_AWAIT

HELM = "kubernetes:helm.sh/"

KNOWN_DIFFERENCES: dict[tuple[str, str], str] = {
    ("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", "spec.role"): (
        f"the node role: Karpenter's IAM role (an AWS resource, its mocked name in the synth) there, {NODE_ROLE_NAME!r}"
        " here, as no AWS provider runs"),
}
"""(type, input path) -> why the engine's input differs from the synth's there."""


def is_object(type_token: str) -> bool:
    """A Kubernetes object (not a chart, not a provider, not a component)."""
    return type_token.startswith("kubernetes:") and not type_token.startswith(HELM)


def name_of(urn: str) -> str:
    return urn.rsplit("::", 1)[-1]


def strip_skip_await(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """``inputs`` without the one annotation the engine program adds (``e2e.pulumi_engine_program``)."""
    out = dict(inputs)
    meta = out.get("metadata")
    if isinstance(meta, dict) and isinstance(meta.get("annotations"), dict):
        annotations = {k: v for k, v in meta["annotations"].items() if k != SKIP_AWAIT}
        meta = {k: v for k, v in meta.items() if k != "annotations"}
        if annotations:
            meta["annotations"] = annotations
        out["metadata"] = meta
    return out


def differences(a: Any, b: Any, path: str = "", *, keys_of_a: bool = False) -> Iterator[str]:
    """The paths where ``a`` and ``b`` differ (``spec.template.spec.containers[0].args``); with ``keys_of_a``, only
    where ``b`` lacks or differs from what ``a`` holds (keys only ``b`` has are not compared)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) if keys_of_a else set(a) | set(b)):
            sub = f"{path}.{key}" if path else str(key)
            if key not in a or key not in b:
                yield sub
            else:
                yield from differences(a[key], b[key], sub, keys_of_a=keys_of_a)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            yield from differences(x, y, f"{path}[{i}]", keys_of_a=keys_of_a)
    elif a != b:
        yield path or "(whole value)"


def not_as_set(wanted: Any, live: Any) -> Iterator[str]:
    """The paths where ``live`` (an object the API server holds) lacks or differs from a value ``wanted`` sets; keys
    only ``live`` has are the server's defaults (a probe's ``scheme``, a pod's ``dnsPolicy``) and are not compared."""
    return differences(wanted, live, keys_of_a=True)


@dataclass
class Comparison:
    stack: str
    same: list[str] = field(default_factory=list)
    """``type::name`` of every object whose inputs match."""
    known: dict[str, dict[str, str]] = field(default_factory=dict)
    """``type::name`` -> {path: reason} for the differences ``KNOWN_DIFFERENCES`` explains."""
    unexplained: dict[str, list[str]] = field(default_factory=dict)
    """``type::name`` -> paths that differ with no known reason, or a one-line reason the object is unmatched."""
    not_in_engine: dict[str, str] = field(default_factory=dict)
    """``type::name`` -> why the engine program does not create it (a chart component, a left-out component)."""

    @property
    def passed(self) -> bool:
        return bool(self.same) and not self.unexplained

    def as_json(self) -> dict[str, Any]:
        return {"stack": self.stack, "same": len(self.same), "known_differences": self.known,
                "unexplained": self.unexplained, "not_in_engine": self.not_in_engine}


def synth_objects(resources_json: Path) -> dict[str, dict[str, Any]]:
    """``type::name`` -> the synth's entry, for every Kubernetes object."""
    doc = json.loads(resources_json.read_text(encoding="utf-8"))
    entries: list[dict[str, Any]] = doc["resources"]
    return {f"{e['type']}::{e['name']}": e for e in entries if e["custom"] and is_object(e["type"])}


def chart_components(resources_json: Path) -> set[str]:
    """Components (``type::name``) with a Helm chart child in the synth."""
    doc = json.loads(resources_json.read_text(encoding="utf-8"))
    return {e["parent"] for e in doc["resources"] if e["type"].startswith(HELM) and e["parent"]}


def engine_objects(steps: Iterable[auto.StepEventMetadata]) -> dict[str, dict[str, Any]]:
    """``type::name`` -> planned inputs of every Kubernetes object in a preview's steps."""
    out = {}
    for step in steps:
        if step.new is not None and is_object(step.type):
            out[f"{step.type}::{name_of(step.urn)}"] = dict(step.new.inputs or {})
    return out


def why_absent(parent: str, charts: set[str], left_out: Mapping[str, str]) -> str | None:
    """Why a synth object whose parent is ``parent`` is not in the engine program, or ``None`` if it should be."""
    if parent in charts:
        return f"a child of {parent}, which installs a Helm chart (under mocks here)"
    if parent and name_of(parent) in left_out:
        return f"a child of {parent}: {left_out[name_of(parent)]}"
    return None


def compare(stack: str, resources_json: Path, planned: Mapping[str, Mapping[str, Any]],
            left_out: Mapping[str, str]) -> Comparison:
    """The synth of ``resources_json`` against ``planned`` (``engine_objects`` of a preview's steps)."""
    synth = synth_objects(resources_json)
    charts = chart_components(resources_json)
    result = Comparison(stack)
    for key, entry in sorted(synth.items()):
        if key not in planned:
            why = why_absent(entry["parent"] or "", charts, left_out)
            if why:
                result.not_in_engine[key] = why
            else:
                result.unexplained[key] = ["in the synth, not planned by the engine"]
            continue
        paths = list(differences(strip_skip_await(entry["inputs"]), strip_skip_await(dict(planned[key]))))
        known = {p: KNOWN_DIFFERENCES[(entry["type"], p)] for p in paths if (entry["type"], p) in KNOWN_DIFFERENCES}
        other = [p for p in paths if p not in known]
        if known:
            result.known[key] = known
        if other:
            result.unexplained[key] = other
        if not paths:
            result.same.append(key)
    for key in sorted(set(planned) - set(synth)):
        result.unexplained[key] = ["planned by the engine, not in the synth"]
    return result
