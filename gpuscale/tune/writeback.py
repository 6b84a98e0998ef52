"""Write tuned values into a stack file, keeping its comments, key order and layout (ruamel.yaml round trip).

Only the keys ``gpuscale tune`` owns change: ``models[i].autoscaling.<role>.{target_utilisation, burst_mode, slo_guard,
min_replicas, max_replicas, scale_down_stabilization_s, warm_schedule}``, ``models[i].autoscaling.tuned_on`` and the
model's pool's ``consolidate_after``. The new text is read back through the same validation as any stack file before
the caller writes it, so a tuned file is always one ``gpuscale validate`` accepts.
"""

from __future__ import annotations

import io
import itertools
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from gpuscale.problems import NAMESPACE
from gpuscale.stackfile import StackConfigError, _resolve_trace_paths, parse_stack_text, validate_config
from gpuscale.tune.params import TuneParams


class WritebackError(ValueError):
    """The stack file does not have the shape the tuned values go into (names the path)."""


def _yaml() -> YAML:
    y = YAML()  # round-trip
    y.preserve_quotes = True
    y.width = 4096
    y.indent(mapping=2, sequence=4, offset=2)
    return y


def _child_map(parent: CommentedMap, key: str, where: str) -> CommentedMap:
    if key not in parent or parent[key] is None:
        parent[key] = CommentedMap()
    value = parent[key]
    if not isinstance(value, CommentedMap):
        raise WritebackError(f"{where}.{key} is not a mapping in the stack file")
    return value


def _flow(d: dict[str, Any]) -> CommentedMap:
    m = CommentedMap(d)
    m.fa.set_flow_style()
    return m


def _sequence_offset(text: str) -> int:
    """How far the file indents a list's dash under its key (0 or 2 in practice), so new lists line up with old."""
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    for key, item in itertools.pairwise(lines):
        if key.rstrip().endswith(":") and item.lstrip().startswith("- "):
            return max(len(item) - len(item.lstrip()) - (len(key) - len(key.lstrip())), 0)
    return 2


def updated_text(text: str, model_name: str, params: TuneParams, *, keda: bool, tuned_on: str) -> str:
    """The stack file's text with ``params`` written in."""
    y = _yaml()
    offset = _sequence_offset(text)
    y.indent(mapping=2, sequence=offset + 2, offset=offset)
    doc = y.load(text)
    if not isinstance(doc, CommentedMap) or not isinstance(doc.get("config"), CommentedMap):
        raise WritebackError("the stack file has no 'config:' mapping")
    config = doc["config"]
    models = config.get(f"{NAMESPACE}:models")
    if not isinstance(models, CommentedSeq):
        raise WritebackError(f"config.{NAMESPACE}:models is not a list in the stack file")
    index = next((i for i, m in enumerate(models) if isinstance(m, CommentedMap) and m.get("name") == model_name), None)
    if index is None:
        raise WritebackError(f"no model named {model_name!r} under config.{NAMESPACE}:models")
    model = models[index]
    where = f"models[{index}]"
    auto = _child_map(model, "autoscaling", where)
    for role, p in params.roles.items():
        entry = _child_map(auto, role, f"{where}.autoscaling")
        values: dict[str, Any] = {
            "target_utilisation": p.target_utilisation, "burst_mode": p.burst_mode, "min_replicas": p.min_replicas,
            "max_replicas": p.max_replicas, "scale_down_stabilization_s": p.scale_down_stabilization_s,
        }
        if keda:
            values["slo_guard"] = p.slo_guard
        for k, v in values.items():
            entry[k] = v
        if keda and p.warm_schedule:
            entry["warm_schedule"] = CommentedSeq([_flow(w.model_dump(mode="json")) for w in p.warm_schedule])
        elif "warm_schedule" in entry:
            del entry["warm_schedule"]
    auto["tuned_on"] = tuned_on
    pool_name = model.get("node_pool")
    topology = config.get(f"{NAMESPACE}:topology")
    pools = topology.get("gpu_pools") if isinstance(topology, CommentedMap) else None
    pool = next((p for p in pools or [] if isinstance(p, CommentedMap) and p.get("name") == pool_name), None)
    if pool is None:
        raise WritebackError(f"no GPU pool named {pool_name!r} under config.{NAMESPACE}:topology.gpu_pools")
    if pool.get("consolidate_after", "1h") != params.consolidate_after:
        pool["consolidate_after"] = params.consolidate_after
    out = io.StringIO()
    y.dump(doc, out)
    return out.getvalue()


def check_text(text: str, path: Path) -> None:
    """Refuse (``StackConfigError``) text that is not a valid stack file, exactly as ``gpuscale validate`` would."""
    doc = parse_stack_text(text.encode("utf-8"), str(path))
    config = doc.get("config") if isinstance(doc, dict) else None
    if not isinstance(config, dict):
        raise StackConfigError(str(path), ["'config:' must be a mapping"])
    raw = {k.split(":", 1)[1]: v for k, v in config.items() if str(k).startswith(f"{NAMESPACE}:")}
    validate_config(_resolve_trace_paths(raw, path.parent), str(path))
