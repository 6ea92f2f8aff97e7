"""No credential anywhere in an error's whole chain, for every error class the client raises.

A client is configured with a bearer token or a basic-auth password, and a client key, and
every failure path is provoked by a raw server on 127.0.0.1 (malformed HTTP, cut bodies,
timeouts, every Status code, a proxy that echoes the request's Authorization header back
in an error body, a watch line, an ERROR event, a header line or a Content-Encoding,
garbage watch lines). For each error, its ``__cause__`` and ``__context__`` chain, args,
reprs, ``__dict__``, str and ``traceback.format_exception`` text are searched, and so are
the logs (DEBUG, including aiohttp's). The exception text helpers are test_secrets'.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

import watchkeeper as wk
from watchkeeper.client import Timeouts
from watchkeeper.client.auth import Auth, BasicAuth, StaticToken
from watchkeeper_sim import ApiServer

from .rawserver import RawServer, Request, chunk, head, respond, stream
from .test_secrets import assert_hidden, closed_port, distinctive, exception_text, log_text

CMS = "/api/v1/namespaces/default/configmaps"


@pytest.fixture(autouse=True)
def debug_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    for name in ("watchkeeper", "aiohttp", "asyncio"):
        caplog.set_level(logging.DEBUG, logger=name)
    return caplog


@pytest.fixture
async def raw() -> AsyncIterator[RawServer]:
    async with RawServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def client_key() -> bytes:
    async def make() -> bytes:
        async with ApiServer(tls=True) as tls:
            return tls.client_cert("keyholder")[1]

    return asyncio.run(make())


def credentials(kind: str) -> tuple[Auth, list[str]]:
    """An Auth and every form of its secret that must never show."""
    if kind == "token":
        token = distinctive("bearer")
        return StaticToken(token), [token]
    password = distinctive("password")
    encoded = base64.b64encode(f"bob:{password}".encode()).decode()
    return BasicAuth("bob", password), [password, encoded]


def echoed(req: Request) -> str:
    """The request's Authorization header (and its parts), as a proxy quotes it."""
    auth = req.headers.get("authorization", "")
    said = f"rejected header Authorization: {auth} (credential {auth.partition(' ')[2]})"
    if auth.startswith("Basic "):
        said += " password " + base64.b64decode(auth[6:]).decode().partition(":")[2]
    return said


def echo(status: int, *, as_status: bool) -> Callable[[Request, asyncio.StreamWriter], Any]:
    """A proxy that quotes the request's Authorization header (and its parts) back."""

    async def handler(req: Request, w: asyncio.StreamWriter) -> None:
        said = echoed(req)
        if as_status:
            body = json.dumps({"kind": "Status", "apiVersion": "v1", "code": status,
                               "reason": "BadRequest", "message": said,
                               "details": {"causes": [{"message": said}]}}).encode()
        else:
            body = said.encode()
        w.write(head(status, length=len(body)) + body)
        await w.drain()

    return handler


async def echo_in_a_watch_line(req: Request, w: asyncio.StreamWriter) -> None:
    """A 200 watch whose first line is not JSON but the quoted header."""
    w.write(head(200, chunked=True) + chunk(echoed(req).encode() + b"\n") + chunk(b""))
    await w.drain()


async def echo_in_an_error_event(req: Request, w: asyncio.StreamWriter) -> None:
    """A 200 watch whose ERROR event's Status quotes the header (message and details)."""
    said = echoed(req)
    line = json.dumps({"type": "ERROR", "object": {
        "kind": "Status", "code": 500, "reason": "InternalError", "message": said,
        "details": {"causes": [{"message": said}]}}}).encode()
    w.write(head(200, chunked=True) + chunk(line + b"\n") + chunk(b""))
    await w.drain()


async def echo_in_a_header_line(req: Request, w: asyncio.StreamWriter) -> None:
    """A response head with a malformed header line (no colon) quoting the header."""
    auth = req.headers.get("authorization", "")
    w.write(f"HTTP/1.1 200 OK\r\nConnection: close\r\nEcho {auth}\r\n\r\n".encode())
    await w.drain()


async def echo_as_content_encoding(req: Request, w: asyncio.StreamWriter) -> None:
    """A watch answered with the header as its Content-Encoding."""
    w.write(head(200, {"Content-Encoding": req.headers.get("authorization", "")},
                 chunked=True) + chunk(b""))
    await w.drain()


async def echo_in_a_200_body(req: Request, w: asyncio.StreamWriter) -> None:
    """A 200 whose body is not JSON but the quoted header."""
    body = echoed(req).encode()
    w.write(head(200, {"Content-Type": "text/plain"}, length=len(body)) + body)
    await w.drain()


def status(code: int, reason: str) -> bytes:
    return json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                       "code": code, "reason": reason, "message": f"{reason} here",
                       "details": {"name": "x", "retryAfterSeconds": 1}}).encode()


async def hang(_req: Request, _w: asyncio.StreamWriter) -> None:
    await asyncio.Event().wait()


async def malformed_http(_req: Request, w: asyncio.StreamWriter) -> None:
    w.write(b"HTTP/1.1 200 OK\r\nContent-Length: many\r\n\r\n{}")
    await w.drain()


async def bad_status_line(_req: Request, w: asyncio.StreamWriter) -> None:
    w.write(b"HTTP/1.1 2OO Fine\r\n\r\n")
    await w.drain()


async def cut_body(_req: Request, w: asyncio.StreamWriter) -> None:
    w.write(head(200, length=1000) + b'{"kind":"ConfigMapList","items":[')
    await w.drain()


async def close_at_once(_req: Request, w: asyncio.StreamWriter) -> None:
    w.close()


async def trickle(_req: Request, w: asyncio.StreamWriter) -> None:
    w.write(head(200, chunked=True) + chunk(b'{"type":"ADDED"'))
    while True:
        w.write(chunk(b" "))
        await w.drain()
        await asyncio.sleep(0.05)


async def watch_once(api: wk.Api, **kw: Any) -> None:
    async with api.watch(resource_version="1", read_timeout=0.6, **kw) as events:
        async for _ev in events:
            pass


# What each path must raise: (route handler or None for the path, how to call, error class).
Call = Callable[[wk.Api], Awaitable[Any]]
LIST: Call = lambda api: api.list()  # noqa: E731
GET: Call = lambda api: api.get("x")  # noqa: E731
WATCH: Call = watch_once

STATUSES = [(400, "BadRequest", wk.BadRequest), (401, "Unauthorized", wk.Unauthorized),
            (403, "Forbidden", wk.Forbidden), (404, "NotFound", wk.NotFound),
            (409, "Conflict", wk.Conflict), (409, "AlreadyExists", wk.AlreadyExists),
            (410, "Expired", wk.Gone), (422, "Invalid", wk.Invalid),
            (429, "TooManyRequests", wk.TooManyRequests), (500, "InternalError", wk.ServerError),
            (504, "Timeout", wk.Timeout), (418, "Teapot", wk.ApiError)]

PATHS: list[tuple[str, Any, Call, type[BaseException]]] = [
    ("malformed-http-list", malformed_http, LIST, wk.InvalidResponse),
    ("malformed-http-watch", malformed_http, WATCH, wk.InvalidResponse),
    ("bad-status-line", bad_status_line, GET, wk.InvalidResponse),
    ("cut-body", cut_body, LIST, wk.ConnectionFailed),
    ("closed-at-once", close_at_once, LIST, wk.ConnectionFailed),
    ("closed-at-once-watch", close_at_once, WATCH, wk.ConnectionFailed),
    ("request-timeout", hang, LIST, wk.Timeout),
    ("watch-open-timeout", hang, WATCH, wk.Timeout),
    ("watch-silent", stream(b'{"type":"BOOKMARK",', then_hang=True), WATCH, wk.Timeout),
    ("watch-trickle", trickle, WATCH, wk.Timeout),
    ("watch-garbage", stream(b"<html>not json</html>\n"), WATCH, wk.InvalidResponse),
    ("watch-too-long", stream(b"[" + b"1," * 40_000 + b"1]\n"), WATCH, wk.InvalidResponse),
    ("watch-cut", stream(b'{"type":"ADDED","obj'), WATCH, wk.InvalidResponse),
    ("undecodable-body", respond(200, b"<html>hello</html>"), LIST, wk.InvalidResponse),
    ("echo-status", echo(400, as_status=True), LIST, wk.BadRequest),
    ("echo-text", echo(502, as_status=False), GET, wk.ServerError),
    ("echo-watch", echo(403, as_status=True), WATCH, wk.Forbidden),
    ("echo-watch-line", echo_in_a_watch_line, WATCH, wk.InvalidResponse),
    ("echo-watch-error-event", echo_in_an_error_event, WATCH, wk.ServerError),
    ("echo-watch-header-line", echo_in_a_header_line, WATCH, wk.InvalidResponse),
    ("echo-watch-content-encoding", echo_as_content_encoding, WATCH, wk.InvalidResponse),
    # a 200 body that is not JSON is not quoted (only the decoder's words): nothing to blank
    ("ok-echo-list", echo_in_a_200_body, LIST, wk.InvalidResponse),
    ("ok-echo-get", echo_in_a_200_body, GET, wk.InvalidResponse),
    *[(f"status-{code}-{reason}", respond(code, status(code, reason)), LIST, cls)
      for code, reason, cls in STATUSES],
    *[(f"watch-status-{code}-{reason}", respond(code, status(code, reason)), WATCH, cls)
      for code, reason, cls in STATUSES],
]


@pytest.mark.parametrize("kind", ["token", "basic"])
@pytest.mark.parametrize("name, handler, call, expected", PATHS, ids=[p[0] for p in PATHS])
async def test_no_secret_in_any_error_chain(
    raw: RawServer, client_key: bytes, debug_logs: pytest.LogCaptureFixture, kind: str,
    name: str, handler: Any, call: Call, expected: type[BaseException],
) -> None:
    auth, secrets = credentials(kind)
    raw.routes[CMS] = raw.routes[CMS + "/x"] = handler
    config = wk.ClientConfig(server=raw.url, auth=auth, client_key_data=client_key)
    async with wk.Client(config, timeouts=Timeouts(connect=2, request=0.5),
                         max_event_bytes=50_000) as client:
        api = client.api("configmaps", namespace="default")
        with pytest.raises(wk.ApiError) as info:
            await call(api)
    err = info.value
    assert type(err) is expected, f"{name}: {err!r}"
    if name.startswith("echo"):  # the echo really quoted the credentials, blanked out
        assert "<redacted>" in err.message
    assert_hidden([*secrets, client_key], exception_text(err), log_text(debug_logs))


async def test_a_raw_aiohttp_cause_would_be_caught(raw: RawServer) -> None:
    """The check itself: the HTTP library's own exception does hold the header (this is
    what used to be ``__cause__``), so keeping it would fail the test above."""
    import aiohttp

    token = distinctive("bearer")
    raw.routes[CMS] = malformed_http
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientResponseError) as info:
            async with session.get(raw.url + CMS,
                                   headers={"Authorization": f"Bearer {token}"}) as resp:
                await resp.read()
    assert token in exception_text(info.value)


@pytest.mark.parametrize("kind", ["token", "basic"])
async def test_refused_connection_and_watcher_errors(
    client_key: bytes, debug_logs: pytest.LogCaptureFixture, kind: str, raw: RawServer
) -> None:
    auth, secrets = credentials(kind)
    texts: list[str] = []
    config = wk.ClientConfig(server=f"http://127.0.0.1:{closed_port()}", auth=auth,
                             client_key_data=client_key)
    async with wk.Client(config) as client:
        with pytest.raises(wk.ConnectionFailed) as refused:
            await client.api("configmaps", namespace="default").list()
        texts.append(exception_text(refused.value))
    # A watcher that gives up, and one past max_unhealthy: their errors chain to the last
    # ApiError, which chains to whatever the transport saw.
    raw.routes[CMS] = malformed_http
    raw.routes["/apis"] = respond(200, b'{"kind":"APIGroupList","groups":[]}')
    config = wk.ClientConfig(server=raw.url, auth=auth, client_key_data=client_key)
    async with wk.Client(config) as client:
        api = client.api("configmaps", namespace="default")
        with pytest.raises(wk.WatchGaveUp) as gave_up:
            async for _ev in wk.watcher(api, backoff=wk.ConstantBackoff(0.01, max_retries=2)):
                pass
        with pytest.raises(wk.WatcherUnhealthy) as unhealthy:
            async for _ev in wk.watcher(api, wk.WatchConfig(max_unhealthy=0.2),
                                        backoff=wk.ConstantBackoff(0.05)):
                pass
        with pytest.raises(wk.UnknownResource) as unknown:
            await client.api("gizmos.example.com").list()
    for exc in (gave_up.value, unhealthy.value, unknown.value):
        texts.append(exception_text(exc))
    assert isinstance(gave_up.value.__cause__, wk.InvalidResponse)
    assert_hidden([*secrets, client_key], *texts, log_text(debug_logs))
