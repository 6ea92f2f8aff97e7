"""The watch stream: one HTTP/1.1 request on its own connection, read by a buffered
protocol (``_http1``) and decoded in pieces (``_pieces``).

Why not aiohttp here: its ``readany`` path costs ~2.6 µs of client CPU per event and churns
the heap; this path takes ~35 reads per 100,000 events into one preallocated buffer and one
msgspec decode per ~64 KiB piece (docs/decisions.md, "The watch stream"). The other
verbs stay on aiohttp.

Parity with the transport's other verbs: the same base URL (scheme, host, port, path prefix), TLS
context (CA, skip-verify, client certificates including an exec plugin's), SNI
(``tls-server-name``), auth and impersonation headers, a retry after a 401 with refreshed
credentials, TCP keepalive, connect timeout, typed errors, Warning headers. Like the
transport it connects directly (no proxy: the client has never used one). Watches ask for
``Accept-Encoding: identity``: kube-apiserver never compresses a watch, and a stream of
small flushed lines gains nothing from it; a 200 with a Content-Encoding anyway is refused
as InvalidResponse. The connection is not pooled: it is closed when the stream ends.
"""

from __future__ import annotations

import asyncio
import ssl
import zlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

from multidict import CIMultiDict, CIMultiDictProxy

from watchkeeper.client import _pieces
from watchkeeper.client._http1 import BUFFER_SIZE, FramingError, Head, ResponseProtocol
from watchkeeper.client._pieces import (
    MAX_LINE_BYTES,
    PIECE_BYTES,
    EventClasses,
    LazyPiece,
    PieceDecoder,
)
from watchkeeper.client._unexpected import unexpected_status
from watchkeeper.client.errors import (
    ApiError,
    ConnectionFailed,
    InvalidResponse,
    Timeout,
)
from watchkeeper.client.objects import ObjectEvent, RawEvent, last_version, raw_event_class
from watchkeeper.client.redact import Redactor

if TYPE_CHECKING:
    from watchkeeper.client.transport import Transport

__all__ = ["MAX_LINE_BYTES", "PIECE_BYTES", "FastWatchStream", "WatchStream", "open_stream"]

_KEEPIDLE, _KEEPINTVL, _KEEPCNT = 30, 10, 3
_MAX_ERROR_BODY = 1 << 20


def _keepalive(transport: asyncio.BaseTransport) -> None:
    import socket

    sock = transport.get_extra_info("socket")
    if sock is None:
        return
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for name, value in (("TCP_KEEPIDLE", _KEEPIDLE), ("TCP_KEEPINTVL", _KEEPINTVL),
                            ("TCP_KEEPCNT", _KEEPCNT)):
            if hasattr(socket, name):
                sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)
    except OSError:  # pragma: no cover - not a TCP socket
        pass


class _Target:
    """Where the base URL points: scheme, host, port, path prefix."""

    def __init__(self, base: str) -> None:
        url = urlsplit(base)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"unsupported server URL scheme: {url.scheme!r}")
        self.tls = url.scheme == "https"
        self.host = url.hostname
        self.port = url.port or (443 if self.tls else 80)
        self.prefix = url.path.rstrip("/")
        default = (self.tls and self.port == 443) or (not self.tls and self.port == 80)
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = host if default else f"{host}:{self.port}"


def _request_bytes(target: _Target, path: str, params: Mapping[str, str] | None,
                   headers: CIMultiDict[str], user_agent: str) -> bytes:
    query = f"?{urlencode(params)}" if params else ""
    lines = [f"GET {target.prefix}{path}{query} HTTP/1.1", f"Host: {target.host_header}",
             f"User-Agent: {user_agent}", "Accept-Encoding: identity"]
    for name, value in headers.items():
        if any(c in name or c in value for c in "\r\n\0"):
            # Never echo the value: it may be a credential.
            raise ValueError(f"newline or NUL in the value of the {name!r} header")
        lines.append(f"{name}: {value}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _conn_error(exc: BaseException, target: _Target, where: dict[str, Any],
                redactor: Redactor | None = None) -> ApiError:
    if isinstance(exc, ssl.SSLCertVerificationError):
        return ConnectionFailed(
            f"TLS certificate verification failed: {exc.verify_message or exc.reason}",
            reason="TLSError", **where)
    if isinstance(exc, ssl.SSLError):
        return ConnectionFailed(f"TLS handshake failed: {exc.reason or exc}", reason="TLSError",
                                **where)
    if isinstance(exc, TimeoutError):
        return Timeout("no response from the server in time", reason="ClientTimeout", **where)
    if isinstance(exc, ConnectionRefusedError):
        return ConnectionFailed(
            f"cannot connect to {target.host}:{target.port}: {exc.strerror or exc}",
            reason="ConnectionRefused", **where)
    if isinstance(exc, ConnectionResetError | BrokenPipeError | FramingError):
        if isinstance(exc, FramingError) and exc.args[:1] != ("closed",):
            said = f": {(redactor or Redactor()).excerpt(exc.quoted, 60)!r}" if exc.quoted else ""
            return InvalidResponse(f"malformed HTTP response: {exc}{said}", **where)
        return ConnectionFailed(
            "the server closed the connection before the response was complete",
            reason="ConnectionReset", **where)
    if isinstance(exc, OSError):
        return ConnectionFailed(f"cannot connect to {target.host}:{target.port}: "
                                f"{exc.strerror or exc}", reason="ConnectionError", **where)
    return ConnectionFailed(f"connection failed: {type(exc).__name__}", reason="ConnectionError",
                            **where)


class _Connection:
    """One open response: protocol, head, timers. Closed by ``close``."""

    def __init__(self, proto: ResponseProtocol, head: Head, where: dict[str, Any],
                 idle: float | None, line_timeout: float | None) -> None:
        self.proto, self.head, self.where = proto, head, where
        self.idle, self.line_timeout = idle, line_timeout
        self._line_since: float | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._loop = asyncio.get_running_loop()
        self._arm(self._loop.time())

    def _arm(self, now: float) -> None:
        """One timer per stream, re-armed when it fires: no per-read timer cost."""
        due = [t for t in (self.idle, self.line_timeout) if t is not None]
        if due and not self.proto.closed:
            self._timer = self._loop.call_at(now + min(due), self._check)

    def _check(self) -> None:
        proto, now = self.proto, self._loop.time()
        self._timer = None
        if proto.closed or proto.eof:
            return
        if self.idle is not None and not proto.paused and now - proto.last_rx >= self.idle:
            proto.fail(Timeout(f"the watch stream was silent for {self.idle:g} s",
                               reason="ClientTimeout", **self.where))
            return
        since = self._line_since
        if self.line_timeout is not None and since is not None and proto.pending_line() and \
                now - since >= self.line_timeout:
            proto.fail(Timeout(
                f"a watch event did not complete within {self.line_timeout:g} s "
                f"({proto.pending_line()} bytes of it arrived)", reason="LineTimeout",
                **self.where))
            return
        due = []
        if self.idle is not None:  # while paused by us, silence is ours, not the server's
            due.append(now + self.idle if proto.paused else proto.last_rx + self.idle)
        if self.line_timeout is not None:
            started = since if since is not None and proto.pending_line() else now
            due.append(started + self.line_timeout)
        due_at = min(due)
        self._timer = self._loop.call_at(max(due_at, now + 0.001), self._check)

    def line_started(self) -> None:
        if self._line_since is None:
            self._line_since = self._loop.time()

    def line_done(self) -> None:
        self._line_since = None

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.proto.close()


_RAW_CLASSES: EventClasses = {kind: raw_event_class(kind)
                              for kind in ("ADDED", "MODIFIED", "DELETED")}


class FastWatchStream:
    """Decoded events of one open watch response, in pieces; see ``_pieces``.

    Iterate ``batches()`` for lists of typed events, one list per piece (the watcher's
    loop), or the stream itself for ``RawEvent`` objects (the ``Api.watch`` contract). Both
    interpret the lines: a BOOKMARK is a ``Bookmark``, an ERROR line is raised as its typed
    ``ApiError`` (410 ``Gone``, ...) after the events before it.
    """

    def __init__(self, conn: _Connection, path: str, *, lazy: bool, max_line: int,
                 piece: int | None = None, redactor: Redactor | None = None) -> None:
        self._conn = conn
        self._path = path
        self.lazy = lazy
        self.decoder = PieceDecoder(path, lazy=lazy, redactor=redactor)
        self._max_line = max_line
        # A piece never spans more than ``max_line`` bytes unless it is one line: so a
        # complete line over the cap is a piece longer than the cap (one check per piece).
        size = piece or (_pieces.PIECE_BYTES if lazy else _pieces.EAGER_PIECE_BYTES)
        self._piece = min(size, max_line)
        self.headers = conn.head.headers
        # ``last_rx``: the loop time the last bytes arrived (the watcher's last event time).
        self.receiver = conn.proto

    @property
    def resource_version(self) -> str:
        """The last resourceVersion of the events decoded so far ("" if none)."""
        return self.decoder.resource_version

    def _starved(self) -> bool:
        """No whole line to take: True at the clean end of the body; raises what else ended
        it (a failure, a cut line, a line over the cap); False when more is to come."""
        conn = self._conn
        proto = conn.proto
        proto.reset_if_drained()
        if proto.error is not None:
            raise self._error(proto.error)
        pending = proto.pending_line()
        if proto.eof:
            if proto.rest().strip():
                raise InvalidResponse(
                    f"watch stream ended inside an event ({pending} bytes cut off)",
                    **conn.where)
            return True
        if pending > self._max_line:
            raise self._too_long(pending)
        if pending:
            conn.line_started()
        return False

    async def pieces(self) -> AsyncIterator[list[Any]]:
        """Lists of envelopes (``type`` and ``object``), one per piece of ~64 KiB. After a
        bad line, the good events before it come as their own list, then the error."""
        conn = self._conn
        proto = conn.proto
        decode = self.decoder.decode
        take = proto.take
        size = self._piece
        while True:
            data = take(size)
            if data is None:
                if self._starved():
                    return
                await proto.waiter()
                continue
            conn.line_done()
            if len(data) > self._max_line:
                raise self._too_long(len(data))
            events, error = decode(data)
            if events:
                yield events
            if error is not None:
                raise error

    def _too_long(self, size: int) -> InvalidResponse:
        return InvalidResponse(
            f"a watch event is longer than {self._max_line} bytes (the client's "
            f"max_event_bytes; {size:,} bytes arrived) after resourceVersion "
            f"{self.resource_version or '(none)'}", **self._conn.where)

    def _error(self, exc: BaseException) -> ApiError:
        if isinstance(exc, ApiError):
            return exc
        cause = exc.args[1] if isinstance(exc, FramingError) and len(exc.args) > 1 else exc
        if isinstance(exc, FramingError) and exc.args[:1] == ("closed",):
            return ConnectionFailed("the connection was cut in the middle of the response",
                                    reason="ConnectionReset", **self._conn.where)
        return _conn_error(cause, _Target("http://x"), self._conn.where, self.decoder.redactor)

    async def batches(
        self,
        classes: EventClasses = _RAW_CLASSES,
        other: Callable[[str], type[ObjectEvent]] = raw_event_class,
        *,
        counts: dict[str, int] | None = None,
        strip: bool = False,
    ) -> AsyncGenerator[list[ObjectEvent], None]:
        """The typed events of each piece, one list per piece (never empty): object lines as
        instances of ``classes[type]`` (``other(type)`` for a type not in it), bookmarks as
        ``Bookmark``. An ERROR line or a bad line ends the stream: the events before it come
        as their own list, then its typed ``ApiError``. ``counts`` (by type) and
        ``resource_version`` (the last event's) are kept once per piece; ``strip`` drops
        ``metadata.managedFields`` from each object once decoded."""
        # One generator between the protocol and the consumer: each read is taken, decoded
        # and typed here (``PieceDecoder.batch``), and a wait awaits the protocol's future.
        conn = self._conn
        proto = conn.proto
        take = proto.take
        decoder = self.decoder
        batch_of = decoder.batch
        # The plain lazy piece in C, called here (one frame fewer per read); ``batch_of``
        # for anything it leaves (None) and in Python builds.
        c_batch = _pieces.lazy_batch if decoder.lazy and classes.__class__ is dict else None
        array = decoder._array
        size, max_line = self._piece, self._max_line
        tally: dict[str, int] = {} if counts is None else counts
        new_future = asyncio.get_running_loop().create_future
        while True:
            if proto.r == proto.b and not proto.eof and proto.error is None:
                # All taken, nothing more yet: the usual case, checked and waited for
                # without a call (``proto.waiter()`` inlined). A read that brings whole
                # lines, at most a piece, hands them over in the future (``hand``): no line
                # was pending and none is over the cap.
                if proto.paused:
                    proto.resume()
                fut = proto._waiter = new_future()
                proto.hand = size
                data = await fut
                if data is None:
                    continue
            else:
                data = take(size)
                if data is None:
                    if self._starved():
                        return
                    await proto.waiter()
                    continue
                conn._line_since = None  # conn.line_done(), without the call
                if len(data) > max_line:
                    raise self._too_long(len(data))
            if c_batch is not None:
                done = c_batch(data, array, classes, tally, strip, LazyPiece)
                if done is not None:
                    del data
                    batch, decoder.piece, rv = done
                    decoder.plain = True
                    rv = rv or last_version(batch)  # the last event had none: an earlier's
                    if rv:
                        decoder.resource_version = rv
                    yield batch
                    continue
            batch, error = batch_of(data, classes, other, tally, strip)
            del data
            if batch:
                yield batch
            if error is not None:
                raise error

    async def __aiter__(self) -> AsyncIterator[RawEvent]:
        async for batch in self.batches():
            for event in batch:
                yield event  # type: ignore[misc]


# The public name (``watchkeeper.client.WatchStream``) of what ``Api.watch`` yields.
WatchStream = FastWatchStream


async def _read_body(proto: ResponseProtocol, where: dict[str, Any]) -> bytes:
    """The whole (error) body, bounded."""
    parts: list[bytes] = []
    total = 0
    while True:
        proto.reset_if_drained()
        if proto.b > proto.r:
            chunk = bytes(proto.mv[proto.r:proto.b])
            proto.r = proto.b
            total += len(chunk)
            if total > _MAX_ERROR_BODY:
                break
            parts.append(chunk)
            continue
        if proto.eof or proto.error is not None:
            break
        await proto.wait()
    body = b"".join(parts)
    coding = (proto.head.headers.get("Content-Encoding", "") if proto.head else "").lower()
    if coding in ("gzip", "deflate") and body:
        try:
            body = zlib.decompress(body, 47 if coding == "gzip" else 15)
        except zlib.error:
            raise InvalidResponse("undecodable compressed error body", **where) from None
    return body


async def _connect(transport: Transport, target: _Target, where: dict[str, Any],
                   max_line: int, buffer_size: int) -> ResponseProtocol:
    loop = asyncio.get_running_loop()
    ctx: ssl.SSLContext | None = None
    if target.tls:
        await transport._get_session()  # resolves the TLS context (exec plugin certs too)
        ctx = transport._ssl
    kw: dict[str, Any] = {}
    if ctx is not None:
        kw["ssl"] = ctx
        kw["server_hostname"] = transport.config.tls_server_name or target.host
        kw["ssl_handshake_timeout"] = transport.timeouts.connect
    proto = ResponseProtocol(max_line, buffer_size)
    try:
        async with asyncio.timeout(transport.timeouts.connect):
            await loop.create_connection(lambda: proto, target.host, target.port, **kw)
    except (OSError, TimeoutError, ssl.SSLError) as exc:
        raise _conn_error(exc, target, where) from exc
    assert proto.transport is not None
    _keepalive(proto.transport)
    return proto


@asynccontextmanager
async def open_stream(
    transport: Transport,
    path: str,
    *,
    params: Mapping[str, str] | None = None,
    accept: str = "application/json",
    read_timeout: float | None = None,
    line_timeout: float | None = None,
    max_line: int = MAX_LINE_BYTES,
    lazy: bool = False,
    piece: int | None = None,
    buffer_size: int = BUFFER_SIZE,
) -> AsyncIterator[FastWatchStream]:
    """Open one watch; errors are the transport's typed ApiErrors. ``read_timeout`` bounds
    silence; ``line_timeout`` (default: ``read_timeout``) bounds how long one event may take
    to arrive once begun; ``max_line`` caps its size. ``piece`` (bytes decoded per call) and
    ``buffer_size`` (the preallocated receive buffer) are for tests and tuning."""
    from watchkeeper.client.transport import USER_AGENT

    where: dict[str, Any] = {"method": "GET", "path": path}
    target = _Target(transport._base)
    for attempt in (1, 2):
        headers = await transport._headers(accept, "GET", path)
        request = _request_bytes(target, path, params, headers, USER_AGENT)
        proto = await _connect(transport, target, where, max_line, buffer_size)
        conn: _Connection | None = None
        try:
            assert proto.transport is not None and proto.head_ready is not None
            proto.transport.write(request)
            failure: ApiError | None = None
            try:
                async with asyncio.timeout(read_timeout):
                    head = await proto.head_ready
            except TimeoutError:
                raise Timeout("no response from the server in time", reason="ClientTimeout",
                              **where) from None
            except (FramingError, OSError, ssl.SSLError) as exc:
                failure = _conn_error(exc, target, where, transport.redactor)
            if failure is not None:  # raised outside the handler: the bad line is no context
                raise failure
            hdrs = CIMultiDictProxy(head.headers)
            transport.warn(hdrs)
            if head.status == 401 and attempt == 1:
                await transport._refresh_credentials()
                continue
            if head.status >= 400:
                try:
                    async with asyncio.timeout(read_timeout):
                        body = await _read_body(proto, where)
                except TimeoutError:
                    raise Timeout("no response from the server in time",
                                  reason="ClientTimeout", **where) from None
                raise transport.redactor.response_error(head.status, body, headers=hdrs,
                                                        **where)
            if head.status != 200:  # a redirect, a 1xx, a 204: no stream of events
                raise transport.redactor.error(unexpected_status(
                    head.status, hdrs, expected="a watch stream (200 OK)", **where,
                ))
            if transport.circuit is not None:
                transport.circuit.record_success()  # the watch opened: the server is back
            coding = hdrs.get("Content-Encoding", "identity")
            if coding.lower() not in ("", "identity"):
                raise InvalidResponse(
                    f"the watch came back with Content-Encoding "
                    f"{transport.redactor.excerpt(coding, 60)!r} although identity was asked "
                    "for", **where)
            conn = _Connection(proto, head, where, read_timeout,
                               line_timeout if line_timeout is not None else read_timeout)
            yield FastWatchStream(conn, path, lazy=lazy, max_line=max_line, piece=piece,
                                  redactor=transport.redactor)
            return
        finally:
            if conn is not None:
                conn.close()
            else:
                proto.close()
    raise AssertionError("unreachable")  # pragma: no cover
