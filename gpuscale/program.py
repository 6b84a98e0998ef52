"""The Pulumi program: one ``InferencePlatform`` from a spec, and the stack outputs.

``infra/__main__.py`` runs it with the spec read from Pulumi config; ``gpuscale synth`` runs the same function
under deterministic mocks.
"""

from __future__ import annotations

import pulumi

from gpuscale.components.inference_platform import InferencePlatform, InferencePlatformArgs
from gpuscale.spec.platform import PlatformSpec


def deploy(spec: PlatformSpec) -> InferencePlatform:
    platform = InferencePlatform("gpuscale", InferencePlatformArgs(spec=spec))
    pulumi.export("cluster_name", platform.cluster_name)
    pulumi.export("kubeconfig", platform.kubeconfig)
    pulumi.export("endpoint", platform.endpoint)
    pulumi.export("node_pool_names", platform.node_pool_names)
    pulumi.export("queue_names", platform.queue_names)
    pulumi.export("model_endpoints", platform.model_endpoints)
    return platform
