"""The LeaderWorkerSet controller (v0.9.0: the module proxy refuses v0.10.0, the chart's version) with its webhooks on
127.0.0.1.

Outside its chart it is configured by a ``Configuration`` file (``api/config/v1alpha1/configuration_types.go``):
internal cert management off (the harness's webhook pair is copied into ``webhook.certDir``, as ``tls.crt`` /
``tls.key``, controller-runtime's names), webhook server, probes and metrics on 127.0.0.1, no leader election. Its
webhook configurations are upstream's ``config/webhook/manifests.yaml`` with the kustomize patches the chart applies
(the pod webhooks only for pods of a LeaderWorkerSet), pointed at ``https://127.0.0.1:<port><path>``. The webhooks
default the LeaderWorkerSet and inject the group's env vars and labels into its pods: without them the controller would
see undefaulted objects.
"""

from __future__ import annotations

import base64
import copy
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from e2e.build import binary, data_files
from e2e.controlplane import Controller
from e2e.kube import load_documents
from e2e.processes import free_port, http_ok, port_open
from gpuscale.versions import E2E_LWS

NAMESPACE = "lws-system"
PATCHES = {"MutatingWebhookConfiguration": "mutating-patch.yaml",
           "ValidatingWebhookConfiguration": "validating-patch.yaml"}


def webhook_configurations(port: int, ca_bundle: bytes) -> list[dict[str, Any]]:
    """Upstream's webhook configurations, patched as the chart's kustomization does, served on 127.0.0.1."""
    manifests = data_files(E2E_LWS, "config/webhook/manifests.yaml")[0]
    out = []
    for doc in load_documents(manifests):
        doc = copy.deepcopy(doc)
        patch = data_files(E2E_LWS, f"config/webhook/{PATCHES[doc['kind']]}")[0]
        for op in load_documents_list(patch):
            if op["op"] != "replace" or not op["path"].startswith("/webhooks/"):
                raise ValueError(f"{patch}: unexpected patch {op['op']} {op['path']}")
            doc["webhooks"][int(op["path"].rsplit("/", 1)[1])] = op["value"]
        doc["metadata"]["name"] = f"lws-{doc['metadata']['name']}"
        for hook in doc["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}",
                                    "caBundle": base64.b64encode(ca_bundle).decode()}
        out.append(doc)
    return out


def load_documents_list(path: Path) -> list[dict[str, Any]]:
    """A kustomize JSON6902 patch file: one YAML list of operations."""
    with path.open(encoding="utf-8") as fh:
        ops = yaml.safe_load(fh)
    if not isinstance(ops, list):
        raise ValueError(f"{path}: not a list of patch operations")
    return ops


@dataclass
class Lws(Controller):

    def start(self) -> None:
        pki = self.plane.pki
        assert pki is not None and self.plane.kubeconfig is not None
        certs = self.directory / "certs"
        certs.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(pki.webhooks.cert, certs / "tls.crt")
        shutil.copyfile(pki.webhooks.key, certs / "tls.key")
        port, health = free_port(), free_port()
        config = {
            "apiVersion": "config.lws.x-k8s.io/v1alpha1", "kind": "Configuration",
            "leaderElection": {"leaderElect": False},
            "webhook": {"port": port, "host": "127.0.0.1", "certDir": str(certs)},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
            "metrics": {"bindAddress": f"127.0.0.1:{free_port()}"},
            "internalCertManagement": {"enable": False},
        }
        config_file = self.directory / "config.yaml"
        config_file.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        self.kubectl.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}])
        child = self.supervisor.start("lws", [str(binary(E2E_LWS, "lws-controller")), f"--config={config_file}"],
                                      env={"KUBECONFIG": str(self.plane.kubeconfig), "NAMESPACE": NAMESPACE})
        self.supervisor.wait_ready(child, lambda: http_ok(f"http://127.0.0.1:{health}/readyz"), timeout_s=120)
        self.supervisor.wait_ready(child, lambda: port_open(port))
        self.kubectl.apply(webhook_configurations(port, pki.webhook_ca.cert.read_bytes()))
