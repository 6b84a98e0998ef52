"""The control plane's key material, generated locally with ``cryptography``: one CA, serving certificates for
127.0.0.1, client certificates for the components, the front-proxy pair aggregation needs, and the service-account
signing key. Everything lives in the run's own directory and is thrown away with it."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALID = datetime.timedelta(days=2)


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.chmod(0o600)


def _write_cert(cert: x509.Certificate, path: Path) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


@dataclass(frozen=True)
class Pair:
    cert: Path
    key: Path


class Authority:
    """A CA that signs leaf certificates into one directory."""

    def __init__(self, directory: Path, name: str) -> None:
        self.directory = directory
        self.key = _key()
        now = datetime.datetime.now(datetime.UTC)
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self.cert = (
            x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(self.key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALID)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.pair = Pair(directory / f"{name}.crt", directory / f"{name}.key")
        _write_cert(self.cert, self.pair.cert)
        _write_key(self.key, self.pair.key)

    def issue(self, name: str, common_name: str, *, organizations: tuple[str, ...] = (), server: bool = False,
              dns: tuple[str, ...] = ()) -> Pair:
        """A leaf certificate: a client one (CN = user, O = groups), or a serving one for 127.0.0.1 and ``dns``."""
        key = _key()
        now = datetime.datetime.now(datetime.UTC)
        attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        attrs += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
        usages = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH] if server else \
            [ExtendedKeyUsageOID.CLIENT_AUTH]
        builder = (
            x509.CertificateBuilder().subject_name(x509.Name(attrs)).issuer_name(self.cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + _VALID)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        )
        if server:
            names: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                             x509.DNSName("localhost")]
            names += [x509.DNSName(d) for d in dns]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        pair = Pair(self.directory / f"{name}.crt", self.directory / f"{name}.key")
        _write_cert(cert, pair.cert)
        _write_key(key, pair.key)
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
    sa = _key()
    sa_key, sa_pub = directory / "sa.key", directory / "sa.pub"
    _write_key(sa, sa_key)
    sa_pub.write_bytes(sa.public_key().public_bytes(serialization.Encoding.PEM,
                                                    serialization.PublicFormat.SubjectPublicKeyInfo))
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
