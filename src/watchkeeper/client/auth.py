"""Credential providers: how a request gets its Authorization header.

A provider is asked for headers before every request and told to ``refresh`` after a 401,
so rotating credentials (bound service-account tokens, exec plugins) keep working without
a restart. Providers never put a secret in ``repr`` or in an exception.
"""

from __future__ import annotations

import base64
import logging
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, runtime_checkable

log = logging.getLogger(__name__)


@runtime_checkable
class Auth(Protocol):
    async def headers(self) -> dict[str, str]:
        """Headers to add to the next request (may run a plugin or read a file)."""
        ...

    async def refresh(self) -> None:
        """Called after a 401: drop cached credentials so the next ``headers`` gets fresh ones."""
        ...


@runtime_checkable
class ClientCertificateSource(Protocol):
    """An Auth that may also supply a TLS client certificate (exec plugins can return one).

    The transport asks before opening connections; a changed pair means new connections.
    """

    async def client_certificate(self) -> tuple[bytes, bytes] | None:
        """(certificate PEM, key PEM), or None when this credential has no certificate."""
        ...


class NoAuth:
    async def headers(self) -> dict[str, str]:
        return {}

    async def refresh(self) -> None:
        return None

    def __repr__(self) -> str:
        return "NoAuth()"


class StaticToken:
    """A bearer token given inline (kubeconfig ``token``)."""

    def __init__(self, token: str) -> None:
        self._token = token

    async def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._token}"}

    async def refresh(self) -> None:
        return None

    def __repr__(self) -> str:
        return "StaticToken(<redacted>)"


class BasicAuth:
    """Username and password (kubeconfig ``username``/``password``)."""

    def __init__(self, username: str, password: str) -> None:
        self._username = username
        self._value = base64.b64encode(f"{username}:{password}".encode()).decode()

    async def headers(self) -> dict[str, str]:
        return {"Authorization": f"Basic {self._value}"}

    async def refresh(self) -> None:
        return None

    def __repr__(self) -> str:
        return f"BasicAuth(username={self._username!r}, password=<redacted>)"


class TokenFile:
    """A bearer token kept in a file that something else rotates (kubelet, bound SA tokens).

    Read when built (so a missing file fails at load time), again at most every ``max_age``
    seconds, and on the first request after ``refresh`` (a 401). If a later read fails, the
    last good token stays in use and a warning is logged: a rotation in progress must not
    break requests. ``fallback`` is kubeconfig's inline ``token`` when ``tokenFile`` is also
    set: client-go uses the file when it can be read and the inline token otherwise.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_age: float = 60.0,
        fallback: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = Path(path)
        self._max_age = max_age
        self._clock = clock
        self._stale = False
        if fallback is None:
            self._token = self._read()
        else:
            self._token = fallback
            self._reload()
        self._read_at = clock()

    def _read(self) -> str:
        """The file's content without surrounding whitespace; raises OSError or ValueError."""
        token = self.path.read_text(encoding="utf-8").strip()
        if not token:
            raise ValueError(f"token file {self.path} is empty")
        if not header_safe(token):
            raise ValueError(f"token file {self.path} holds characters a header cannot carry")
        return token

    def _reload(self) -> None:
        self._stale = False
        self._read_at = self._clock()
        try:
            self._token = self._read()
        except (OSError, ValueError) as exc:
            log.warning(
                "cannot re-read token file %s (%s); keeping the previous token",
                self.path,
                describe_read_error(exc),
            )

    async def headers(self) -> dict[str, str]:
        if self._stale or self._clock() - self._read_at >= self._max_age:
            self._reload()
        return {"Authorization": f"Bearer {self._token}"}

    async def refresh(self) -> None:
        self._stale = True

    def __repr__(self) -> str:
        return f"TokenFile({str(self.path)!r})"


_HEADER_UNSAFE = re.compile(r"[\r\n\0]|[^\x00-\xff]")


def header_safe(value: str) -> bool:
    """Whether ``value`` can be sent as an HTTP header value by both request paths: aiohttp
    refuses CR, LF and NUL (ValueError), the watch stream encodes the request as latin-1
    (UnicodeEncodeError). A credential that fails this is refused where it is read, as a
    typed error that does not quote it."""
    return _HEADER_UNSAFE.search(value) is None


def describe_read_error(exc: BaseException) -> str:
    """Why a credential file could not be used, without quoting any of its content."""
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8 text"
    return str(exc)
