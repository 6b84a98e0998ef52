"""What every component does for its children: parent them, pass its ``depends_on`` on, claim their names, refuse.

``depends_on``: the engine does not hold a component's children back until the component's own ``depends_on`` exist
(a child only waits for its parent's URN), so ``ResourceOptions(depends_on=[karpenter.chart])`` on a ``GpuNodePool``
must reach the NodePool itself, and every custom resource a component creates without a parent component in between
(an EFA pool's placement group as much as its NodePool). ``child_opts`` merges the caller's ``depends_on`` into every
child's options.

Names: Kubernetes objects and some AWS resources are named after the spec (``NodePool/l40s``, ``Queue/chat``, the EKS
cluster), and those names are what pods and controllers refer to. Two components that would create the same object
through the same target in one program are refused, naming both and the arg that tells them apart, instead of failing
halfway through ``pulumi up``. The target is the provider object, or, for providers gpuscale creates itself, what the
provider reaches (``register_target``: two AWS providers gpuscale makes for the same region and credentials reach one
account). A name that is an Output (``namespace=ns.metadata.name``) is claimed once it is known.

Refusals: ``Refused`` is ``gpuscale.problems.Problems`` (YAML paths; the CLI's exit 2) and a ``pulumi.RunError``, the
SDK's user-error path: ``pulumi-language-python-exec`` (pulumi/pulumi ``sdk/python/cmd/pulumi-language-python-exec``)
logs a ``RunError`` as its message alone and every other exception with a traceback.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping
from typing import Any

import pulumi

from gpuscale import pulumi_runtime
from gpuscale.problems import Problem, Problems
from gpuscale.spec.platform import PlatformSpec

_Target = tuple[object, ...]
_Claims = dict[tuple[object, str, str, str], str]
_CLAIMS: weakref.WeakKeyDictionary[object, _Claims] = weakref.WeakKeyDictionary()
_TARGETS: weakref.WeakKeyDictionary[pulumi.ProviderResource, _Target] = weakref.WeakKeyDictionary()


class Refused(Problems, pulumi.RunError):
    """A component refuses its args: the problems (with YAML paths where the value comes from a spec), raised as the
    SDK's user error so ``pulumi up`` prints the refusal, not a traceback."""

    def __init__(self, problems: Iterable[Problem | tuple[str, str]] | str, source: str = "") -> None:
        super().__init__([("", problems)] if isinstance(problems, str) else problems, source)


class NameClash(Refused):
    """Two components would create the same physical object through the same target."""


class UnknownName(Refused):
    """A name given to ``from_spec``/``from_platform`` that the spec does not define; the message lists the valid ones."""


def refused(exc: Problems) -> Refused:
    """``exc`` as a component's refusal (the same problems and source)."""
    return exc if isinstance(exc, Refused) else Refused(exc.problems, exc.source)


def _known(kind: str, name: object, names: Iterable[str], where: str) -> None:
    valid = list(names)
    if name not in valid:
        raise UnknownName([(where, f"no {kind} {name!r}; the spec defines {', '.join(map(repr, valid)) or 'none'}")])


def known_model(spec: PlatformSpec, model_name: str, role: str | None = None) -> None:
    """Refuse a model (and role) name ``from_platform`` was given that the spec does not define, listing the valid
    ones, instead of the lookup's bare ``StopIteration``/``KeyError``."""
    _known("model", model_name, (m.name for m in spec.models), "models[].name")
    if role is not None:
        i, model = next((i, m) for i, m in enumerate(spec.models) if m.name == model_name)
        _known(f"role of {model_name!r} (serving.mode {model.serving.mode})", role, model.serving.roles,
               f"models[{i}].serving.mode")


def known_pool(spec: PlatformSpec, pool_name: str) -> None:
    """Refuse a GPU pool name ``from_spec`` was given that the spec does not define, listing the valid ones."""
    _known("GPU pool", pool_name, (p.name for p in spec.topology.gpu_pools), "topology.gpu_pools[].name")


def require_prometheus_url(spec: PlatformSpec, prometheus_url: object) -> None:
    """A piece that queries Prometheus on a cluster this program did not build cannot assume gpuscale's
    kube-prometheus-stack: the URL is given (an arg, or ``observability.prometheus_url`` in the spec), or refused."""
    if prometheus_url is None and "prometheus_url" not in spec.observability.model_fields_set:
        raise Refused([("observability.prometheus_url", (
            "no Prometheus URL: the default is the kube-prometheus-stack an InferencePlatform installs, which this "
            "cluster may not run; pass prometheus_url= (your Prometheus, or PrometheusStack(...).prometheus_url) or "
            "set observability.prometheus_url in the spec"))])


def child_opts(
    owner: pulumi.Resource, opts: pulumi.ResourceOptions | None, *after: pulumi.Input[pulumi.Resource], **kwargs: Any,
) -> pulumi.ResourceOptions:
    """Options of a child of ``owner``: it waits for ``after`` and for everything ``opts.depends_on`` names."""
    own = pulumi.ResourceOptions(parent=owner, depends_on=list(after), **kwargs)
    inherited = pulumi.ResourceOptions(depends_on=opts.depends_on) if opts is not None and opts.depends_on else None
    merged: pulumi.ResourceOptions = pulumi.ResourceOptions.merge(own, inherited)
    return merged


def register_target(provider: pulumi.ProviderResource, *target: object) -> None:
    """Say what ``provider`` reaches (e.g. ``("aws", region, profile, role arns)``), so that two providers gpuscale
    created for the same target count as one when names are claimed."""
    _TARGETS[provider] = target


def _claims() -> _Claims:
    run = pulumi_runtime.program_run()
    try:
        return _CLAIMS.setdefault(run, {})
    except TypeError:  # a monitor that cannot be weakly referenced: one program per process anyway
        return _CLAIMS.setdefault(pulumi_runtime, {})


def _target(owner: pulumi.Resource, package: str) -> object:
    provider = owner.get_provider(f"{package}::")
    if provider is None:
        return None  # the default provider: one per program
    return _TARGETS.get(provider, ("provider", id(provider)))


def claim(owner: pulumi.Resource, who: str, package: str, kind: str, name: pulumi.Input[str], *,
          scope: pulumi.Input[str] = "", fix: str) -> None:
    """Record that ``who`` creates ``kind`` ``name`` (in ``scope``, e.g. a namespace) through ``owner``'s ``package``
    provider; ``NameClash`` if another component of this program already does. ``fix`` says how to tell them apart.
    A name or scope that is an Output is claimed when it resolves (the clash then fails the run from that apply)."""
    target = _target(owner, package)
    if isinstance(name, str) and isinstance(scope, str):
        _claim(target, who, package, kind, name, scope, fix)
        return
    pulumi.Output.all(name, scope).apply(lambda v: _claim(target, who, package, kind, str(v[0]), str(v[1]), fix))


def _claim(target: object, who: str, package: str, kind: str, name: str, scope: str, fix: str) -> None:
    key = (target, kind, scope, name)
    claims = _claims()
    holder = claims.get(key)
    where = f"{scope}/{name}" if scope else name
    if holder is not None:
        raise NameClash(
            f"{who} would create {kind} {where}, which {holder} already creates through {_through(target, package)}; "
            f"{fix}"
        )
    claims[key] = who


def _through(target: object, package: str) -> str:
    if isinstance(target, tuple) and target and target[0] != "provider":
        return f"a provider of {package} for the same {', '.join(map(str, target[1:]))}"
    return f"the same {package} provider"


def object_name(resource: pulumi.Resource) -> pulumi.Output[str]:
    """A Kubernetes object's name as its provider reports it, so whatever consumes the name waits for the object."""
    meta: pulumi.Output[Any] = getattr(resource, "metadata")  # noqa: B009 (an output property set at registration)
    return meta.apply(lambda m: str(m["name"] if isinstance(m, Mapping) else m.name))


def object_kind(resource: pulumi.Resource) -> pulumi.Output[str]:
    """A Kubernetes object's kind as its provider reports it (typed resources and CustomResources alike)."""
    kind: pulumi.Output[str] = getattr(resource, "kind")  # noqa: B009 (an output property set at registration)
    return kind
