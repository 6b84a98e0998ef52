"""The KEDA operator and its metrics server (the chart's two Deployments), run as local processes.

Flags and environment are the chart's, with addresses on 127.0.0.1 (``cmd/operator/main.go`` and
``cmd/adapter/main.go`` at v2.20.2): the operator's gRPC metrics service and the metrics server share one mTLS pair
(``pkg/metricsservice/utils/tls.go`` reads ``ca.crt``, ``tls.crt``, ``tls.key`` from ``--cert-dir``), generated here
instead of by the operator's cert rotation (``--enable-cert-rotation=false``, the flag's default). KEDA's admission
webhooks are not run: they only refuse ScaledObjects, and the acceptance tier already applies every emitted one.

The operator's manager watches ScaledJobs and (Cluster)CloudEventSources as well as ScaledObjects and exits when a
kind's CRD is absent (controller-runtime's cache sync times out), so their CRDs, which gpuscale never emits objects of
and ``../shared/crds`` does not carry, are installed from the module at the pin (``config/crd/bases/``).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2e import acceptance
from e2e.build import binary, data_files
from e2e.controlplane import Controller
from e2e.kube import load_documents
from e2e.processes import free_port, http_ok, port_open
from gpuscale.versions import E2E_KEDA

NAMESPACE = "keda"
METRICS_SERVICE = "keda-operator-metrics-apiserver"
"""The Service name the chart gives the metrics server (and its APIService points at)."""
API_SERVICE = "v1beta1.external.metrics.k8s.io"


@dataclass
class Keda(Controller):

    def _cert_dir(self) -> Path:
        pki = self.plane.pki
        assert pki is not None
        certs = self.directory / "certs"
        certs.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(pki.webhook_ca.cert, certs / "ca.crt")
        shutil.copyfile(pki.webhooks.cert, certs / "tls.crt")
        shutil.copyfile(pki.webhooks.key, certs / "tls.key")
        (certs / "tls.key").chmod(0o600)
        return certs

    def registration(self, port: int) -> list[dict[str, Any]]:
        """The Service and APIService through which the aggregator reaches the metrics server on 127.0.0.1."""
        pki = self.plane.pki
        assert pki is not None
        import base64

        return [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": METRICS_SERVICE, "namespace": NAMESPACE},
             "spec": {"type": "ExternalName", "externalName": "localhost",
                      "ports": [{"name": "https", "port": port, "targetPort": port}]}},
            {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": API_SERVICE},
             "spec": {"group": "external.metrics.k8s.io", "version": "v1beta1",
                      "service": {"name": METRICS_SERVICE, "namespace": NAMESPACE, "port": port},
                      "caBundle": base64.b64encode(pki.webhook_ca.cert.read_bytes()).decode(),
                      "groupPriorityMinimum": 100, "versionPriority": 100}},
        ]

    def start(self) -> None:
        assert self.plane.kubeconfig is not None
        crds = [d for pattern in E2E_KEDA.data for path in data_files(E2E_KEDA, pattern)
                for d in load_documents(path) if d.get("kind") == "CustomResourceDefinition"]
        acceptance.install_crds(self.kubectl, crds)
        certs = self._cert_dir()
        env = {"KUBECONFIG": str(self.plane.kubeconfig), "WATCH_NAMESPACE": "", "POD_NAMESPACE": NAMESPACE,
               "KEDA_CLUSTER_OBJECT_NAMESPACE": NAMESPACE, "KEDA_HTTP_DEFAULT_TIMEOUT": "3000"}
        grpc_port, health_port = free_port(), free_port()
        operator = self.supervisor.start("keda-operator", [
            str(binary(E2E_KEDA, "keda-operator")), "--leader-elect=false",
            f"--metrics-bind-address=127.0.0.1:{free_port()}", f"--health-probe-bind-address=127.0.0.1:{health_port}",
            f"--metrics-service-bind-address=127.0.0.1:{grpc_port}", f"--cert-dir={certs}",
            "--enable-cert-rotation=false", "--zap-log-level=info", "--zap-encoder=console",
        ], env=env)
        self.supervisor.wait_ready(operator, lambda: http_ok(f"http://127.0.0.1:{health_port}/readyz"))
        self.supervisor.wait_ready(operator, lambda: port_open(grpc_port))

        port = free_port()
        kubeconfig = str(self.plane.kubeconfig)
        adapter = self.supervisor.start("keda-metrics-apiserver", [
            str(binary(E2E_KEDA, "keda-adapter")), f"--secure-port={port}", "--bind-address=127.0.0.1",
            f"--cert-dir={certs}", f"--tls-cert-file={certs / 'tls.crt'}",
            f"--tls-private-key-file={certs / 'tls.key'}", f"--metrics-service-address=127.0.0.1:{grpc_port}",
            f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
            # the adapter's own clients (discovery, listers) read this; without it they try the in-cluster config
            f"--lister-kubeconfig={kubeconfig}", f"--port={free_port()}", "--zap-log-level=info", "--zap-encoder=console",
        ], env=env)
        self.supervisor.wait_ready(adapter, lambda: port_open(port))
        self.kubectl.apply(self.registration(port))

        def available() -> bool:
            api = self.kubectl.get("apiservice", API_SERVICE)
            return any(c["type"] == "Available" and c["status"] == "True"
                       for c in api.get("status", {}).get("conditions", []))

        self.supervisor.wait_ready(adapter, available, timeout_s=120)
