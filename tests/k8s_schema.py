"""Validate emitted Kubernetes objects the way ../shared/tools/crdcheck.py does (the standard synth is held to).

Custom resources: the upstream CRD's openAPIV3Schema (defaults applied) plus evaluable CEL rules, and unknown
fields rejected (Kubernetes would prune them silently). Core kinds: ``kubernetes-validate`` in strict mode.
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import types
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema
import yaml

from tests.conftest import SHARED

K8S_VERSION = "1.33"


@functools.cache
def crdcheck() -> ModuleType:
    path = SHARED / "tools" / "crdcheck.py"
    spec = importlib.util.spec_from_file_location("shared_crdcheck", path)
    assert spec and spec.loader, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def _crds() -> dict[tuple[str, str], tuple[dict[str, Any], str]]:
    cc = crdcheck()
    # crdcheck parses ~6 MB of CRDs with the pure-Python loader (20 s and more per test worker); libyaml's loader
    # builds the same documents from the same safe subset in a tenth of the time
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    cc.yaml = types.SimpleNamespace(safe_load_all=lambda stream: yaml.load_all(stream, Loader=loader))
    table: dict[tuple[str, str], tuple[dict[str, Any], str]] = cc.load_crds()
    table.update(_repo_crds(loader))
    return table


REPO_CRDS = Path(__file__).parent / "crds"
"""CRDs the team's ../shared/crds lacks, copied from upstream with a provenance header (``tests/crds/README.md``)."""


def _repo_crds(loader: Any) -> dict[tuple[str, str], tuple[dict[str, Any], str]]:
    """Schemas of ``REPO_CRDS``, keyed as crdcheck keys its own."""
    table: dict[tuple[str, str], tuple[dict[str, Any], str]] = {}
    for path in sorted(REPO_CRDS.rglob("*.yaml")):
        for doc in yaml.load_all(path.read_text(encoding="utf-8"), Loader=loader):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            group, kind = doc["spec"]["group"], doc["spec"]["names"]["kind"]
            for v in doc["spec"]["versions"]:
                schema = (v.get("schema") or {}).get("openAPIV3Schema")
                if schema:
                    table[(f"{group}/{v['name']}", kind)] = (schema, str(path.relative_to(REPO_CRDS)))
    return table


def _strict(schema: Any) -> Any:
    """JSON Schema with additionalProperties: false wherever the CRD lists properties and keeps no unknown fields."""
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items()}
    if "properties" in schema and "additionalProperties" not in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


def validate_object(obj: dict[str, Any], k8s_version: str = K8S_VERSION) -> list[str]:
    """Problems with one object; [] when valid. Raises if the kind has no schema at all."""
    key = (obj["apiVersion"], obj["kind"])
    crds = _crds()
    if key in crds:
        schema, _src = crds[key]
        inst = copy.deepcopy(obj)
        cc = crdcheck()
        cc.apply_defaults(schema, inst)
        js = cc.to_jsonschema(_strict(schema))
        js.get("properties", {}).pop("status", None)
        js.setdefault("properties", {}).update({"apiVersion": {"type": "string"}, "kind": {"type": "string"}})
        errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}" for e in jsonschema.Draft7Validator(js).iter_errors(inst)]
        cel = cc.Cel()
        cel.walk(schema, inst)
        return errors + cel.failures
    group = obj["apiVersion"].split("/")[0]
    if "." not in group or group.endswith("k8s.io"):
        import kubernetes_validate

        try:
            kubernetes_validate.validate(obj, k8s_version, strict=True)
        except Exception as exc:  # ValidationError or InvalidSchemaError: report, the caller asserts
            return [str(exc).splitlines()[0][:300]]
        return []
    raise AssertionError(f"no schema for {obj['apiVersion']} {obj['kind']}: add its CRD or do not emit it")


def assert_valid(*objs: dict[str, Any]) -> None:
    problems = {f"{o['kind']}/{o.get('metadata', {}).get('name', '?')}": p for o in objs if (p := validate_object(o))}
    assert not problems, problems
