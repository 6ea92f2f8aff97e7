"""Key pairs and X.509 certificates for the webhook server (needs the `webhooks` extra).

The one module of the runtime that imports ``cryptography``: ``certs`` imports it only when
a certificate manager is used, so ``import watchkeeper`` works without the extra.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

# Backdated so a peer whose clock runs a little behind still accepts a fresh certificate.
_BACKDATE = dt.timedelta(minutes=5)


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its key, both PEM; ``key_pem`` is never logged nor put in a repr."""

    cert_pem: bytes
    key_pem: bytes

    def __repr__(self) -> str:
        return f"KeyPair({summary(self.cert_pem)})"


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def new_ca(common_name: str, now: dt.datetime, lifetime: dt.timedelta) -> KeyPair:
    """A self-signed CA that may sign only leaf certificates (path length 0)."""
    key = _key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE).not_valid_after(now + lifetime)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
            key_encipherment=False, data_encipherment=False, key_agreement=False,
            encipher_only=False, decipher_only=False), critical=True)
        .add_extension(ski, critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def new_serving(ca: KeyPair, hosts: list[str], now: dt.datetime,
                lifetime: dt.timedelta) -> KeyPair:
    """A server certificate for ``hosts`` (DNS names or IP addresses) signed by ``ca``.

    It never outlives its CA: a leaf valid past its issuer fails verification then."""
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    ca_key = serialization.load_pem_private_key(ca.key_pem, None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key is not an ECDSA key")
    key = _key()
    sans: list[x509.GeneralName] = []
    for host in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    not_after = min(now + lifetime, ca_cert.not_valid_after_utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(ca_cert.subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE).not_valid_after(not_after)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]),
                       critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                       critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


@dataclass(frozen=True)
class CertInfo:
    """What the rotation rules read of one certificate."""

    pem: bytes
    not_before: dt.datetime
    not_after: dt.datetime
    hosts: frozenset[str]
    subject_key: bytes  # the public key, DER: matches a certificate with its key
    issuer_key: bytes | None  # the authority key identifier, for "signed by"
    key_id: bytes  # this certificate's subject key identifier (as a CA)

    def remaining_fraction(self, now: dt.datetime) -> float:
        life = (self.not_after - self.not_before).total_seconds()
        return max(0.0, (self.not_after - now).total_seconds() / life) if life > 0 else 0.0


def _public_der(cert: x509.Certificate) -> bytes:
    return cert.public_key().public_bytes(serialization.Encoding.DER,
                                          serialization.PublicFormat.SubjectPublicKeyInfo)


def info(pem: bytes) -> CertInfo:
    """Parse one PEM certificate."""
    cert = x509.load_pem_x509_certificate(pem)
    hosts: set[str] = set()
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        hosts.update(san.get_values_for_type(x509.DNSName))
        hosts.update(str(ip) for ip in san.get_values_for_type(x509.IPAddress))
    except x509.ExtensionNotFound:
        pass
    try:
        aki = cert.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value
        issuer_key = aki.key_identifier
    except x509.ExtensionNotFound:
        issuer_key = None
    key_id = x509.SubjectKeyIdentifier.from_public_key(cert.public_key()).digest
    return CertInfo(cert.public_bytes(serialization.Encoding.PEM), cert.not_valid_before_utc,
                    cert.not_valid_after_utc, frozenset(hosts), _public_der(cert), issuer_key,
                    key_id)


def split_bundle(pem: bytes) -> list[CertInfo]:
    """Every certificate of a PEM bundle, in order."""
    return [info(c.public_bytes(serialization.Encoding.PEM))
            for c in x509.load_pem_x509_certificates(pem)] if pem.strip() else []


def key_matches(cert: CertInfo, key_pem: bytes) -> bool:
    """Whether ``key_pem`` is the private key of ``cert``."""
    key = serialization.load_pem_private_key(key_pem, None)
    der = key.public_key().public_bytes(serialization.Encoding.DER,
                                        serialization.PublicFormat.SubjectPublicKeyInfo)
    return der == cert.subject_key


def summary(cert_pem: bytes) -> str:
    """A certificate's subject and validity, for logs (never the key)."""
    try:
        c = info(cert_pem)
    except ValueError:
        return "unparsable certificate"
    fmt = "%Y-%m-%dT%H:%MZ"
    return f"hosts={sorted(c.hosts)} valid {c.not_before:{fmt}}..{c.not_after:{fmt}}"
