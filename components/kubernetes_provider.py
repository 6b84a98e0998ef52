"""The Kubernetes provider gpuscale creates (``EksCluster.provider``), and the same settings for a provider made from
any kubeconfig (the real-engine tier's local cluster), so both plan the same steps.

``enable_config_map_mutable``: without it pulumi-kubernetes replaces a ConfigMap whose data changes
(``provider/pkg/provider/diff.go`` L31-32 at f47bc2d6, ``gpuscale.synth.replacements``). gpuscale's ConfigMaps are
the Grafana dashboards, which the sidecar (kiwigrid/k8s-sidecar ``src/resources.py`` at 2.10.1,
``_process_config_map``) writes to a file per data key on ADDED/MODIFIED and deletes on DELETED: updated in place,
the dashboard is rewritten; replaced with its fixed name (delete first), it is gone until the new one lands; and an
auto-named replacement would be worse (the new ConfigMap writes ``<uid>.json``, then the old one's deletion removes
that same file, and in WATCH mode nothing writes it back). An in-place update is what a dashboard change should be,
so the provider allows it. Changing this option updates the provider without replacing it (``DiffConfig`` replaces
only for ``kubeconfig``, ``context``, ``cluster``, ``renderYamlToDirectory``, ``clusterIdentifier``: provider.go
L408-480). A ConfigMap marked ``immutable: true`` is still replaced; a Secret's data still replaces it (gpuscale
creates none).
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from gpuscale.components.inputs import StrInput

__all__ = ["kubernetes_provider"]

ENABLE_CONFIG_MAP_MUTABLE = True


def kubernetes_provider(name: str, kubeconfig: StrInput, opts: pulumi.ResourceOptions | None = None) -> k8s.Provider:
    """A Kubernetes provider for ``kubeconfig`` with gpuscale's settings (the module docstring)."""
    return k8s.Provider(name, kubeconfig=kubeconfig, enable_config_map_mutable=ENABLE_CONFIG_MAP_MUTABLE, opts=opts)
