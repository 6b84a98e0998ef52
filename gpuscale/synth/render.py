"""Offline synth: run a Pulumi program under deterministic mocks and write what it would create.

Output layout (``DIR``), byte-identical for the same program and spec:

- ``resources.json``: every registered resource in tree order (parents before children, siblings by type then
  name) with its type token, logical name, parent and provider (as ``type::name``, never a stack-specific URN),
  custom flag, dependencies and inputs. Secret inputs are ``"[secret]"``; stack outputs (``pulumi.export``) are
  under ``outputs``, with the same redaction.
- ``manifests/<group>_<version>_<Kind>.yaml``: every Kubernetes object the program registers, one file per kind,
  documents sorted by namespace and name, keys sorted. Only Kubernetes objects, so
  ``../shared/tools/crdcheck.py DIR/manifests`` and ``kubectl apply --dry-run`` read it as is.
- ``charts.yaml``: every Helm chart (``helm.sh/v4`` Chart or ``v3`` Release): chart, version, repository,
  namespace, values. Under mocks a chart is one opaque registration (its templates are never rendered), so its
  values are what reviewers see.

Pulumi sends secretness per top-level property: one secret Output anywhere inside ``spec`` makes the whole
``spec`` a secret, and it renders as ``"[secret]"``. Keep secrets in Kubernetes Secrets referenced by name.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpuscale import pulumi_runtime
from gpuscale.synth.layout import CHARTS_FILE, FORMAT, MANIFESTS_DIR, RESOURCES_FILE
from gpuscale.synth.mocks import RecordedResource, run_program

REDACTED = "[secret]"
"""What a secret value renders as."""
UNKNOWN = "[unknown]"
"""What a value unknown during preview renders as."""

_SECRET_SIG_KEY = "4dabf18193072939515e22adb298388d"
_SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
_UNKNOWN_WIRE = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
_HELM_PREFIX = "kubernetes:helm.sh/"
_STACK_TYPE = "pulumi:pulumi:Stack"


class ProgramUnavailableError(RuntimeError):
    """The platform program (``gpuscale.program.deploy``) is not part of this installation."""


@dataclass(frozen=True)
class SynthResult:
    """What a program would create: rendered resources (plain JSON data), stack outputs and warnings."""

    project: str
    stack: str
    region: str
    resources: tuple[dict[str, Any], ...]
    """One entry per resource, in tree order (see the module docstring for the fields)."""
    outputs: dict[str, Any] = field(default_factory=dict)
    """Stack outputs exported with ``pulumi.export``, secrets redacted."""
    warnings: tuple[str, ...] = ()
    """Things a reviewer should know (e.g. a Kubernetes object without ``metadata.name``)."""

    def kubernetes_objects(self) -> list[tuple[str, dict[str, Any]]]:
        """``(resource key, object)`` for every Kubernetes object, in resource order."""
        return [(r["key"], r["inputs"]) for r in self.resources if is_kubernetes_object(r["type"], r["custom"])]

    def charts(self) -> list[dict[str, Any]]:
        """A summary of every Helm chart, sorted by resource key."""
        rows = [_chart_summary(r) for r in self.resources if r["type"].startswith(_HELM_PREFIX)]
        return sorted(rows, key=lambda c: str(c["resource"]))

    def files(self) -> dict[str, str]:
        """Relative path -> file content of the whole synth output."""
        doc = {
            "format": FORMAT,
            "project": self.project,
            "stack": self.stack,
            "region": self.region,
            "resources": list(self.resources),
            "outputs": self.outputs,
            "warnings": list(self.warnings),
        }
        out = {RESOURCES_FILE: json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"}
        out[CHARTS_FILE] = _dump_yaml({"charts": self.charts()})
        by_file: dict[str, list[tuple[tuple[str, str, str], str]]] = defaultdict(list)
        parents = {r["key"]: r["parent"] for r in self.resources}
        for key, obj in self.kubernetes_objects():
            meta = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
            sort_key = (str(meta.get("namespace", "")), str(meta.get("name", "")), key)
            source = f"# Source: {key}" + (f" (in {parents[key]})" if parents.get(key) else "")
            # a secret top-level field cannot be shown; leave it out so the manifest stays a valid object
            redacted = sorted(k for k, v in obj.items() if v == REDACTED)
            if redacted:
                source += f"\n# Redacted (secret): {', '.join(redacted)}"
                obj = {k: v for k, v in obj.items() if k not in redacted}
            by_file[manifest_file_name(obj)].append((sort_key, f"{source}\n{_dump_yaml(obj)}"))
        for name in sorted(by_file):
            docs = [text for _, text in sorted(by_file[name])]
            out[f"{MANIFESTS_DIR}/{name}"] = "---\n".join(docs)
        return out

    def write(self, out_dir: Path) -> list[Path]:
        """Write the synth output to ``out_dir``, replacing a previous synth there; returns the files written."""
        out_dir.mkdir(parents=True, exist_ok=True)
        manifests = out_dir / MANIFESTS_DIR
        if manifests.is_dir():
            shutil.rmtree(manifests)  # a kind that disappeared must not linger as a stale file
        written: list[Path] = []
        for rel, text in self.files().items():
            path = out_dir / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            written.append(path)
        return written


def synthesize(
    program: Callable[[], object], *, region: str, stack: str, project: str = "gpuscale"
) -> SynthResult:
    """Run ``program`` under deterministic mocks and render everything it registers and exports.

    Exceptions raised by the program propagate unchanged (the CLI turns spec problems into exit code 2).
    """
    def run() -> None:
        # The mock runtime keeps one root Stack across runs: forget exports of an earlier program.
        pulumi_runtime.root_stack_outputs().clear()
        program()

    records = run_program(run, project=project, stack=stack, region=region)
    exported = pulumi_runtime.root_stack_outputs()
    outputs = clean_value(pulumi_runtime.resolve_plain(dict(exported)))
    exported.clear()
    return render_records(records, project=project, stack=stack, region=region, outputs=outputs)


def synth_spec(spec: Any, *, stack: str | None = None) -> SynthResult:
    """Synthesize the platform program (``gpuscale.program.deploy``) for one ``PlatformSpec``."""
    try:
        from gpuscale.program import deploy  # lazy: the composition root imports every component
    except ModuleNotFoundError as exc:
        if exc.name != "gpuscale.program":
            raise
        raise ProgramUnavailableError(
            "gpuscale.program (the platform program with deploy(spec)) is not in this installation; "
            "synthesize(program, region=..., stack=...) still renders any program function"
        ) from None
    env = spec.environment
    return synthesize(lambda: deploy(spec), region=env.aws_region, stack=stack or env.name)


def render_records(
    records: Iterable[RecordedResource],
    *,
    project: str,
    stack: str,
    region: str,
    outputs: Mapping[str, Any] | None = None,
) -> SynthResult:
    """Turn mock registrations into a ``SynthResult`` (pure: same records, same result)."""
    recs = [r for r in records if r.type != _STACK_TYPE]
    by_urn = {r.urn: r for r in recs}
    keys = _resource_keys(recs, by_urn)
    children: dict[str, list[RecordedResource]] = defaultdict(list)
    for r in recs:
        children[r.parent_urn if r.parent_urn in by_urn else ""].append(r)

    ordered: list[dict[str, Any]] = []
    warnings: list[str] = []

    def visit(parent: str) -> None:
        for r in sorted(children.get(parent, []), key=lambda x: (x.type, x.name, x.urn)):
            entry = _entry(r, keys, by_urn)
            ordered.append(entry)
            warnings.extend(_warnings(entry))
            visit(r.urn)

    visit("")
    clean_outputs = clean_value(dict(outputs or {}))
    return SynthResult(
        project=project,
        stack=stack,
        region=region,
        resources=tuple(ordered),
        outputs=clean_outputs if isinstance(clean_outputs, dict) else {},
        warnings=tuple(warnings),
    )


def clean_value(value: Any) -> Any:
    """Plain, deterministic JSON data: secrets redacted, unknowns marked, integral floats as ints.

    The Pulumi wire format carries every number as a double; ``replicas: 3.0`` would fail strict Kubernetes
    validation and read oddly in a diff, so whole numbers come back as ints.
    """
    from pulumi.output import Unknown

    if isinstance(value, Mapping):
        if value.get(_SECRET_SIG_KEY) == _SECRET_SIG:
            return REDACTED
        return {str(k): clean_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_value(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, str):
        return UNKNOWN if value == _UNKNOWN_WIRE else value
    if isinstance(value, Unknown):
        return UNKNOWN
    return _asset(value)


def _asset(value: Any) -> Any:
    """An asset or archive as what locates it; resource references and anything else as a stable label, never a
    repr with a memory address."""
    import pulumi

    if isinstance(value, pulumi.FileAsset | pulumi.FileArchive):
        return {"path": str(value.path)}
    if isinstance(value, pulumi.StringAsset):
        return {"text": str(value.text)}
    if isinstance(value, pulumi.RemoteAsset | pulumi.RemoteArchive):
        return {"uri": str(value.uri)}
    return f"[{type(value).__name__}]"


def is_kubernetes_object(type_token: str, custom: bool) -> bool:
    """A Kubernetes object the cluster will hold (not a provider, a Helm chart or a component like ConfigGroup)."""
    return custom and type_token.startswith("kubernetes:") and not type_token.startswith(_HELM_PREFIX)


def manifest_file_name(obj: Mapping[str, Any]) -> str:
    """``apps_v1_Deployment.yaml``; the core group is ``core``."""
    api_version = str(obj.get("apiVersion", "unknown/v0"))
    group, _, version = api_version.rpartition("/")
    return f"{group or 'core'}_{version}_{obj.get('kind', 'Unknown')}.yaml".replace("/", "_")


def parse_urn(urn: str) -> tuple[str, str]:
    """``(type, name)`` of a URN ``urn:pulumi:<stack>::<project>::<qualified type>::<name>``."""
    parts = urn.split("::", 3)
    if len(parts) < 4:
        return "", urn
    return parts[2].split("$")[-1], parts[3]


def _resource_keys(recs: list[RecordedResource], by_urn: dict[str, RecordedResource]) -> dict[str, str]:
    """``type::name`` per URN; the parent chain is appended only where that pair is not unique."""
    plain = {r.urn: f"{r.type}::{r.name}" for r in recs}
    counts = Counter(plain.values())
    keys: dict[str, str] = {}
    for r in recs:
        key = plain[r.urn]
        if counts[key] > 1:
            chain, parent = [], by_urn.get(r.parent_urn)
            while parent is not None:
                chain.append(plain[parent.urn])
                parent = by_urn.get(parent.parent_urn)
            key = f"{key}@{'/'.join(chain) or 'stack'}"
        keys[r.urn] = key
    return keys


def _entry(r: RecordedResource, keys: dict[str, str], by_urn: dict[str, RecordedResource]) -> dict[str, Any]:
    provider = None
    if r.provider:
        prov_urn = r.provider.rsplit("::", 1)[0]
        provider = keys.get(prov_urn) or "::".join(parse_urn(prov_urn))
    inputs = clean_value(r.inputs)
    if is_kubernetes_object(r.type, r.custom) and isinstance(inputs, dict):
        inputs = _with_type_meta(r.type, inputs)
    return {
        "key": keys[r.urn],
        "type": r.type,
        "name": r.name,
        "custom": r.custom,
        "parent": keys.get(r.parent_urn),
        "provider": provider,
        "dependsOn": sorted({keys[d] for d in r.dependencies if d in keys}),
        "inputs": inputs,
    }


def _with_type_meta(type_token: str, obj: dict[str, Any]) -> dict[str, Any]:
    """Typed resources always send apiVersion/kind; fill them from the type token if a program did not."""
    _, api, kind = type_token.split(":", 2)
    group, _, version = api.rpartition("/")
    return {"apiVersion": version if group == "core" else api, "kind": kind, **obj}


def _warnings(entry: dict[str, Any]) -> list[str]:
    if not is_kubernetes_object(entry["type"], entry["custom"]):
        return []
    meta = entry["inputs"].get("metadata")
    if not isinstance(meta, dict) or not meta.get("name"):
        return [
            f"{entry['key']}: no metadata.name; Pulumi auto-names it with a random suffix, so its real name "
            "differs from this synth and changes on every replacement. Set metadata.name explicitly"
        ]
    return []


def _chart_summary(entry: dict[str, Any]) -> dict[str, Any]:
    inputs = entry["inputs"] if isinstance(entry["inputs"], dict) else {}
    repo_opts = inputs.get("repositoryOpts")
    return {
        "resource": entry["key"],
        "parent": entry["parent"],
        "release": inputs.get("name"),
        "chart": inputs.get("chart"),
        "version": inputs.get("version"),
        "repository": repo_opts.get("repo") if isinstance(repo_opts, dict) else repo_opts,
        "namespace": inputs.get("namespace"),
        "values": inputs.get("values", {}),
    }


class _Dumper(yaml.SafeDumper):
    """Safe YAML with multi-line strings as literal blocks (readable scripts and configs in review)."""


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str_representer)


def _dump_yaml(data: Any) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=True, default_flow_style=False, allow_unicode=True, width=4096)
