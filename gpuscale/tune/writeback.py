"""Write tuned values into a stack file by editing its text in place: every byte not tuned is kept.

Only the keys ``gpuscale tune`` owns change: ``models[i].autoscaling.<role>.{target_utilisation, burst_mode, slo_guard,
min_replicas, max_replicas, scale_down_stabilization_s, warm_schedule}``, ``models[i].autoscaling.tuned_on`` and the
model's pool's ``consolidate_after``. The file is parsed by the stack reader (``stackfile.parse_stack_bytes``: the same
bounds, the node tree with character positions); a value that changes is replaced where it is written, a key that is
missing is inserted after the last entry of its mapping (and its comments), in the file's own line endings and
indentation; a byte-order mark stays. A value shared with another place through a YAML anchor is never edited
silently: an alias of a scalar is replaced by the value (a warning says so), a shared mapping or list is refused with
both paths. The result must construct exactly the original document with the tuned values in place (anything else is
refused, not written), and is validated like any stack file before the caller writes it.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpuscale.problems import NAMESPACE, Refusal
from gpuscale.spec.topology import GpuNodePoolSpec
from gpuscale.stackfile import (
    StackConfigError,
    StackText,
    _config_path,
    _resolve_trace_paths,
    parse_stack_bytes,
    parse_stack_text,
    validate_config,
)
from gpuscale.tune.params import TuneParams

_DELETE = object()
"""An edit that removes the key."""
_MERGE = "tag:yaml.org,2002:merge"
_DEFAULT_CONSOLIDATE_AFTER = GpuNodePoolSpec.model_fields["consolidate_after"].default
"""What a pool without ``consolidate_after`` runs with (the spec's default)."""


class WritebackError(Refusal):
    """The stack file does not have the shape the tuned values go into (names the path)."""


@dataclass
class _Splice:
    start: int
    end: int
    text: str


@dataclass
class Writeback:
    """The new bytes of the stack file and what the user should know about them."""

    data: bytes
    warnings: list[str] = field(default_factory=list)


def _value_text(value: Any) -> str:
    """One YAML scalar or flow collection as PyYAML emits it (quoted where the plain form would read differently)."""
    out = yaml.dump([value], Dumper=_IndentedDumper, default_flow_style=True, width=1 << 30, allow_unicode=True)
    return out.strip()[1:-1]


class _Flow(dict[str, Any]):
    """A mapping written in flow style (``{timezone: UTC, start: ...}``), as the shipped stacks write warm windows."""


class _IndentedDumper(yaml.SafeDumper):
    """Block style with list dashes indented under their key when the file does so."""

    dash_offset = 2

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, indentless and self.dash_offset == 0)


_IndentedDumper.add_representer(
    _Flow, lambda d, v: d.represent_mapping("tag:yaml.org,2002:map", dict(v), flow_style=True),
)


def _block_text(entries: dict[str, Any], indent: int, dash_offset: int, newline: str) -> str:
    """``entries`` as block-style lines at ``indent`` columns (flow style for the innermost mappings, as the shipped
    stacks write them), in the file's line endings."""
    dumper = type("_Dumper", (_IndentedDumper,), {"dash_offset": dash_offset})
    body = yaml.dump(entries, Dumper=dumper, sort_keys=False, default_flow_style=False, width=1 << 30,
                     allow_unicode=True, indent=2)
    return "".join(" " * indent + line + newline for line in body.splitlines())


def _dash_offset(text: str) -> int:
    """How far the file indents a list's dash under its key (0 or 2 in practice)."""
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    for key, item in itertools.pairwise(lines):
        if key.rstrip().endswith(":") and item.lstrip().startswith("- "):
            return max(len(item) - len(item.lstrip()) - (len(key) - len(key.lstrip())), 0)
    return 2


def _path_text(path: tuple[str | int, ...]) -> str:
    """A YAML path as refusals write it (``models[1].autoscaling``)."""
    return _config_path(path)


class _Editor:
    def __init__(self, parsed: StackText) -> None:
        self.p = parsed
        self.text = parsed.text
        self.newline = "\r\n" if "\r\n" in self.text else "\n"
        self.dash = _dash_offset(self.text)
        self.splices: list[_Splice] = []
        self.warnings: list[str] = []
        self.paths: dict[int, list[tuple[str | int, ...]]] = {}
        if parsed.root is not None:
            self._index(parsed.root, ())

    def _index(self, node: yaml.Node, path: tuple[str | int, ...]) -> None:
        """Every path each node is reached at (the tree is bounded by the reader, aliases expanded)."""
        self.paths.setdefault(id(node), []).append(path)
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.tag != _MERGE:
                    self._index(v, (*path, str(k.value)))
        elif isinstance(node, yaml.SequenceNode):
            for i, v in enumerate(node.value):
                self._index(v, (*path, i))

    def shared(self, node: yaml.Node, path: tuple[str | int, ...]) -> list[tuple[str | int, ...]]:
        return [p for p in self.paths.get(id(node), []) if p != path]

    def mapping(self, node: yaml.Node, path: tuple[str | int, ...]) -> yaml.MappingNode:
        if not isinstance(node, yaml.MappingNode):
            raise WritebackError(f"{_path_text(path)} is not a mapping in the stack file")
        others = self.shared(node, path)
        if others:
            raise WritebackError(
                f"{_path_text(path)} is the same YAML node as {_path_text(others[0])} (an anchor and alias): tuning one "
                "would tune both; write the mapping out under the model to tune (or tune the other model)"
            )
        return node

    @staticmethod
    def entry(node: yaml.MappingNode, key: str) -> tuple[yaml.Node, yaml.Node] | None:
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.tag != _MERGE and k.value == key:
                return k, v
        return None

    @staticmethod
    def merged(node: yaml.MappingNode, key: str) -> bool:
        """Whether ``key`` comes into ``node`` through a merge key (``<<: *defaults``)."""
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.tag == _MERGE:
                sources = v.value if isinstance(v, yaml.SequenceNode) else [v]
                if any(isinstance(s, yaml.MappingNode) and (_Editor.entry(s, key) or _Editor.merged(s, key)) for s in sources):
                    return True
        return False

    # --- positions -----------------------------------------------------------------------------------------------

    def _span(self, parent: yaml.Node, step: str | int, node: yaml.Node) -> tuple[int, int]:
        """Where the value at ``parent[step]`` is written: the alias when it is one, else the node."""
        site = self.p.alias_sites.get((id(parent), step))
        return site if site is not None else (node.start_mark.index, node.end_mark.index)

    def _last_end(self, parent: yaml.Node, step: str | int, node: yaml.Node) -> int:
        """End of the last character written for the value at ``parent[step]``."""
        site = self.p.alias_sites.get((id(parent), step))
        if site is not None:
            return site[1]
        if isinstance(node, yaml.MappingNode) and not node.flow_style and node.value:
            k, v = node.value[-1]
            return self._last_end(node, str(k.value), v)
        if isinstance(node, yaml.SequenceNode) and not node.flow_style and node.value:
            return self._last_end(node, len(node.value) - 1, node.value[-1])
        return int(node.end_mark.index)

    def _line_end(self, index: int) -> int:
        """Just past the line break of the line holding ``index`` (the end of the text when it has none)."""
        nl = self.text.find("\n", index)
        return len(self.text) if nl < 0 else nl + 1

    def _line_start(self, index: int) -> int:
        return self.text.rfind("\n", 0, index) + 1

    # --- edits ---------------------------------------------------------------------------------------------------

    def set(self, node: yaml.MappingNode, path: tuple[str | int, ...], key: str, value: Any) -> None:
        """``node[key] = value`` (``_DELETE`` removes it), in place when the key is written there."""
        found = self.entry(node, key)
        here = (*path, key)
        if found is None:
            if value is _DELETE:
                return
            if self.merged(node, key):
                self.warnings.append(
                    f"{_path_text(here)} came from a merge key (<<) shared with other mappings; the tuned value is "
                    "written under this model only"
                )
            self._insert(node, {key: value})
            return
        k, v = found
        if value is not _DELETE and isinstance(v, yaml.ScalarNode):
            current = self.scalar(v)
            if current == value and isinstance(current, bool) == isinstance(value, bool):
                return
        site = self.p.alias_sites.get((id(node), key))
        others = self.shared(v, here)
        if others and site is None:
            raise WritebackError(
                f"{_path_text(here)} carries an anchor that {_path_text(others[0])} refers to: tuning it would change "
                "both; write the value out at the other place (or remove the anchor)"
            )
        if site is not None:
            self.warnings.append(
                f"{_path_text(here)} was an alias of the value at {_path_text(others[0]) if others else 'its anchor'}; "
                "it now holds its own tuned value (the anchor's other uses are unchanged)"
            )
        if value is _DELETE:
            self._delete(node, k, v, key)
        elif node.flow_style or isinstance(value, str | int | float | bool) or (
            isinstance(v, yaml.ScalarNode) and not isinstance(value, list)
        ):
            start, end = self._span(node, key, v)
            lead = " " if start == end and self.text[start - 1:start] == ":" else ""  # `key:` with no value
            self.splices.append(_Splice(start, end, lead + _value_text(value)))
        else:  # a block entry written anew at the same place and indentation
            start = self._line_start(k.start_mark.index)
            end = self._line_end(max(self._last_end(node, key, v) - 1, k.start_mark.index))
            self.splices.append(_Splice(start, end, _block_text({key: value}, k.start_mark.column, self.dash, self.newline)))

    @staticmethod
    def scalar(node: yaml.ScalarNode) -> Any:
        """The value a scalar node constructs to (the reader's resolver: ``4`` is an int, ``1h`` a string)."""
        return yaml.safe_load(yaml.serialize(node))

    def _delete(self, node: yaml.MappingNode, k: yaml.Node, v: yaml.Node, key: str) -> None:
        if node.flow_style:
            start, end = k.start_mark.index, self._span(node, key, v)[1]
            rest = self.text[end:]
            stripped = rest.lstrip(" ")
            if stripped.startswith(","):
                end += len(rest) - len(stripped) + 1
                end += len(self.text[end:]) - len(self.text[end:].lstrip(" "))
            else:
                before = self.text[:start].rstrip(" ")
                if before.endswith(","):
                    start = len(before) - 1
            self.splices.append(_Splice(start, end, ""))
            return
        start = self._line_start(k.start_mark.index)
        end = self._line_end(max(self._last_end(node, key, v) - 1, k.start_mark.index))
        self.splices.append(_Splice(start, end, ""))

    def _insert(self, node: yaml.MappingNode, entries: dict[str, Any]) -> None:
        if node.flow_style or not node.value:
            if not node.flow_style:
                raise WritebackError("an empty block mapping cannot take new keys in place")
            close = node.end_mark.index - 1  # the closing brace
            body = _value_text(entries)[1:-1]
            sep = ", " if node.value else ""
            self.splices.append(_Splice(close, close, sep + body))
            return
        first_key = node.value[0][0]
        column = first_key.start_mark.column
        k, v = node.value[-1]
        at = self._line_end(max(self._last_end(node, str(k.value), v) - 1, k.start_mark.index))
        # comment lines indented under this mapping belong to it: the new keys go after them
        while at < len(self.text):
            line = self.text[at:self._line_end(at)]
            stripped = line.lstrip(" ")
            if not stripped.startswith("#") or len(line) - len(stripped) < column:
                break
            at = self._line_end(at)
        lead = self.newline if at == len(self.text) and self.text and not self.text.endswith("\n") else ""
        self.splices.append(_Splice(at, at, lead + _block_text(entries, column, self.dash, self.newline)))

    def result(self) -> str:
        """The text with every splice applied; insertions at one place keep the order they were made in."""
        out = self.text
        order = sorted(enumerate(self.splices), key=lambda e: (e[1].start, e[1].end, e[0]), reverse=True)
        for _, s in order:
            out = out[: s.start] + s.text + out[s.end:]
        return out


def _child(editor: _Editor, node: yaml.MappingNode, path: tuple[str | int, ...], key: str) -> yaml.MappingNode | None:
    """The mapping at ``node[key]``; None when the key is missing or empty (the caller writes a new one)."""
    found = editor.entry(node, key)
    if found is None:
        if editor.merged(node, key):
            raise WritebackError(
                f"{_path_text((*path, key))} comes from a merge key (<<): tuning it here would replace the whole shared "
                "mapping; write it out under the model"
            )
        return None
    if isinstance(found[1], yaml.ScalarNode) and found[1].tag == "tag:yaml.org,2002:null":
        return None
    return editor.mapping(found[1], (*path, key))


def _edits(params: TuneParams, *, keda: bool, tuned_on: str) -> tuple[dict[str, dict[str, Any]], str]:
    roles: dict[str, dict[str, Any]] = {}
    for role, p in params.roles.items():
        values: dict[str, Any] = {
            # None: the target is derived from the SLO (sizing.derived_target), which a stated utilisation would replace
            "target_utilisation": p.target_utilisation if p.target_utilisation is not None else _DELETE, "burst_mode": p.burst_mode, "min_replicas": p.min_replicas,
            "max_replicas": p.max_replicas, "scale_down_stabilization_s": p.scale_down_stabilization_s,
        }
        if keda:
            values["slo_guard"] = p.slo_guard
        values["warm_schedule"] = (
            [_Flow(w.model_dump(mode="json")) for w in p.warm_schedule] if keda and p.warm_schedule else _DELETE
        )
        roles[role] = values
    return roles, tuned_on


def _get(node: yaml.Node | None, key: str) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        found = _Editor.entry(node, key)
        return found[1] if found else None
    return None


def updated(data: bytes, model_name: str, params: TuneParams, *, keda: bool, tuned_on: str, source: str = "stack file") -> Writeback:
    """The stack file ``data`` with ``params`` written in; every byte outside the tuned values kept."""
    parsed = parse_stack_bytes(data, source)
    editor = _Editor(parsed)
    config = _get(parsed.root, "config")
    if not isinstance(config, yaml.MappingNode):
        raise WritebackError("the stack file has no 'config:' mapping")
    models = _get(config, f"{NAMESPACE}:models")
    if not isinstance(models, yaml.SequenceNode):
        raise WritebackError(f"config.{NAMESPACE}:models is not a list in the stack file")
    index = next((i for i, m in enumerate(models.value)
                  if isinstance(m, yaml.MappingNode) and isinstance(n := _get(m, "name"), yaml.ScalarNode)
                  and n.value == model_name), None)
    if index is None:
        raise WritebackError(f"no model named {model_name!r} under config.{NAMESPACE}:models")
    base: tuple[str | int, ...] = ("config", f"{NAMESPACE}:models", index)
    model = editor.mapping(models.value[index], base)
    roles, tuned_on = _edits(params, keda=keda, tuned_on=tuned_on)
    auto_path = (*base, "autoscaling")
    auto = _child(editor, model, base, "autoscaling")
    if auto is None:
        new_auto: dict[str, Any] = {role: {k: v for k, v in values.items() if v is not _DELETE} for role, values in roles.items()}
        editor.set(model, base, "autoscaling", {**new_auto, "tuned_on": tuned_on})
    else:
        for role, values in roles.items():
            entry = _child(editor, auto, auto_path, role)
            if entry is None:
                editor.set(auto, auto_path, role, {k: v for k, v in values.items() if v is not _DELETE})
                continue
            for key, value in values.items():
                editor.set(entry, (*auto_path, role), key, value)
        editor.set(auto, auto_path, "tuned_on", tuned_on)
    _set_pool(editor, config, model, params.consolidate_after)
    text = editor.result()
    _same_but_tuned(parsed.doc, parse_stack_text(text.encode("utf-8"), source), model_name, roles, tuned_on,
                    params.consolidate_after)
    return Writeback((b"\xef\xbb\xbf" if parsed.bom else b"") + text.encode("utf-8"), editor.warnings)


def _set_pool(editor: _Editor, config: yaml.MappingNode, model: yaml.MappingNode, consolidate_after: str) -> None:
    pool_name = _get(model, "node_pool")
    topology = _get(config, f"{NAMESPACE}:topology")
    pools = _get(topology, "gpu_pools")
    items = pools.value if isinstance(pools, yaml.SequenceNode) else []
    index = next((i for i, p in enumerate(items) if isinstance(pool_name, yaml.ScalarNode)
                  and isinstance(n := _get(p, "name"), yaml.ScalarNode) and n.value == pool_name.value), None)
    if index is None:
        name = pool_name.value if isinstance(pool_name, yaml.ScalarNode) else None
        raise WritebackError(f"no GPU pool named {name!r} under config.{NAMESPACE}:topology.gpu_pools")
    path: tuple[str | int, ...] = ("config", f"{NAMESPACE}:topology", "gpu_pools", index)
    pool = editor.mapping(items[index], path)
    current = _get(pool, "consolidate_after")
    stated = editor.scalar(current) if isinstance(current, yaml.ScalarNode) else _DEFAULT_CONSOLIDATE_AFTER
    if stated != consolidate_after:
        editor.set(pool, path, "consolidate_after", consolidate_after)


def _same_but_tuned(before: Any, after: Any, model_name: str, roles: dict[str, dict[str, Any]], tuned_on: str,
                    consolidate_after: str) -> None:
    """The edited text must construct the original document with exactly the tuned values changed."""
    expected = copy.deepcopy(before)
    config = expected["config"]
    model = next(m for m in config[f"{NAMESPACE}:models"] if isinstance(m, dict) and m.get("name") == model_name)
    auto = model.get("autoscaling")
    if not isinstance(auto, dict):
        auto = model["autoscaling"] = {}
    for role, values in roles.items():
        entry = auto.get(role)
        if not isinstance(entry, dict):
            entry = auto[role] = {}
        for key, value in values.items():
            if value is _DELETE:
                entry.pop(key, None)
            else:
                entry[key] = value
    auto["tuned_on"] = tuned_on
    pool = next(p for p in config[f"{NAMESPACE}:topology"]["gpu_pools"] if p.get("name") == model.get("node_pool"))
    if pool.get("consolidate_after", _DEFAULT_CONSOLIDATE_AFTER) != consolidate_after:
        pool["consolidate_after"] = consolidate_after
    if after != expected:
        raise WritebackError("editing the file in place would change more than the tuned values (a layout the in-place "
                             "writer does not handle); nothing written: " + _first_difference(expected, after))


def _first_difference(a: Any, b: Any, path: str = "") -> str:
    for where, x, y in _walk(a, b, path):
        return f"{where or 'the document'}: expected {x!r}, got {y!r}"
    return "no difference"


def _walk(a: Any, b: Any, path: str) -> Iterator[tuple[str, Any, Any]]:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in dict.fromkeys([*a, *b]):
            yield from _walk(a.get(k), b.get(k), f"{path}.{k}" if path else str(k))
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            yield from _walk(x, y, f"{path}[{i}]")
    elif a != b:
        yield path, a, b


def updated_text(text: str, model_name: str, params: TuneParams, *, keda: bool, tuned_on: str) -> str:
    """``updated`` on text (tests and callers that hold the text)."""
    return updated(text.encode("utf-8"), model_name, params, keda=keda, tuned_on=tuned_on).data.decode("utf-8-sig")


def check_text(text: str | bytes, path: Path) -> None:
    """Refuse (``StackConfigError``) text that is not a valid stack file, exactly as ``gpuscale validate`` would."""
    doc = parse_stack_text(text.encode("utf-8") if isinstance(text, str) else text, str(path))
    config = doc.get("config") if isinstance(doc, dict) else None
    if not isinstance(config, dict):
        raise StackConfigError(str(path), ["'config:' must be a mapping"])
    raw = {k.split(":", 1)[1]: v for k, v in config.items() if str(k).startswith(f"{NAMESPACE}:")}
    validate_config(_resolve_trace_paths(raw, path.parent), str(path))
