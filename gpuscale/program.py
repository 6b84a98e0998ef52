"""The Pulumi program: one ``InferencePlatform`` from a spec, and the stack outputs; and its edge under ``pulumi up``.

``infra/__main__.py`` runs ``main()``: it reads the stack's config (``gpuscale:*`` through the same validation as
``gpuscale validate``; ``aws:profile`` and ``aws:assumeRoles`` for the AWS provider gpuscale creates, since
components read no config) and turns every refusal into ``pulumi.RunError``, which the Python language host prints as
the message alone (``pulumi-language-python-exec`` logs ``str(e)`` of a ``RunError``, a traceback for anything else).
``gpuscale synth`` runs ``deploy`` under deterministic mocks.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

import pulumi
from pydantic import ValidationError

from gpuscale import pulumi_runtime
from gpuscale.components.inference_platform import AwsAssumeRole, InferencePlatform, InferencePlatformArgs
from gpuscale.problems import NAMESPACE, Problem, Problems, Refusal
from gpuscale.spec.platform import PlatformSpec
from gpuscale.stackfile import load_from_pulumi_config

PULUMI_NAMESPACES = frozenset({"aws", "kubernetes", "pulumi"})
"""Config namespaces that belong to Pulumi or the providers this program uses, never a misspelt ``gpuscale``."""

ASSUME_ROLE_KEYS = {
    field.split("_")[0] + "".join(part.title() for part in field.split("_")[1:]): field
    for field in AwsAssumeRole.model_fields
}
"""``aws:assumeRoles`` config keys (the pulumi-aws provider's, camel case) -> ``AwsAssumeRole`` fields."""


def deploy(spec: PlatformSpec, *, aws_profile: str | None = None,
           aws_assume_roles: Sequence[AwsAssumeRole] = ()) -> InferencePlatform:
    platform = InferencePlatform("gpuscale", InferencePlatformArgs(
        spec=spec, aws_profile=aws_profile, aws_assume_roles=list(aws_assume_roles),
    ))
    pulumi.export("cluster_name", platform.cluster_name)
    pulumi.export("kubeconfig", platform.kubeconfig)
    pulumi.export("endpoint", platform.endpoint)
    pulumi.export("node_pool_names", platform.node_pool_names)
    pulumi.export("queue_names", platform.queue_names)
    pulumi.export("model_endpoints", platform.model_endpoints)
    return platform


def main() -> InferencePlatform:
    """Deploy the running stack; bad config or a refused spec ends the run with the refusal alone."""
    try:
        misspelt = misspelt_namespaces(pulumi_runtime.all_config_keys())
        try:
            spec = load_from_pulumi_config()
        except Problems as exc:
            raise Problems([*misspelt, *exc.problems], exc.source) from None
        if misspelt:
            raise Problems(misspelt, f"stack {pulumi.get_stack()}")
        profile, roles = aws_provider_config()
        return deploy(spec, aws_profile=profile, aws_assume_roles=roles)
    except Refusal as exc:
        raise pulumi.RunError(str(exc)) from None


def misspelt_namespaces(keys: Sequence[str]) -> list[Problem]:
    """A key whose namespace is close to ``gpuscale`` but not it (``gpuscle:models``) would be ignored, and the
    ``gpuscale:`` key it was meant to be reported missing: name the namespace and the key it should be."""
    problems = []
    for key in keys:
        namespace, _, name = key.partition(":")
        if namespace in PULUMI_NAMESPACES or namespace == NAMESPACE or not name:
            continue
        if difflib.get_close_matches(namespace.lower(), [NAMESPACE], n=1, cutoff=0.8):
            problems.append(Problem("", f"{key}: unknown config namespace {namespace!r}; did you mean "
                                        f"{NAMESPACE}:{name}? (gpuscale reads only {NAMESPACE}:* keys)"))
    return problems


def aws_provider_config() -> tuple[str | None, list[AwsAssumeRole]]:
    """The stack's ``aws:profile`` and ``aws:assumeRoles``, for the AWS provider gpuscale creates."""
    config = pulumi.Config("aws")
    return config.get("profile"), assume_roles(config.get_object("assumeRoles"))


def assume_roles(roles: Any) -> list[AwsAssumeRole]:
    """``aws:assumeRoles`` config as typed roles; an unknown key is refused, not dropped."""
    if roles is None:
        return []
    if not isinstance(roles, list) or not all(isinstance(r, dict) for r in roles):
        raise Problems([("", f"aws:assumeRoles: must be a list of objects with roleArn, got {roles!r}")])
    out = []
    for i, role in enumerate(roles):
        unknown = sorted(set(role) - set(ASSUME_ROLE_KEYS))
        if unknown or "roleArn" not in role:
            raise Problems([("", f"aws:assumeRoles[{i}]: needs roleArn and takes only "
                                 f"{', '.join(sorted(ASSUME_ROLE_KEYS))}"
                                 + (f"; unknown: {', '.join(unknown)}" if unknown else ""))])
        try:
            out.append(AwsAssumeRole.model_validate({ASSUME_ROLE_KEYS[k]: v for k, v in role.items()}))
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            raise Problems([("", f"aws:assumeRoles[{i}].{first['loc'][0]}: {first['msg']}")]) from None
    return out
