"""Field types for component args that take another resource's Output as readily as a plain value.

Component args are frozen pydantic models like the spec, but what a Pulumi user takes from other resources (a cluster
name, a node role, subnet ids from a network stack's ``StackReference``, a Namespace's ``metadata.name``, an image
built in the same program) is a ``pulumi.Input``. A plain value is validated when the args are built, with the same
message the stack file gives; an Output is accepted as it is and resolved when the objects are built. The aliases are
``pulumi.Input[...]`` to mypy, so ``GpuNodePoolArgs(cluster_name=cluster.name, ...)`` type-checks under ``--strict``.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any, TypeAlias, TypeVar

import pulumi
from pydantic import BaseModel, PlainValidator, TypeAdapter, ValidationError

from gpuscale.manifests.namespaces import workload_namespace
from gpuscale.spec.base import HttpUrl, IamPrincipalArn, Name
from gpuscale.spec.model import image_ref

StrInput: TypeAlias = str | Awaitable[str] | pulumi.Output[str]
"""``pulumi.Input[str]``."""
StrListInput: TypeAlias = Sequence[StrInput] | Awaitable[Sequence[str]] | pulumi.Output[Sequence[str]]
"""``pulumi.Input[Sequence[pulumi.Input[str]]]``: a list (whose items may be Outputs) or an Output of a list."""

_EKS_CLUSTER_NAME = re.compile(r"^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$")


def is_output(value: object) -> bool:
    """Whether ``value`` is resolved later (an Output or another awaitable), not a plain value."""
    return isinstance(value, pulumi.Output) or inspect.isawaitable(value)


def _input(check: Callable[[str], str]) -> PlainValidator:
    """Validate a plain string with ``check``; pass an Output through."""

    def validate(value: Any) -> Any:
        if is_output(value):
            return value
        if not isinstance(value, str):
            raise ValueError(f"expected a string or a pulumi Output, got {type(value).__name__} {value!r}")
        return check(value)

    return PlainValidator(validate)


def _list_input(check: Callable[[str], str]) -> PlainValidator:
    """Validate a plain list item by item (items may be Outputs); pass an Output of a list through."""

    def validate(value: Any) -> Any:
        if is_output(value):
            return value
        if isinstance(value, str) or not isinstance(value, Sequence):
            raise ValueError(f"expected a list of strings or a pulumi Output of one, got {type(value).__name__} {value!r}")
        if not value:
            raise ValueError("expected at least one id (leave the field unset to select by discovery tag)")
        return [v if is_output(v) else check(v) if isinstance(v, str) else _not_str(v) for v in value]

    return PlainValidator(validate)


def _not_str(value: object) -> str:
    raise ValueError(f"expected a string or a pulumi Output, got {type(value).__name__} {value!r}")


def _cluster_name(name: str) -> str:
    if not _EKS_CLUSTER_NAME.match(name):
        raise ValueError(
            f"{name!r} is not an EKS cluster name: 1-100 letters, digits, '-' and '_', starting with a letter or digit"
        )
    return name


def _nonempty(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


def _prefixed(prefix: str, what: str) -> Callable[[str], str]:
    pattern = re.compile(rf"^{prefix}[0-9a-z]+$")

    def check(value: str) -> str:
        if not pattern.match(value):
            raise ValueError(f"{value!r} is not {what} id ({prefix}...)")
        return value

    return check


def _spec_type(annotation: Any) -> Callable[[str], str]:
    """The stack file's own check of a value type (``IamPrincipalArn``, ``HttpUrl`` ...), with its message."""
    adapter: TypeAdapter[str] = TypeAdapter(annotation)

    def check(value: str) -> str:
        try:
            return adapter.validate_python(value)
        except ValidationError as exc:
            raise ValueError(str(exc.errors()[0]["msg"]).removeprefix("Value error, ")) from None

    return check


ClusterName = Annotated[StrInput, _input(_cluster_name)]
"""An EKS cluster name, or an Output of one (e.g. ``aws.eks.Cluster(...).name``)."""
NonEmpty = Annotated[StrInput, _input(_nonempty)]
"""A non-empty string (an IAM role name, an AWS profile), or an Output of one."""
PrometheusUrl = Annotated[StrInput, _input(_spec_type(HttpUrl))]
"""A Prometheus ``http(s)://host[:port][/path]`` URL, or an Output of one (``PrometheusStack.prometheus_url``)."""
Namespace = Annotated[StrInput, _input(workload_namespace)]
"""A namespace model workloads may use (DNS-1123 label, not a controller's), or an Output (``ns.metadata.name``)."""
Image = Annotated[StrInput, _input(image_ref)]
"""A container image reference, or an Output of one (e.g. an image built in the same program)."""
QueueName = Annotated[StrInput, _input(_spec_type(Name))]
"""A KAI Queue's name (a Kubernetes object name), or an Output of one (a queue another stack exports)."""
PrincipalArn = Annotated[StrInput, _input(_spec_type(IamPrincipalArn))]
"""An IAM role or user ARN, or an Output of one."""
SubnetIds = Annotated[StrListInput, _list_input(_prefixed("subnet-", "a subnet"))]
"""Subnet ids (``subnet-...``): a list, or an Output of one (``StackReference(...).get_output("private_subnet_ids")``)."""
SecurityGroupIds = Annotated[StrListInput, _list_input(_prefixed("sg-", "a security group"))]
"""Security group ids (``sg-...``): a list, or an Output of one."""


def output_list(value: StrListInput) -> pulumi.Output[list[str]]:
    """A list input (a list of Inputs, or an Output of a list) as one Output of a plain list."""
    if is_output(value):
        return pulumi.Output.from_input(value).apply(list)  # type: ignore[arg-type]
    return pulumi.Output.all(*value).apply(list)  # type: ignore[misc]


S = TypeVar("S", bound=BaseModel)
T = TypeVar("T")
U = TypeVar("U")


def resolved(settings: S, **overrides: object) -> S | pulumi.Output[S]:
    """``settings`` with each override that is not ``None`` put in and validated again: a plain ``S`` when every
    override is plain, else an Output once they are known (an Output namespace gets the checks a plain one got)."""
    given = {k: v for k, v in overrides.items() if v is not None}

    def rebuilt(values: dict[str, object]) -> S:
        # only the fields that were set, nested models as they are: a dump would turn every default into a value set
        # by the user, which a validator may refuse (``cooldown_s`` behind a front door)
        kept = {k: getattr(settings, k) for k in settings.model_fields_set}
        return type(settings).model_validate({**kept, **values})

    if not any(is_output(v) for v in given.values()):
        return rebuilt(given) if given else settings
    return pulumi.Output.all(**given).apply(rebuilt)


def lift(value: T | pulumi.Output[T], fn: Callable[[T], U]) -> U | pulumi.Output[U]:
    """``fn(value)`` now for a plain value, or once an Output is known: plain inputs keep plain resource inputs."""
    if isinstance(value, pulumi.Output):
        return value.apply(fn)
    return fn(value)
