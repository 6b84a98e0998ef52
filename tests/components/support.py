"""What the component tests share: run a program under mocks, pick records, read Outputs, check dependencies."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pulumi
from pulumi.runtime import config as runtime_config

from gpuscale.synth.mocks import RecordedResource, run_program

Records = list[RecordedResource]


def run(program: Callable[[], object], *, region: str = "us-east-1", stack: str = "test") -> Records:
    return run_program(program, region=region, stack=stack)


def of_type(records: Records, typ: str) -> list[RecordedResource]:
    return [r for r in records if r.type == typ]


def one(records: Records, typ: str, name: str | None = None) -> RecordedResource:
    (r,) = [r for r in records if r.type == typ and (name is None or r.name == name)]
    return r


def named(records: Records, name: str) -> RecordedResource:
    (r,) = [r for r in records if r.name == name]
    return r


def ints(value: Any) -> Any:
    """Undo the wire format's doubles (1.0 -> 1) so emitted bodies compare like the YAML they become."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [ints(v) for v in value]
    return value


def k8s_object(record: RecordedResource) -> dict[str, Any]:
    return ints({k: v for k, v in record.inputs.items() if k in ("apiVersion", "kind", "metadata", "spec")})


def capture(outputs: dict[str, Any], key: str, output: pulumi.Output[Any]) -> None:
    """Record what ``output`` resolves to under ``outputs[key]``."""
    output.apply(lambda v: outputs.__setitem__(key, v))


def stand_in(name: str) -> pulumi.CustomResource:
    """A resource standing for something the components wait for (a chart with CRDs, a namespace)."""
    return pulumi.CustomResource("test:index:StandIn", name, {})


def consumer(name: str, value: pulumi.Input[Any]) -> pulumi.CustomResource:
    """A user's resource that reads ``value``: its recorded dependencies show what ``value`` carries."""
    return pulumi.CustomResource("test:index:Consumer", name, {"value": value})


def ancestors(records: Records, record: RecordedResource) -> list[str]:
    parent_of = {r.urn: r.parent_urn for r in records}
    chain, urn = [], record.parent_urn
    while urn in parent_of:
        chain.append(urn)
        urn = parent_of[urn]
    return chain


@contextmanager
def stack_config(values: dict[str, str]) -> Iterator[None]:
    """Stack config (``aws:profile`` ...) as the language host would hand it to the program."""
    token = runtime_config.CONFIG.set(dict(values))
    try:
        yield
    finally:
        runtime_config.CONFIG.reset(token)
