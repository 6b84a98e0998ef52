"""The only reader of stack configuration: Pulumi config for ``pulumi up``, plain YAML for the CLI.

Both paths build the same dict of ``gpuscale:<key>`` objects and validate it with ``PlatformSpec``,
so a stack file that ``gpuscale validate`` accepts is exactly what the Pulumi program deploys.
"""

from __future__ import annotations

import types
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from gpuscale.checks import checked_sizing
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


def read_stack_config(path: Path) -> dict[str, Any]:
    """The ``gpuscale:*`` keys of a Pulumi stack file, without the namespace."""
    if not path.is_file():
        raise StackConfigError(str(path), [f"file not found: {path}"])
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise StackConfigError(str(path), [f"not valid YAML: {exc}"]) from None
    if not isinstance(doc, dict):
        raise StackConfigError(str(path), [f"expected a mapping with a 'config:' key, got {type(doc).__name__}"])
    config = doc.get("config")
    if not isinstance(config, dict):
        raise StackConfigError(str(path), ["'config:' must be a mapping of Pulumi config keys (gpuscale:environment, ...)"])
    raw: dict[str, Any] = {}
    for key, value in config.items():
        ns, sep, name = str(key).partition(":")
        if sep and ns == NAMESPACE:
            raw[name] = value
    return raw


def validate_config(raw: dict[str, Any], source: str) -> PlatformSpec:
    """Validate ``gpuscale:*`` values into a ``PlatformSpec`` that sizing and the cross-layer checks accept, or raise
    ``StackConfigError``: the CLI and ``pulumi up`` refuse exactly the same configurations."""
    try:
        spec = PlatformSpec.model_validate(raw)
    except ValidationError as exc:
        raise StackConfigError(source, format_errors(exc)) from None
    try:
        checked_sizing(spec)
    except Problems as exc:
        raise StackConfigError(source, exc.problems) from None
    return spec


def load_stack_file(path: Path) -> PlatformSpec:
    return validate_config(read_stack_config(path), str(path))


def load_stack(stack: str | None = None, stack_file: Path | None = None) -> PlatformSpec:
    """``--stack NAME`` reads ``stacks/Pulumi.NAME.yaml``; ``--stack-file PATH`` reads any file of that shape."""
    if stack_file is not None:
        return load_stack_file(stack_file)
    if stack is None:
        raise StackConfigError("gpuscale", ["pass --stack NAME or --stack-file PATH"])
    return load_stack_file(stack_file_path(stack))


def load_from_pulumi_config() -> PlatformSpec:
    """Read the running stack's ``gpuscale:*`` config (inside ``pulumi up``/``preview``)."""
    import pulumi

    from gpuscale.synth import sdk

    cfg = pulumi.Config(NAMESPACE)
    # every gpuscale:* key, known or not: a typo such as gpuscale:observabilty is refused here as by `gpuscale validate`
    raw: dict[str, Any] = {}
    for name in sdk.config_keys(NAMESPACE):
        try:
            raw[name] = cfg.get_object(name)
        except pulumi.ConfigTypeError:  # a plain string where YAML structure is expected: the spec names the type
            raw[name] = cfg.get(name)
    return validate_config(raw, f"stack {pulumi.get_stack()}")


def format_errors(exc: ValidationError) -> list[Problem]:
    out: list[Problem] = []
    for err in exc.errors(include_url=False):
        cause = (err.get("ctx") or {}).get("error")
        loc = err["loc"]
        if isinstance(cause, Problems):
            out += [p.under(_path(loc)) for p in cause.problems]
            continue
        msg = err["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
        if err["type"] == "extra_forbidden":
            valid = _fields_at(PlatformSpec, loc[:-1])
            msg = "unknown key" + (f"; valid keys here: {', '.join(valid)}" if valid else "")
        elif err["type"] == "missing":
            msg = "required key is missing"
        out.append(Problem(_path(loc), msg))
    return out


def _path(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part[:1].isupper() or "[" in part:  # union member tags such as 'NewVpcSpec' or 'list[str]'
            continue
        else:
            text += f".{part}" if text else part
    return text


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
