"""The cluster the engine deploys to: ``e2e.controlplane`` (etcd, kube-apiserver, kube-controller-manager; the ones
``make e2e`` builds, reused from its cache) with the pinned upstream CRDs of ``../shared/crds`` installed, as
``e2e.acceptance`` installs them. The controller manager matters: ``pulumi destroy`` deletes in the foreground and
waits for the garbage collector.

The kubeconfig handed to the engine carries its key material inline (``*-data``), as a real cluster's kubeconfig
carries a token: the stack holds it as a secret, and the scenario checks ``pulumi stack export`` never shows it.
Everything listens on 127.0.0.1 only, so no private network namespace is needed (``make e2e`` needs one for KEDA's and
Karpenter's ports).
"""

from __future__ import annotations

import base64
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from e2e.acceptance import SHARED_CRDS, crd_documents, install_crds
from e2e.build import is_built
from e2e.controlplane import ControlPlane
from e2e.kube import Kubectl
from e2e.processes import Supervisor
from gpuscale.manifests.namespaces import PROMETHEUS_STACK_NAMESPACE
from gpuscale.versions import E2E_ETCD, E2E_KUBERNETES


def missing() -> str | None:
    """Why the cluster cannot start here, or ``None``."""
    for pin in (E2E_ETCD, E2E_KUBERNETES):
        if not is_built(pin):
            return f"{pin.name} {pin.version} is not built: python -m e2e.build {pin.name}"
    if not SHARED_CRDS.is_dir():
        return f"{SHARED_CRDS} (the team's pinned upstream CRDs) is absent"
    if shutil.which("openssl") is None:
        return "openssl is not on PATH (the control plane's certificates)"
    return None


@dataclass
class LocalCluster:
    supervisor: Supervisor
    plane: ControlPlane
    kubectl: Kubectl
    started_s: dict[str, float] = field(default_factory=dict)
    """Wall seconds of each start-up phase (``control_plane``, ``crds``), for the report."""

    @classmethod
    def start(cls, directory: Path) -> LocalCluster:
        supervisor = Supervisor(directory / "logs")
        plane = ControlPlane(supervisor, directory / "cluster")
        began = time.monotonic()
        plane.start(controllers=True)
        assert plane.kubeconfig is not None
        kubectl = Kubectl(plane.kubeconfig)
        up = time.monotonic()
        install_crds(kubectl, crd_documents())
        started = {"control_plane": round(up - began, 1), "crds": round(time.monotonic() - up, 1)}
        # what the left-out kube-prometheus-stack chart creates before gpuscale's objects arrive: its namespace, where
        # the platform's PrometheusRule goes (InferencePlatform orders AlertRules after the chart). Without it the
        # real engine's first `up` fails: 'namespaces "monitoring" not found'.
        kubectl.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PROMETHEUS_STACK_NAMESPACE}}])
        return cls(supervisor, plane, kubectl, started)

    def stop(self) -> None:
        self.supervisor.stop()

    def inline_kubeconfig(self) -> str:
        """The admin kubeconfig with the CA, certificate and key inline."""
        pki = self.plane.pki
        assert pki is not None

        def data(path: Path) -> str:
            return base64.b64encode(path.read_bytes()).decode()

        doc: dict[str, Any] = {
            "apiVersion": "v1", "kind": "Config", "current-context": "e2e",
            "clusters": [{"name": "e2e", "cluster": {"server": self.plane.server,
                                                     "certificate-authority-data": data(pki.ca.cert)}}],
            "users": [{"name": "admin", "user": {"client-certificate-data": data(pki.admin.cert),
                                                 "client-key-data": data(pki.admin.key)}}],
            "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "admin"}}],
        }
        return yaml.safe_dump(doc, sort_keys=False)

    def secret_fragments(self) -> list[str]:
        """Strings that must never appear in plain text in the stack's state: the client key, as written and inline."""
        pki = self.plane.pki
        assert pki is not None
        key = pki.admin.key.read_bytes()
        body = [line for line in key.decode().splitlines() if line and not line.startswith("-----")]
        return [base64.b64encode(key).decode(), *body]


def kubectl_resource(type_token: str) -> str:
    """``kubernetes:karpenter.sh/v1:NodePool`` -> ``NodePool.v1.karpenter.sh``, which ``kubectl get`` resolves to that
    group and version exactly; a core kind (``kubernetes:core/v1:Service``) is its kind alone."""
    _, api, kind = type_token.split(":")
    group, _, version = api.rpartition("/")
    return kind if group == "core" else f"{kind}.{version}.{group}"


def live(kubectl: Kubectl, type_token: str, inputs: dict[str, Any]) -> dict[str, Any] | None:
    """The live object a step's inputs name, or ``None`` when the API server has none."""
    meta = inputs.get("metadata") or {}
    args = ["get", kubectl_resource(type_token), str(meta["name"]), "--ignore-not-found", "-o", "json"]
    if meta.get("namespace"):
        args += ["-n", str(meta["namespace"])]
    out = kubectl.run(args).stdout.strip()
    return yaml.safe_load(out) if out else None
