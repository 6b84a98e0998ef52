"""Pulumi entry point (``main: infra/`` in Pulumi.yaml): read the stack's gpuscale config, deploy the platform."""

from gpuscale.program import deploy
from gpuscale.stackfile import load_from_pulumi_config

deploy(load_from_pulumi_config())
