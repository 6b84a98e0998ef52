"""What "production" means, and what it adds: pinned AMIs.

Production is one thing: the spec's ``environment.stage == "prod"``. Stack names do not decide it (a stack called
``prod-eu`` with ``stage: staging`` is not production, and ``live`` with ``stage: prod`` is). The policy pack sees
resources, not the spec, so gpuscale writes the stage where the pack reads it: every GPU EC2NodeClass carries the
``gpuscale.io/stage`` tag in ``spec.tags`` (so do its instances). For resources gpuscale did not emit, the pack's config
names the stage of the stack it runs on:
``--policy-pack-config`` ``{"prod-ami-pinned": {"stage": "prod"}}``. With neither, a resource is not production.

In production an AMI must be pinned: ``@latest`` (or a floating SSM parameter) replaces every node, GPU nodes
included, each time AWS publishes an AMI.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpuscale import labels, versions

PRODUCTION_STAGE = "prod"
"""The ``environment.stage`` that is production."""
STAGE_TAG = labels.STAGE_TAG


def is_production(stage: str | None) -> bool:
    return stage == PRODUCTION_STAGE


def stage_of(tags: Mapping[str, object], configured: str | None = None) -> str | None:
    """The stage of an emitted EC2NodeClass: its ``gpuscale.io/stage`` tag, else the pack's configured stage."""
    tagged = tags.get(STAGE_TAG)
    return str(tagged) if tagged is not None else configured


def unpinned_alias(alias: str) -> bool:
    """Whether an AMI alias follows the newest release (``al2023@latest``)."""
    return alias.endswith("@latest")


def floating_ssm_parameter(parameter: str) -> bool:
    """Whether an SSM parameter resolves to whatever AMI AWS published last."""
    return "/recommended/" in parameter or parameter.endswith("/latest") or "/latest/" in parameter


def unpinned_ami_message(what: str) -> str:
    """Why ``what`` (the alias or parameter, with where it is) is refused in production, and the fix."""
    return (
        f"{what} in production drifts every node (GPU nodes included) whenever AWS publishes an AMI. Pin a release, "
        f"e.g. {versions.EKS_AL2023_AMI_ALIAS}, and roll it forward in a reviewed change"
    )
