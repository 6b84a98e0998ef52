"""What every component does for its children: parent them, pass its ``depends_on`` on, and claim their names.

``depends_on``: the engine does not hold a component's children back until the component's own ``depends_on`` exist
(a child only waits for its parent's URN), so ``ResourceOptions(depends_on=[karpenter.chart])`` on a ``GpuNodePool``
must reach the NodePool itself. ``child_opts`` merges the caller's ``depends_on`` into every child's options.

Names: Kubernetes objects and some AWS resources are named after the spec (``NodePool/l40s``, ``Queue/chat``, the EKS
cluster), and those names are what pods and controllers refer to. Two components that would create the same object
through the same provider in one program are refused at construction, naming both and the arg that tells them apart,
instead of failing halfway through ``pulumi up``. Names only known later (Outputs) are left to the provider.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any

import pulumi

from gpuscale.synth import sdk

_Claims = dict[tuple[int | None, str, str, str], str]
_CLAIMS: weakref.WeakKeyDictionary[object, _Claims] = weakref.WeakKeyDictionary()


class NameClash(ValueError):
    """Two components would create the same physical object through the same provider."""


def child_opts(
    owner: pulumi.Resource, opts: pulumi.ResourceOptions | None, *after: pulumi.Input[pulumi.Resource], **kwargs: Any,
) -> pulumi.ResourceOptions:
    """Options of a child of ``owner``: it waits for ``after`` and for everything ``opts.depends_on`` names."""
    own = pulumi.ResourceOptions(parent=owner, depends_on=list(after), **kwargs)
    inherited = pulumi.ResourceOptions(depends_on=opts.depends_on) if opts is not None and opts.depends_on else None
    merged: pulumi.ResourceOptions = pulumi.ResourceOptions.merge(own, inherited)
    return merged


def _claims() -> _Claims:
    run = sdk.program_run()
    try:
        return _CLAIMS.setdefault(run, {})
    except TypeError:  # a monitor that cannot be weakly referenced: one program per process anyway
        return _CLAIMS.setdefault(sdk, {})


def claim(owner: pulumi.Resource, who: str, package: str, kind: str, name: object, *, scope: object = "",
          fix: str) -> None:
    """Record that ``who`` creates ``kind`` ``name`` (in ``scope``, e.g. a namespace) through ``owner``'s ``package``
    provider; ``NameClash`` if another component of this program already does. ``fix`` says how to tell them apart."""
    if not isinstance(name, str) or not isinstance(scope, str):
        return
    provider = owner.get_provider(f"{package}::")
    key = (id(provider) if provider is not None else None, kind, scope, name)
    claims = _claims()
    holder = claims.get(key)
    where = f"{scope}/{name}" if scope else name
    if holder is not None:
        raise NameClash(
            f"{who} would create {kind} {where}, which {holder} already creates through the same {package} provider; "
            f"{fix}"
        )
    claims[key] = who


def object_name(resource: pulumi.Resource) -> pulumi.Output[str]:
    """A Kubernetes object's name as its provider reports it, so whatever consumes the name waits for the object."""
    meta: pulumi.Output[Any] = getattr(resource, "metadata")  # noqa: B009 (an output property set at registration)
    return meta.apply(lambda m: str(m["name"] if isinstance(m, Mapping) else m.name))


def object_kind(resource: pulumi.Resource) -> pulumi.Output[str]:
    """A Kubernetes object's kind as its provider reports it (typed resources and CustomResources alike)."""
    kind: pulumi.Output[str] = getattr(resource, "kind")  # noqa: B009 (an output property set at registration)
    return kind
