"""HTTP to the API server: one aiohttp session, TLS, timeouts, keepalive, typed errors.

Everything that can fail here fails as a ``watchkeeper.client.errors.ApiError`` subclass,
so the layers above never see an aiohttp or ssl exception.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
from multidict import CIMultiDict, CIMultiDictProxy

from watchkeeper._version import __version__
from watchkeeper.client._unexpected import API_SUCCESS, unexpected_status
from watchkeeper.client.auth import ClientCertificateSource
from watchkeeper.client.circuit import Circuit
from watchkeeper.client.config import ClientConfig, ConfigError
from watchkeeper.client.errors import (
    ApiError,
    ConnectionFailed,
    InvalidResponse,
    Timeout,
    Unauthorized,
)
from watchkeeper.client.exec_auth import ExecAuth
from watchkeeper.client.redact import Redactor
from watchkeeper.client.server_warnings import LogOnce, WarningHandler, parse_warnings

USER_AGENT = f"watchkeeper/{__version__}"

# Dead peers are found by the watch idle timeout; keepalive is the kernel-level backstop
# (a silent NAT drop is detected in KEEPIDLE + KEEPINTVL * KEEPCNT = 60 s).
_KEEPIDLE, _KEEPINTVL, _KEEPCNT = 30, 10, 3


def _keepalive_socket(addr_info: Any) -> socket.socket:
    family, type_, proto = addr_info[0], addr_info[1], addr_info[2]
    sock = socket.socket(family, type_, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (
        ("TCP_KEEPIDLE", _KEEPIDLE),
        ("TCP_KEEPINTVL", _KEEPINTVL),
        ("TCP_KEEPCNT", _KEEPCNT),
    ):
        if hasattr(socket, name):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)
    return sock


@dataclass(frozen=True)
class Timeouts:
    """Client time limits, in seconds.

    ``exec_plugin`` bounds one run of a kubeconfig exec credential plugin (client-go has no
    limit; a hung plugin would hold every request and every watcher's retry behind it, so
    it fails with ``ExecPluginError``, surfaced as ``Unauthorized``, and is retried). An
    ``ExecAuth(timeout=...)`` given explicitly keeps its own limit.
    """

    connect: float = 10.0
    request: float = 60.0  # whole non-streaming request
    exec_plugin: float = 60.0

    def __post_init__(self) -> None:
        for name in ("connect", "request", "exec_plugin"):
            if not getattr(self, name) > 0:
                raise ValueError(f"Timeouts.{name} must be > 0 seconds")


@dataclass
class Response:
    status: int
    headers: Mapping[str, str]
    body: bytes


class Transport:
    """Owns the HTTP session; created lazily inside the running event loop."""

    def __init__(
        self,
        config: ClientConfig,
        timeouts: Timeouts | None = None,
        on_warning: WarningHandler | None = None,
    ) -> None:
        self.config = config
        self.timeouts = timeouts or Timeouts()
        if isinstance(config.auth, ExecAuth):
            config.auth.default_timeout(self.timeouts.exec_plugin)
        self.on_warning: WarningHandler = on_warning or LogOnce()
        self._session: aiohttp.ClientSession | None = None
        self._ssl: ssl.SSLContext | None = config.ssl_context()
        self._base = config.server.rstrip("/")
        # What the server says is quoted through it: it knows every credential sent.
        self.redactor = Redactor(config.client_key_data)
        # The Client's shared reachability circuit: every successful response closes it.
        self.circuit: Circuit | None = None

    async def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            auth = self.config.auth
            if self._ssl is not None and isinstance(auth, ClientCertificateSource):
                pair = await auth.client_certificate()  # exec plugins may hand out certs
                if pair is not None:
                    from dataclasses import replace

                    self.redactor.note_key(pair[1])
                    self._ssl = replace(
                        self.config, client_cert_data=pair[0], client_key_data=pair[1]
                    ).ssl_context()
            connector = aiohttp.TCPConnector(
                ssl=self._ssl if self._ssl is not None else False,
                limit=0,
                socket_factory=_keepalive_socket,
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                headers={"User-Agent": USER_AGENT, **_encoding(self.config)},
                auto_decompress=True,
                skip_auto_headers=("Content-Type",),
            )
            # aiohttp silently repeats an idempotent request once when the connection breaks,
            # even on a fresh connection: that doubles attempts behind the backoff's back
            # (measured: 12 connections for 6 scheduled attempts). Every attempt must be ours.
            if hasattr(self._session, "_retry_connection"):
                self._session._retry_connection = False
        return self._session

    def _failure(self, exc: BaseException, method: str, path: str) -> BaseException:
        return _failure(exc, method, path, self.redactor)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _auth_headers(self, method: str, path: str) -> dict[str, str]:
        """The credentials' headers; a credential plugin that fails is an ``Unauthorized``
        (no credentials), so a watcher surfaces and retries it instead of dying."""
        try:
            headers = await self.config.auth.headers()
        except ConfigError as exc:
            raise Unauthorized(
                f"could not obtain credentials: {self.redactor.scrub(str(exc))}",
                reason="CredentialsUnavailable", method=method, path=path,
            ) from exc
        self.redactor.note(headers)  # before it is sent: a server may echo it at once
        return headers

    async def _refresh_credentials(self) -> None:
        """After a 401: fresh token next request; a fresh client certificate needs a new
        session (TLS credentials are fixed per connection)."""
        await self.config.auth.refresh()
        if isinstance(self.config.auth, ClientCertificateSource):
            await self.close()

    async def _headers(self, accept: str, method: str, path: str) -> CIMultiDict[str]:
        headers = CIMultiDict({"Accept": accept, **await self._auth_headers(method, path)})
        if self.config.impersonate is not None:
            headers.extend(self.config.impersonate.headers())
        return headers

    def warn(self, headers: CIMultiDictProxy[str]) -> None:
        """Hand the response's ``Warning`` texts, scrubbed, to the warning handler."""
        for text in parse_warnings(headers.getall("Warning", ())):
            self.on_warning(self.redactor.scrub(text))

    def _kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {}
        if self.config.tls_server_name:
            kw["server_hostname"] = self.config.tls_server_name
        return kw

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
        accept: str = "application/json",
    ) -> Response:
        """One request, retried once after a 401 with refreshed credentials."""
        for attempt in (1, 2):
            headers = await self._headers(accept, method, path)
            if content_type:
                headers["Content-Type"] = content_type
            timeout = aiohttp.ClientTimeout(
                total=self.timeouts.request, sock_connect=self.timeouts.connect
            )
            failure: BaseException | None = None
            try:
                async with (await self._get_session()).request(
                    method,
                    self._base + path,
                    params=params,
                    data=body,
                    headers=headers,
                    timeout=timeout,
                    allow_redirects=False,
                    **self._kwargs(),
                ) as resp:
                    data = await resp.read()
                    status, resp_headers = resp.status, resp.headers
            except BaseException as exc:
                failure = self._failure(exc, method, path)
                if failure is exc:
                    raise
            if failure is not None:
                raise failure  # outside the handler: nothing of aiohttp's in its chain
            self.warn(resp_headers)
            if status == 401 and attempt == 1:
                await self._refresh_credentials()
                continue
            if status >= 400:
                raise self.redactor.response_error(
                    status, data, method=method, path=path, headers=resp_headers)
            if status not in API_SUCCESS:  # a redirect, a 1xx: not the API's answer
                raise self.redactor.error(unexpected_status(
                    status, resp_headers, method=method, path=path))
            if self.circuit is not None:
                self.circuit.record_success()
            return Response(status, resp_headers, data)
        raise AssertionError("unreachable")  # pragma: no cover


def _encoding(config: ClientConfig) -> dict[str, str]:
    """aiohttp asks for gzip and deflate by default; ``identity`` turns compression off."""
    return {"Accept-Encoding": "identity"} if config.disable_compression else {}


class TransportFailure(Exception):
    """What the HTTP library reported, as text with the credentials blanked out: kept as
    the ``__cause__`` of a typed error instead of the library's exception, whose repr holds
    the request headers (the Authorization header among them)."""


def _failure(exc: BaseException, method: str, path: str, redactor: Redactor) -> BaseException:
    """The typed error for ``exc``, with a scrubbed text of it as its only cause; ``exc``
    itself when it is already ours or must pass (cancellation)."""
    error = _translate(exc, method, path)
    if error is exc:
        return redactor.error(error) if isinstance(error, ApiError) else error
    assert isinstance(error, ApiError)
    error = redactor.error(error)
    error.__cause__ = TransportFailure(redactor.scrub(f"{type(exc).__name__}: {exc}"))
    error.__context__ = None
    return error


def _translate(exc: BaseException, method: str, path: str) -> BaseException:
    """Map an aiohttp/ssl/socket failure onto our error classes; pass others through."""
    if isinstance(exc, ApiError | asyncio.CancelledError | KeyboardInterrupt | SystemExit):
        return exc
    where: dict[str, Any] = {"method": method, "path": path}
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return ConnectionFailed(
            f"TLS certificate verification failed: {exc.certificate_error}",
            reason="TLSError", **where,
        )
    if isinstance(exc, aiohttp.ClientSSLError):
        return ConnectionFailed(f"TLS handshake failed: {exc}", reason="TLSError", **where)
    if isinstance(exc, asyncio.TimeoutError | aiohttp.ServerTimeoutError):
        return Timeout("no response from the server in time", reason="ClientTimeout", **where)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return ConnectionFailed(
            f"cannot connect to {exc.host}:{exc.port}: {exc.os_error.strerror or exc.os_error}",
            reason="ConnectionRefused", **where,
        )
    if isinstance(exc, aiohttp.ClientPayloadError):
        return ConnectionFailed(
            "the connection was cut in the middle of the response", reason="ConnectionReset",
            **where,
        )
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        # Also what a TLS server's rejection of our client certificate looks like (TLS 1.3
        # reports it after the handshake): no response may have started at all.
        return ConnectionFailed(
            "the server closed the connection before the response was complete",
            reason="ConnectionReset", **where,
        )
    if isinstance(exc, aiohttp.ClientResponseError):
        return InvalidResponse(f"malformed HTTP response: {exc.message}", **where)
    if isinstance(exc, aiohttp.ClientError | OSError):
        return ConnectionFailed(f"connection failed: {exc}", reason="ConnectionError", **where)
    return exc
