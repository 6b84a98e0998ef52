"""etcd, kube-apiserver, kube-controller-manager and kube-scheduler on 127.0.0.1, as envtest runs them.

The apiserver has aggregation on (front-proxy client certificate and request-header CA), so an aggregated server
registered by an APIService (KEDA's metrics server) serves ``external.metrics.k8s.io``. There is no kube-proxy and no
cluster DNS: an aggregated server's Service is an ``ExternalName`` of ``localhost`` (the aggregator dials
``externalName:port`` for those, ``k8s.io/apiserver/pkg/util/proxy`` ``ResolveCluster``), webhooks use ``url``.
Every component authenticates with one admin client certificate (``system:masters``).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from e2e import certs
from e2e.build import binary
from e2e.kube import Kubectl
from e2e.processes import Supervisor, free_port, http_ok
from gpuscale.versions import E2E_ETCD, E2E_KUBERNETES

SERVICE_CIDR = "10.96.0.0/16"
HPA_SYNC_PERIOD_S = 5
"""kube-controller-manager ``--horizontal-pod-autoscaler-sync-period`` (default 15 s): the HPA (and so KEDA's 1 -> N
scaling) decides every 5 s, to keep scenarios short; every window in the emitted objects is still honoured."""


@dataclass
class ControlPlane:
    supervisor: Supervisor
    directory: Path
    pki: certs.ClusterPki | None = None
    apiserver_port: int = 0
    kubeconfig: Path | None = None

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"

    def ssl_context(self) -> ssl.SSLContext:
        assert self.pki is not None
        ctx = ssl.create_default_context(cafile=str(self.pki.ca.cert))
        ctx.load_cert_chain(str(self.pki.admin.cert), str(self.pki.admin.key))
        return ctx

    def write_kubeconfig(self) -> Path:
        assert self.pki is not None
        doc: dict[str, Any] = {
            "apiVersion": "v1", "kind": "Config", "current-context": "e2e",
            "clusters": [{"name": "e2e", "cluster": {"server": self.server,
                                                     "certificate-authority": str(self.pki.ca.cert)}}],
            "users": [{"name": "admin", "user": {"client-certificate": str(self.pki.admin.cert),
                                                 "client-key": str(self.pki.admin.key)}}],
            "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "admin"}}],
        }
        path = self.directory / "kubeconfig"
        path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
        path.chmod(0o600)
        return path

    def start(self, *, controllers: bool = True) -> None:
        """etcd and the apiserver; then, unless ``controllers`` is false, the controller manager and the scheduler."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self.pki = pki = certs.generate(self.directory / "pki")
        sup = self.supervisor
        etcd_port, peer_port = free_port(), free_port()
        etcd = sup.start("etcd", [
            str(binary(E2E_ETCD, "etcd")), f"--data-dir={self.directory / 'etcd'}", "--name=e2e",
            f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
            f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
            f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-cluster=e2e=http://127.0.0.1:{peer_port}",
            "--unsafe-no-fsync=true", "--quota-backend-bytes=4294967296",
        ])
        sup.wait_ready(etcd, lambda: http_ok(f"http://127.0.0.1:{etcd_port}/health"), timeout_s=60)

        self.apiserver_port = free_port()
        kube = E2E_KUBERNETES
        apiserver = sup.start("kube-apiserver", [
            str(binary(kube, "kube-apiserver")), f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={self.apiserver_port}",
            f"--tls-cert-file={pki.apiserver.cert}", f"--tls-private-key-file={pki.apiserver.key}",
            f"--client-ca-file={pki.ca.cert}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki.service_account_pub}",
            f"--service-account-signing-key-file={pki.service_account_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}", "--authorization-mode=Node,RBAC",
            "--allow-privileged=true",
            f"--requestheader-client-ca-file={pki.front_proxy_ca.cert}",
            "--requestheader-allowed-names=front-proxy-client", "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group", "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={pki.front_proxy_client.cert}",
            f"--proxy-client-key-file={pki.front_proxy_client.key}",
            "--enable-aggregator-routing=false", "--endpoint-reconciler-type=none",
        ])
        self.kubeconfig = self.write_kubeconfig()
        ctx = self.ssl_context()
        sup.wait_ready(apiserver, lambda: http_ok(f"{self.server}/readyz", context=ctx), timeout_s=180)

        if not controllers:
            return
        kcm_port = free_port()
        kcm = sup.start("kube-controller-manager", [
            str(binary(kube, "kube-controller-manager")), f"--kubeconfig={self.kubeconfig}",
            f"--authentication-kubeconfig={self.kubeconfig}", f"--authorization-kubeconfig={self.kubeconfig}",
            "--bind-address=127.0.0.1", f"--secure-port={kcm_port}", "--leader-elect=false",
            f"--service-account-private-key-file={pki.service_account_key}", f"--root-ca-file={pki.ca.cert}",
            "--use-service-account-credentials=false",
            f"--horizontal-pod-autoscaler-sync-period={HPA_SYNC_PERIOD_S}s",
            # every default controller: the node lifecycle controller is the one that lifts the not-ready taint the
            # apiserver puts on a new node once kwok reports it Ready (kwok's heartbeat stage keeps it Ready)
            "--controllers=*",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
        ])
        sched_port = free_port()
        sched = sup.start("kube-scheduler", [
            str(binary(kube, "kube-scheduler")), f"--kubeconfig={self.kubeconfig}",
            f"--authentication-kubeconfig={self.kubeconfig}", f"--authorization-kubeconfig={self.kubeconfig}",
            "--bind-address=127.0.0.1", f"--secure-port={sched_port}", "--leader-elect=false",
        ])
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE  # their self-signed serving certs; the probe reads only /healthz
        sup.wait_ready(kcm, lambda: http_ok(f"https://127.0.0.1:{kcm_port}/healthz", context=insecure))
        sup.wait_ready(sched, lambda: http_ok(f"https://127.0.0.1:{sched_port}/healthz", context=insecure))


@dataclass
class Controller:
    """A controller the harness runs as local processes against the control plane (KEDA, Karpenter, LWS)."""

    supervisor: Supervisor
    plane: ControlPlane
    kubectl: Kubectl
    directory: Path
