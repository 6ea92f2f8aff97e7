"""Where the API server is and how to talk to it: kubeconfig, in-cluster, exec plugins.

CONTRACT (the transport and the simulator depend on this shape; loaders fill it in):
``ClientConfig`` is immutable; ``ssl_context()`` builds the TLS context (verification on
unless ``insecure_skip_tls_verify``); ``auth`` yields request headers.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field

from watchkeeper.client.auth import Auth, NoAuth


class ConfigError(Exception):
    """The kubeconfig or in-cluster environment is unusable; the message says why and where."""


@dataclass(frozen=True)
class ClientConfig:
    server: str  # "https://host:port" or "http://127.0.0.1:port", no trailing slash
    namespace: str = "default"
    ca_data: bytes | None = field(default=None, repr=False)  # PEM bundle to trust
    insecure_skip_tls_verify: bool = False
    tls_server_name: str | None = None
    client_cert_data: bytes | None = field(default=None, repr=False)  # PEM
    client_key_data: bytes | None = field(default=None, repr=False)  # PEM
    auth: Auth = field(default_factory=NoAuth)
    context: str | None = None  # kubeconfig context name this came from, for messages

    def ssl_context(self) -> ssl.SSLContext | None:
        """None for plain HTTP; otherwise a verifying context unless told to skip."""
        if not self.server.startswith("https://"):
            return None
        ctx = ssl.create_default_context()
        if self.ca_data:
            ctx.load_verify_locations(cadata=self.ca_data.decode())
        if self.insecure_skip_tls_verify:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if self.client_cert_data and self.client_key_data:
            _load_cert_chain(ctx, self.client_cert_data, self.client_key_data)
        return ctx


def _load_cert_chain(ctx: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    """ssl only loads a chain from files: write both to a private temp dir, load, remove."""
    import os
    import tempfile

    with tempfile.TemporaryDirectory(prefix="watchkeeper-") as tmp:
        os.chmod(tmp, 0o700)
        cert_path = os.path.join(tmp, "client.crt")
        key_path = os.path.join(tmp, "client.key")
        for path, data in ((cert_path, cert), (key_path, key)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        try:
            ctx.load_cert_chain(cert_path, key_path)
        except ssl.SSLError as exc:
            raise ConfigError(f"client certificate or key is not valid PEM: {exc.reason}") from None
