"""Certificates for the simulator: a serving CA (trustme) and a client CA for mTLS users.

Client certificates follow Kubernetes' x509 authenticator: CN is the user name, each O is a
group. trustme issues only one O, so the client CA signs with ``cryptography`` directly.
"""

from __future__ import annotations

import datetime
import ssl
from typing import Any

import trustme
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


class ClientCA:
    """A CA that issues client certificates; the server trusts it."""

    def __init__(self) -> None:
        self._key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "watchkeeper-sim-client-ca")])
        now = datetime.datetime.now(datetime.UTC)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=365))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self._key, hashes.SHA256())
        )

    @property
    def cert_pem(self) -> bytes:
        return self._cert.public_bytes(serialization.Encoding.PEM)

    def issue(self, user: str, groups: tuple[str, ...] = ()) -> tuple[bytes, bytes]:
        """(certificate PEM, private key PEM) for ``user`` in ``groups``."""
        key = ec.generate_private_key(ec.SECP256R1())
        attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, user))
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attrs))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
            )
            .sign(self._key, hashes.SHA256())
        )
        key_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        return cert.public_bytes(serialization.Encoding.PEM), key_pem


class ServerTLS:
    """The serving certificate (127.0.0.1, localhost) and the SSL context that checks clients."""

    def __init__(self) -> None:
        self.ca = trustme.CA()
        self.client_ca = ClientCA()
        self._leaf = self.ca.issue_cert("127.0.0.1", "localhost", "::1")

    @property
    def ca_pem(self) -> bytes:
        data: bytes = self.ca.cert_pem.bytes()
        return data

    def context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._leaf.configure_cert(ctx)
        ctx.load_verify_locations(cadata=self.client_ca.cert_pem.decode())
        ctx.verify_mode = ssl.CERT_OPTIONAL
        return ctx


def peer_identity(peercert: Any) -> tuple[str, tuple[str, ...]] | None:
    """(user, groups) from a verified client certificate as ``getpeercert()`` returns it."""
    if not peercert:
        return None
    user = ""
    groups: list[str] = []
    for rdn in peercert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                user = value
            elif key == "organizationName":
                groups.append(value)
    return (user, tuple(groups)) if user else None
