"""Pulumi entry point (``main: infra/`` in Pulumi.yaml): read the stack's config, deploy the platform, refuse bad
input as ``pulumi.RunError`` (the message alone, no traceback)."""

from gpuscale.program import main

main()
