"""The only reader of stack configuration: Pulumi config for ``pulumi up``, plain YAML for the CLI.

Both paths build the same dict of ``gpuscale:<key>`` objects and validate it with ``PlatformSpec`` (strictly: a YAML
``true`` or ``"4"`` is never a number), so a stack file that ``gpuscale validate`` accepts is exactly what the Pulumi
program deploys. A stack file is read as UTF-8 YAML with every key once; every refusal names the YAML path of the
value to change.
"""

from __future__ import annotations

import difflib
import math
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
import yaml.composer
import yaml.constructor
import yaml.cyaml
import yaml.parser
import yaml.reader
import yaml.resolver
import yaml.scanner
from pydantic import BaseModel, ValidationError

from gpuscale.feasibility import checked_sizing
from gpuscale.input_files import MIB, InputFileError, read_bounded
from gpuscale.platform_checks import platform_problems
from gpuscale.problems import NAMESPACE, Problem, Problems
from gpuscale.spec.platform import PlatformSpec


class StackConfigError(Problems):
    """Invalid stack configuration: one problem per value to change, each naming its YAML path."""

    def __init__(self, source: str, problems: list[Problem] | list[str]) -> None:
        super().__init__((p if isinstance(p, Problem) else Problem("", p) for p in problems), source)


def find_project_root(start: Path | None = None) -> Path:
    """The nearest directory at or above ``start`` holding ``Pulumi.yaml``."""
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / "Pulumi.yaml").is_file():
            return d
    raise StackConfigError(str(here), ["no Pulumi.yaml here or above: run inside a gpuscale project or pass --stack-file"])


def stack_file_path(stack: str, root: Path | None = None) -> Path:
    return find_project_root(root) / "stacks" / f"Pulumi.{stack}.yaml"


STACK_FILE_MAX_BYTES = 1 * MIB
"""Largest stack file read (the shipped ones are a few KiB); anything larger is refused before it is parsed."""
YAML_MAX_VALUES = 100_000
"""Most YAML nodes a stack file may hold once every alias is expanded (the shipped ones hold a few hundred). Anchors
and aliases repeat whole subtrees, so a few lines can stand for 10^9 values ("billion laughs"); every reader after the
parser (duplicate keys, validation) walks the expanded tree, so the bound is on that tree, as go-yaml bounds the
share of a document that alias expansion may make (gopkg.in/yaml.v3 v3.0.1 decode.go, allowedAliasRatio)."""
YAML_MAX_DEPTH = 64
"""Deepest nesting of a stack file, aliases expanded (the shipped ones nest 8 deep)."""


class _YamlBound(Exception):
    """Raised while composing: a bound of the node tree is exceeded at ``path`` (the line is in the message)."""

    def __init__(self, path: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.path, self.message = path, message


class _BoundedComposer(yaml.composer.Composer):
    """PyYAML's composer, counting the tree as if every alias were expanded: refuses an alias that refers to a node
    containing it, more than ``YAML_MAX_VALUES`` nodes and more than ``YAML_MAX_DEPTH`` levels, naming the key and
    line. (PyYAML shares an aliased node instead of copying it, so building the tree is cheap; walking it is not.)"""

    peek_event: typing.Callable[[], Any]
    check_event: typing.Callable[..., bool]

    def __init__(self) -> None:
        super().__init__()
        self._path: list[str | int] = []
        self._values = 0
        self._heights: dict[int, int] = {}
        self._sizes: dict[int, int] = {}
        self._child_height: list[int] = [0]
        self.alias_sites: dict[tuple[int, str | int], tuple[int, int]] = {}
        """(id of the containing node, key or index) -> character span of an alias written there."""

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        step: str | int | None = (
            index if isinstance(index, int) else _scalar_key(index) if isinstance(index, yaml.Node) else None
        )
        if step is not None:
            self._path.append(step)
        try:
            return self._compose(parent, index, step)
        finally:
            if step is not None:
                self._path.pop()

    def _compose(self, parent: yaml.Node | None, index: Any, step: str | int | None) -> yaml.Node:
        event = self.peek_event()
        line = event.start_mark.line + 1
        depth = len(self._child_height)
        if self.check_event(yaml.AliasEvent):
            anchor = event.anchor
            if parent is not None and step is not None:
                self.alias_sites[(id(parent), step)] = (event.start_mark.index, event.end_mark.index)
            target = self.anchors.get(anchor)
            if target is not None:
                if id(target) not in self._heights:
                    raise _YamlBound(tuple(self._path), (
                        f"alias *{anchor} on line {line} refers to a node that contains it (anchor &{anchor} on line "
                        f"{target.start_mark.line + 1}): a value cannot contain itself; write it out"
                    ))
                self._count(self._sizes[id(target)], line, f"alias *{anchor}")
                self._deepen(depth - 1 + self._heights[id(target)], line)
                self._child_height[-1] = max(self._child_height[-1], self._heights[id(target)])
            return typing.cast(yaml.Node, super().compose_node(parent, index))
        self._deepen(depth, line)
        before = self._values
        self._count(1, line, "this value")
        self._child_height.append(0)
        try:
            node = typing.cast(yaml.Node, super().compose_node(parent, index))
        finally:
            height = 1 + self._child_height.pop()
        self._child_height[-1] = max(self._child_height[-1], height)
        self._heights[id(node)] = height
        self._sizes[id(node)] = self._values - before
        return node

    def _count(self, n: int, line: int, what: str) -> None:
        self._values += n
        if self._values > YAML_MAX_VALUES:
            raise _YamlBound(tuple(self._path), (
                f"{what} on line {line} takes the file past {YAML_MAX_VALUES:,} values with every alias expanded (a "
                "stack file holds a few hundred; anchors and aliases repeat whole subtrees): write fewer aliases"
            ))

    def _deepen(self, depth: int, line: int) -> None:
        if depth > YAML_MAX_DEPTH:
            raise _YamlBound(tuple(self._path), (
                f"nested more than {YAML_MAX_DEPTH} levels deep at line {line} (aliases expanded); a stack file nests "
                "about 8"
            ))


if yaml.__with_libyaml__:
    _Events: type = yaml.cyaml.CParser  # type: ignore[attr-defined] # libyaml's scanner and parser; its C composer is replaced below
else:  # pragma: no cover - PyYAML built without libyaml
    class _PyEvents(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser):
        def __init__(self, stream: str) -> None:
            yaml.reader.Reader.__init__(self, stream)
            yaml.scanner.Scanner.__init__(self)
            yaml.parser.Parser.__init__(self)

    _Events = _PyEvents


class _StackLoader(_BoundedComposer, _Events, yaml.constructor.SafeConstructor, yaml.resolver.Resolver):  # type: ignore[misc]
    """Events from libyaml (or PyYAML), the bounded composer, PyYAML's safe constructor. Duplicate keys are found on the
    node tree before construction (PyYAML would keep the last)."""

    def __init__(self, text: str) -> None:
        _Events.__init__(self, text)  # type: ignore[misc]
        yaml.constructor.SafeConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)
        _BoundedComposer.__init__(self)


def _scalar_key(node: yaml.Node) -> str | None:
    return str(node.value) if isinstance(node, yaml.ScalarNode) else None


def _duplicate_keys(node: yaml.Node | None, path: tuple[str | int, ...] = ()) -> Iterator[Problem]:
    """Every key written twice in one mapping, with both line numbers, at its YAML path."""
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = _scalar_key(key_node)
            if key is None or key_node.tag == "tag:yaml.org,2002:merge":
                continue
            line = key_node.start_mark.line + 1
            if key in seen:
                yield Problem(
                    _config_path((*path, key)),
                    f"duplicate key {key!r} (lines {seen[key]} and {line}): YAML would silently keep only the second; "
                    "remove one",
                )
            else:
                seen[key] = line
            yield from _duplicate_keys(value_node, (*path, key))
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            yield from _duplicate_keys(item, (*path, i))


def _config_path(path: tuple[str | int, ...]) -> str:
    """YAML path below ``config: gpuscale:<key>`` as a problem path (``models[0].queue``); other keys as written."""
    parts: list[str | int] = list(path)
    if len(parts) >= 2 and parts[0] == "config" and isinstance(parts[1], str) and parts[1].startswith(f"{NAMESPACE}:"):
        parts = [parts[1].removeprefix(f"{NAMESPACE}:"), *parts[2:]]
    return _join(parts)


def _join(parts: list[str | int]) -> str:
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text


@dataclass(frozen=True)
class StackText:
    """A stack file's text as parsed: the node tree (with character positions), where aliases are written, and the
    document it constructs. What ``gpuscale tune`` edits in place."""

    text: str
    """The text without a byte-order mark."""
    bom: bool
    root: yaml.Node | None
    alias_sites: dict[tuple[int, str | int], tuple[int, int]]
    doc: Any


def decode_stack_bytes(data: bytes, source: str) -> tuple[str, bool]:
    """The text of a stack file (UTF-8, an optional byte-order mark) and whether it had the mark."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise StackConfigError(source, [
            f"not UTF-8 text: byte 0x{data[exc.start]:02x} on line {line} cannot be decoded; save the file as UTF-8",
        ]) from None
    if "\0" in text:
        raise StackConfigError(source, ["not a text file (it contains NUL bytes); a stack file is UTF-8 YAML"])
    return text, data.startswith(b"\xef\xbb\xbf")


def parse_stack_bytes(data: bytes, source: str) -> StackText:
    """``data`` parsed: UTF-8, one document, every key once, within the size and alias bounds; ``StackConfigError``
    otherwise."""
    text, bom = decode_stack_bytes(data, source)
    loader = _StackLoader(text)
    try:
        node = loader.get_single_node()
        duplicates = list(_duplicate_keys(node))
        if duplicates:
            raise StackConfigError(source, duplicates)
        # PyYAML's constructor flattens merge keys (<<) into the mapping nodes themselves; the tree is kept as written
        written = [(n, list(n.value)) for n in _mappings(node)]
        doc = loader.construct_document(node) if node is not None else None
        for mapping, value in written:
            mapping.value = value
        return StackText(text, bom, node, loader.alias_sites, doc)
    except yaml.YAMLError as exc:
        raise StackConfigError(source, [f"not valid YAML: {exc}"]) from None
    except _YamlBound as exc:
        raise StackConfigError(source, [_problem_at(exc.path, exc.message)]) from None
    finally:
        loader.dispose()


def _mappings(node: yaml.Node | None) -> list[yaml.MappingNode]:
    """Every mapping node of the tree, once each (the tree is bounded by the composer)."""
    seen: dict[int, yaml.MappingNode] = {}
    stack = [node] if node is not None else []
    while stack:
        n = stack.pop()
        if isinstance(n, yaml.MappingNode) and id(n) not in seen:
            seen[id(n)] = n
            stack += [x for pair in n.value for x in pair]
        elif isinstance(n, yaml.SequenceNode):
            stack += n.value
    return list(seen.values())


def parse_stack_text(data: bytes, source: str) -> Any:
    """The YAML document in ``data`` (see ``parse_stack_bytes``)."""
    return parse_stack_bytes(data, source).doc


def _problem_at(path: tuple[str | int, ...], message: str) -> Problem:
    """A problem at a YAML path of the file: below ``config: gpuscale:<key>`` as a config path, else named in the text
    (``config.aws:region``: gpuscale reads no such key, but the file must still be readable)."""
    parts = list(path)
    if len(parts) >= 2 and parts[0] == "config" and isinstance(parts[1], str) and parts[1].startswith(f"{NAMESPACE}:"):
        return Problem(_config_path(path), message)
    return Problem("", f"{_join(parts)}: {message}" if parts else message)


def read_stack_bytes(path: Path) -> bytes:
    """The bytes of a stack file: a regular file of at most ``STACK_FILE_MAX_BYTES``; ``StackConfigError`` otherwise."""
    try:
        return read_bounded(path, STACK_FILE_MAX_BYTES, "a stack file")
    except InputFileError as exc:
        raise StackConfigError(str(path), [str(exc)]) from None


def read_stack_config(path: Path) -> dict[str, Any]:
    """The ``gpuscale:*`` keys of a Pulumi stack file, without the namespace."""
    source = str(path)
    doc = parse_stack_text(read_stack_bytes(path), source)
    if not isinstance(doc, dict):
        raise StackConfigError(source, [f"expected a mapping with a 'config:' key, got {_kind(doc)}"])
    config = doc.get("config")
    if not isinstance(config, dict):
        raise StackConfigError(source, ["'config:' must be a mapping of Pulumi config keys (gpuscale:environment, ...)"])
    raw: dict[str, Any] = {}
    problems: list[Problem] = []
    for key, value in config.items():
        ns, sep, name = str(key).partition(":")
        if sep and ns == NAMESPACE:
            raw[name] = value
            continue
        field = name if sep else ns
        if field in PlatformSpec.model_fields and f"{NAMESPACE}:{field}" not in config:
            problems.append(Problem("", f"config key {str(key)!r} is not in the {NAMESPACE} namespace: write {NAMESPACE}:{field}"))
    if problems:
        raise StackConfigError(source, problems)
    return raw


def validate_config(raw: dict[str, Any], source: str) -> PlatformSpec:
    """Validate ``gpuscale:*`` values into a ``PlatformSpec`` that sizing and the cross-layer checks accept, or raise
    ``StackConfigError``: the CLI and ``pulumi up`` refuse exactly the same configurations."""
    non_finite = list(_non_finite(raw))
    if non_finite:
        raise StackConfigError(source, non_finite)
    try:
        spec = PlatformSpec.model_validate(raw, strict=True)
    except ValidationError as exc:
        raise StackConfigError(source, format_errors(exc, raw)) from None
    try:
        checked_sizing(spec)
    except Problems as exc:
        raise StackConfigError(source, exc.problems) from None
    created = platform_problems(spec)  # a stack is the platform program: it creates the VPC and the cluster
    if created:
        raise StackConfigError(source, created)
    return spec


def _non_finite(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[Problem]:
    """``.inf``/``.nan`` anywhere: no quantity of a platform is infinite or undefined."""
    if isinstance(value, float) and not math.isfinite(value):
        yield Problem(_join(list(path)), f"{value} is not a finite number; write the quantity itself")
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _non_finite(v, (*path, str(k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _non_finite(v, (*path, i))


def load_stack_file(path: Path) -> PlatformSpec:
    raw = read_stack_config(path)
    spec = validate_config(_resolve_trace_paths(raw, path.parent), str(path))
    missing = [
        Problem(f"models[{i}].workload.trace.path", (
            f"{m.workload.trace.path} is not a regular file (a trace is a CSV file)" if m.workload.trace.path.exists()
            else f"trace file not found: {m.workload.trace.path}"
        ))
        for i, m in enumerate(spec.models) if m.workload.trace is not None and not m.workload.trace.path.is_file()
    ]
    if missing:
        raise StackConfigError(str(path), missing)
    return spec


def _resolve_trace_paths(raw: dict[str, Any], base: Path) -> dict[str, Any]:
    """Relative ``workload.trace.path`` values are relative to the stack file, like every path a config file names."""
    models = raw.get("models")
    if not isinstance(models, list):
        return raw
    resolved = []
    for m in models:
        workload = m.get("workload") if isinstance(m, dict) else None
        trace = workload.get("trace") if isinstance(workload, dict) else None
        path = trace.get("path") if isinstance(trace, dict) else None
        if isinstance(workload, dict) and isinstance(trace, dict) and isinstance(path, str) and path and "\0" not in path and not Path(path).is_absolute():
            m = {**m, "workload": {**workload, "trace": {**trace, "path": str(base / path)}}}
        resolved.append(m)
    return {**raw, "models": resolved}


def load_stack(stack: str | None = None, stack_file: Path | None = None) -> PlatformSpec:
    """``--stack NAME`` reads ``stacks/Pulumi.NAME.yaml``; ``--stack-file PATH`` reads any file of that shape."""
    if stack_file is not None:
        return load_stack_file(stack_file)
    if stack is None:
        raise StackConfigError("gpuscale", ["pass --stack NAME or --stack-file PATH"])
    path = stack_file_path(stack)
    if not path.is_file():
        known = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in path.parent.glob("Pulumi.*.yaml"))
        raise StackConfigError(str(path), [f"no stack {stack!r} (no {path}); stacks here: {', '.join(known) or 'none'}"])
    return load_stack_file(path)


def load_from_pulumi_config() -> PlatformSpec:
    """Read the running stack's ``gpuscale:*`` config (inside ``pulumi up``/``preview``)."""
    import pulumi

    from gpuscale import pulumi_runtime

    cfg = pulumi.Config(NAMESPACE)
    # every gpuscale:* key, known or not: a typo such as gpuscale:observabilty is refused here as by `gpuscale validate`
    raw: dict[str, Any] = {}
    for name in pulumi_runtime.config_keys(NAMESPACE):
        try:
            raw[name] = cfg.get_object(name)
        except pulumi.ConfigTypeError:  # a plain string where YAML structure is expected: the spec names the type
            raw[name] = cfg.get(name)
    return validate_config(raw, f"stack {pulumi.get_stack()}")


_TYPE_ERRORS = ("_type", "_parsing", "finite_number", "is_instance_of", "literal_error", "enum")


def format_errors(exc: ValidationError, data: Any = None) -> list[Problem]:
    """One problem per pydantic error, at the YAML path the user wrote (``data`` is the validated input).

    Where a value may take one of several shapes (``networking``: a new VPC or existing subnets), only the errors of
    the shape the value comes closest to are kept, so a typo is not buried under the other shape's missing keys.
    """
    errors = [(err, *_path(err["loc"], data, err["type"])) for err in exc.errors(include_url=False)]
    members: dict[str, dict[str, int]] = {}
    for err, _, tag in errors:
        if tag is not None:  # an unknown key says "wrong shape" more surely than a missing or invalid one
            weight = 100 if err["type"] == "extra_forbidden" else 1
            members.setdefault(tag[0], {}).setdefault(tag[1], 0)
            members[tag[0]][tag[1]] += weight
    best = {where: min(counts, key=lambda t: counts[t]) for where, counts in members.items()}
    out: list[Problem] = []
    for err, path, tag in errors:
        if tag is not None and best[tag[0]] != tag[1]:
            continue
        loc = err["loc"]
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, Problems):
            out += [p.under(path) for p in cause.problems]
            continue
        msg = err["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
        if err["type"] == "extra_forbidden":
            msg = _unknown_key(str(loc[-1]), _fields_at(PlatformSpec, loc[:-1]))
        elif err["type"] == "missing":
            msg = "required key is missing"
        elif err["type"].endswith(_TYPE_ERRORS) or err["type"] in _BOUND_ERRORS:
            msg += _got(err.get("input"))
        out.append(Problem(path, msg))
    return out


_BOUND_ERRORS = ("string_pattern_mismatch", "greater_than", "less_than_equal", "greater_than_equal", "less_than", "too_long", "too_short",
                 "model_type", "model_attributes_type", "dict_type", "list_type")


def _got(value: Any) -> str:
    if value is None:
        return ", got nothing (null)"
    if isinstance(value, bool):
        return f", got {str(value).lower()} (a boolean)"
    if isinstance(value, str | int | float) and len(repr(value)) <= 60:
        return f", got {value!r}"
    if isinstance(value, dict | list):
        return f", got a {_kind(value)}"
    return ""


def _kind(value: Any) -> str:
    return {dict: "mapping", list: "list", str: "string", bool: "boolean", type(None): "nothing (null)"}.get(
        type(value), type(value).__name__
    )


def _unknown_key(key: str, valid: list[str]) -> str:
    msg = f"unknown key {key!r}"
    close = difflib.get_close_matches(key, valid, n=1) or [v for v in valid if v.lower() == key.lower()]
    if close:
        msg += f" (did you mean {close[0]!r}?)"
    return msg + (f"; valid keys here: {', '.join(valid)}" if valid else "")


def _path(loc: tuple[int | str, ...], data: Any, err_type: str) -> tuple[str, tuple[str, str] | None]:
    """The YAML path of an error, and the union member it is about (path of the union, member tag) if any.

    ``loc`` is followed through the data the user wrote, so tags that pydantic inserts for union members
    (``NewVpcSpec``, ``list[str]``) are skipped while keys keep their spelling (``Models`` stays ``Models``).
    """
    parts: list[str | int] = []
    tag: tuple[str, str] | None = None
    current = data
    for i, part in enumerate(loc):
        last = i == len(loc) - 1
        if isinstance(current, list) and isinstance(part, int):
            parts.append(part)
            current = current[part] if 0 <= part < len(current) else None
        elif isinstance(current, dict) and part in current:
            parts.append(str(part))
            current = current[part]
        elif isinstance(current, dict) and last and err_type == "missing" and isinstance(part, str):
            parts.append(part)
        elif data is None and (isinstance(part, int) or not (part[:1].isupper() or "[" in part)):
            parts.append(part)  # no data to follow: keep what looks like a key, drop what looks like a type tag
        elif tag is None and isinstance(part, str):
            tag = (_join(parts), part)  # a union member tag (or a dict's '[key]' marker), not a key the user wrote
    return _join(parts), tag


def _fields_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """Field names of the model found by following ``loc`` from ``model``; [] when it cannot be followed."""
    current: Any = model
    for part in loc:
        current = _unwrap(current, part)
        if current is None:
            return []
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _unwrap(tp: Any, part: int | str) -> Any:
    if typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    if isinstance(part, int):
        args = typing.get_args(tp)
        return args[0] if args else None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(tp):
            if getattr(arg, "__name__", None) == part:
                return arg
        models = [a for a in typing.get_args(tp) if isinstance(a, type) and issubclass(a, BaseModel)]
        return _unwrap(models[0], part) if len(models) == 1 else None
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        field = tp.model_fields.get(part)
        return field.annotation if field else None
    return None
