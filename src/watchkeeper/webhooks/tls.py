"""The serving TLS context, swapped in place when the certificate rotates (no restart).

A server is started once with ``ServingTLS.server_context()``; that context's SNI callback
hands every new connection the context of the current certificate, so a rotation reaches
the next handshake while open connections keep theirs.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile


def context_from_pem(cert_pem: bytes, key_pem: bytes) -> ssl.SSLContext:
    """A server context from PEM in memory.

    ``load_cert_chain`` reads only files: the pair goes through a file only its owner can
    read (mkstemp: 0600) that is removed before this returns."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    fd, path = tempfile.mkstemp(prefix="wk-tls-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(cert_pem + b"\n" + key_pem)
        ctx.load_cert_chain(path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    return ctx


class ServingTLS:
    """Holds the current server ``SSLContext``; ``update`` swaps it when the pair changes."""

    def __init__(self) -> None:
        self._current: ssl.SSLContext | None = None
        self._cert: bytes = b""
        self._front: ssl.SSLContext | None = None

    @property
    def current(self) -> ssl.SSLContext:
        if self._current is None:
            raise RuntimeError("no certificate yet: await CertificateManager.ensure() first")
        return self._current

    @property
    def cert_pem(self) -> bytes:
        """The certificate being served (PEM)."""
        return self._cert

    def update(self, cert_pem: bytes, key_pem: bytes) -> bool:
        """A new context if the certificate changed; True when it did."""
        if cert_pem == self._cert:
            return False
        self._current = context_from_pem(cert_pem, key_pem)
        self._cert = cert_pem
        return True

    def server_context(self) -> ssl.SSLContext:
        """The context to start a server with: each handshake gets the current certificate."""
        if self._front is None:
            front = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            front.minimum_version = ssl.TLSVersion.TLSv1_2
            front.sni_callback = self._pick
            self._front = front
        return self._front

    def _pick(self, sock: ssl.SSLObject | ssl.SSLSocket, _name: str | None,
              _ctx: ssl.SSLContext) -> None:
        sock.context = self.current
