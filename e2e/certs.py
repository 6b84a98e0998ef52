"""The control plane's key material, generated locally with the ``openssl`` command (no new Python dependency): one
CA, serving certificates for 127.0.0.1, client certificates for the components, the front-proxy pair aggregation
needs, a webhook CA and serving pair, and the service-account signing key. Everything lives in the run's own
directory and is thrown away with it."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

VALID_DAYS = 2
CURVE = "prime256v1"


class CertError(RuntimeError):
    pass


def _openssl(*args: str) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise CertError("openssl not found: install it (Debian: apt-get install openssl)")
    proc = subprocess.run([openssl, *args], capture_output=True, text=True, check=False, timeout=60)
    if proc.returncode != 0:
        raise CertError(f"openssl {args[0]} failed: {proc.stderr.strip()}")


@dataclass(frozen=True)
class Pair:
    cert: Path
    key: Path


def _subject(common_name: str, organizations: tuple[str, ...] = ()) -> str:
    return "".join(f"/O={o}" for o in organizations) + f"/CN={common_name}"


class Authority:
    """A CA that signs leaf certificates into one directory."""

    def __init__(self, directory: Path, name: str) -> None:
        self.directory = directory
        self.pair = Pair(directory / f"{name}.crt", directory / f"{name}.key")
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", f"ec_paramgen_curve:{CURVE}", "-nodes",
                 "-keyout", str(self.pair.key), "-out", str(self.pair.cert), "-days", str(VALID_DAYS),
                 "-subj", _subject(name), "-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,digitalSignature,keyCertSign,cRLSign")
        self.pair.key.chmod(0o600)

    def issue(self, name: str, common_name: str, *, organizations: tuple[str, ...] = (), server: bool = False,
              dns: tuple[str, ...] = ()) -> Pair:
        """A leaf certificate: a client one (CN = user, O = groups), or a serving one for 127.0.0.1 and ``dns``."""
        pair = Pair(self.directory / f"{name}.crt", self.directory / f"{name}.key")
        csr = self.directory / f"{name}.csr"
        _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", f"ec_paramgen_curve:{CURVE}", "-nodes",
                 "-keyout", str(pair.key), "-out", str(csr), "-subj", _subject(common_name, organizations))
        extensions = ["basicConstraints=critical,CA:FALSE",
                      "extendedKeyUsage=" + ("serverAuth,clientAuth" if server else "clientAuth")]
        if server:
            names = ["IP:127.0.0.1", "DNS:localhost", *(f"DNS:{d}" for d in dns)]
            extensions.append("subjectAltName=" + ",".join(names))
        ext = self.directory / f"{name}.ext"
        ext.write_text("\n".join(extensions) + "\n", encoding="utf-8")
        _openssl("x509", "-req", "-in", str(csr), "-CA", str(self.pair.cert), "-CAkey", str(self.pair.key),
                 "-CAcreateserial", "-out", str(pair.cert), "-days", str(VALID_DAYS), "-extfile", str(ext))
        pair.key.chmod(0o600)
        return pair


@dataclass(frozen=True)
class ClusterPki:
    """Every file the control plane's flags name."""

    ca: Pair
    apiserver: Pair
    admin: Pair
    front_proxy_ca: Pair
    front_proxy_client: Pair
    service_account_key: Path
    service_account_pub: Path
    webhook_ca: Pair
    webhooks: Pair
    """One serving pair for every webhook and aggregated server the harness runs (all on 127.0.0.1)."""


def generate(directory: Path) -> ClusterPki:
    directory.mkdir(parents=True, exist_ok=True)
    ca = Authority(directory, "ca")
    front = Authority(directory, "front-proxy-ca")
    hooks = Authority(directory, "webhook-ca")
    sa_key, sa_pub = directory / "sa.key", directory / "sa.pub"
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", f"ec_paramgen_curve:{CURVE}", "-out", str(sa_key))
    sa_key.chmod(0o600)
    _openssl("pkey", "-in", str(sa_key), "-pubout", "-out", str(sa_pub))
    return ClusterPki(
        ca=ca.pair,
        apiserver=ca.issue("apiserver", "kube-apiserver", server=True,
                           dns=("kubernetes", "kubernetes.default", "kubernetes.default.svc")),
        admin=ca.issue("admin", "e2e-admin", organizations=("system:masters",)),
        front_proxy_ca=front.pair,
        front_proxy_client=front.issue("front-proxy-client", "front-proxy-client"),
        service_account_key=sa_key,
        service_account_pub=sa_pub,
        webhook_ca=hooks.pair,
        webhooks=hooks.issue("webhooks", "e2e-webhooks", server=True,
                             dns=("keda-operator-metrics-apiserver.keda.svc", "lws-webhook-service.lws-system.svc")),
    )
