"""Statuses that are no Kubernetes API answer, and Status codes a server garbled (issue 21,
item 8): a typed error that names the status, never a body read as if it were the answer.

Before: a ``101 Switching Protocols`` to a watch yielded its body's events, a 302 redirect
was "undecodable JSON", and an ERROR event ``Expired`` whose code was no integer was logged
as "500 Expired". Every test talks HTTP to a raw server on 127.0.0.1 (the exact bytes).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

import watchkeeper as wk

from .rawserver import RawServer, Request, chunk, respond, stream

CMS = "/api/v1/namespaces/default/configmaps"
LIST = (b'{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"1"},'
        b'"items":[]}')
EVENT = (b'{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":'
         b'{"name":"a","namespace":"default","resourceVersion":"2"}}}\n')
LOGIN = "https://someone:hunter22@login.example.com/sso/start?token=secret-token#frag"
FAST = wk.WatchConfig(max_unhealthy=None, server_timeout=5, idle_timeout=5)


def raw_bytes(data: bytes, *, hang: bool = False) -> Any:
    """A route that writes ``data`` exactly (a status line of our choosing)."""

    async def handler(_req: Request, w: asyncio.StreamWriter) -> None:
        w.write(data)
        await w.drain()
        if hang:
            await asyncio.Event().wait()

    return handler


def redirect(location: str) -> bytes:
    body = b"<html>moved</html>"
    return (f"HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Type: text/html\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body


def chunked_200(*lines: bytes) -> bytes:
    return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n" + b"".join(chunk(x) for x in lines))


async def first_events(api: wk.Api, lazy: bool = False) -> list[str]:
    """The names of the watch's events, up to its end or the first one."""
    names: list[str] = []
    async with asyncio.timeout(10), api.watch(resource_version="1", lazy=lazy) as events:
        async for ev in events:
            names.append(ev.name)
            break
    return names


# -- the watch stream's own reader -------------------------------------------------------------


@pytest.mark.parametrize("lazy", [False, True])
async def test_a_watch_answered_101_switching_protocols_is_invalid_response(
    raw: RawServer, client: wk.Client, lazy: bool
) -> None:
    raw.watch_routes[CMS] = raw_bytes(
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
        + EVENT, hang=True)
    api = client.api("configmaps", namespace="default")
    with pytest.raises(wk.InvalidResponse) as info:
        await first_events(api, lazy)  # before: the event after the 101 came out
    assert info.value.code == 101 and info.value.reason == "SwitchingProtocols"
    assert str(info.value) == (
        f"GET {CMS}: the server answered with an informational (1xx) response where a watch "
        "stream (200 OK) was expected (101 SwitchingProtocols)")


async def test_interim_responses_are_skipped_but_not_without_end(
    raw: RawServer, client: wk.Client
) -> None:
    """100 Continue and 103 Early Hints are interim (RFC 9110: a client skips those it does
    not expect; Go's client and aiohttp do); like Go, at most 5 of them."""
    api = client.api("configmaps", namespace="default")
    interim = b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\nHTTP/1.1 100 Continue\r\n\r\n"
    raw.watch_routes[CMS] = raw_bytes(interim + chunked_200(EVENT, b""))
    assert await first_events(api) == ["a"]
    raw.watch_routes[CMS] = raw_bytes(b"HTTP/1.1 100 Continue\r\n\r\n" * 6
                                      + chunked_200(EVENT, b""), hang=True)
    with pytest.raises(wk.InvalidResponse, match=r"more than 5 informational \(1xx\)"):
        await first_events(api)


@pytest.mark.parametrize("status", [b"204 No Content", b"202 Accepted", b"304 Not Modified"])
async def test_a_watch_answered_with_another_success_or_3xx_is_invalid_response(
    raw: RawServer, client: wk.Client, status: bytes
) -> None:
    raw.watch_routes[CMS] = raw_bytes(b"HTTP/1.1 " + status + b"\r\nContent-Length: 0\r\n\r\n")
    with pytest.raises(wk.InvalidResponse) as info:
        await first_events(client.api("configmaps", namespace="default"))
    assert info.value.code == int(status[:3])
    assert "where a watch stream (200 OK) was expected" in str(info.value)


async def test_a_redirected_watch_names_the_redirect_and_the_watcher_retries(
    raw: RawServer, client: wk.Client
) -> None:
    raw.routes[CMS] = respond(200, LIST)
    raw.watch_routes[CMS] = raw_bytes(redirect(LOGIN))
    api = client.api("configmaps", namespace="default")
    errors: list[wk.ApiError] = []
    async with asyncio.timeout(20):
        async for ev in wk.watcher(api, FAST, backoff=wk.ConstantBackoff(0.01)):
            if isinstance(ev, wk.WatchError):
                errors.append(ev.error)
                if len(errors) == 2:
                    break
    assert all(isinstance(e, wk.InvalidResponse) and e.code == 302 for e in errors), errors
    text = str(errors[0])
    assert text == (
        f"GET {CMS}: the server answered with a redirect to https://login.example.com/sso/start"
        " where a watch stream (200 OK) was expected: check the server address; a proxy or "
        "a login page may be in the way (302 Found)")
    assert "hunter22" not in repr(errors[0].__dict__) and "secret-token" not in text


# -- the other verbs (aiohttp) ------------------------------------------------------------------


async def test_a_redirected_list_is_named_as_a_redirect_not_undecodable_json(
    raw: RawServer, client: wk.Client
) -> None:
    raw.routes[CMS] = raw_bytes(redirect(LOGIN))
    api = client.api("configmaps", namespace="default")
    with pytest.raises(wk.InvalidResponse) as info:
        await api.list()
    assert info.value.code == 302
    assert str(info.value) == (
        f"GET {CMS}: the server answered with a redirect to https://login.example.com/sso/start"
        " where a Kubernetes API answer was expected: check the server address; a proxy or a "
        "login page may be in the way (302 Found)")
    raw.routes[CMS + "/x"] = raw_bytes(redirect("/login"))  # relative, as proxies send it
    with pytest.raises(wk.InvalidResponse, match="a redirect to /login where"):
        await api.get("x")


async def test_a_list_answered_101_is_invalid_response_not_its_body(
    raw: RawServer, client: wk.Client
) -> None:
    """aiohttp hands a 101 back as the final response: it was "undecodable response body"."""
    raw.routes[CMS] = raw_bytes(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n"
                                b"Connection: Upgrade\r\n\r\n" + LIST)
    with pytest.raises(wk.InvalidResponse, match=r"informational \(1xx\).*\(101 Switching"):
        await client.api("configmaps", namespace="default").list()


# -- Status codes -------------------------------------------------------------------------------


@pytest.mark.parametrize("code", ['410', '410.0', '"410"', None],
                         ids=["int", "float", "string", "absent"])
async def test_a_watch_error_event_expired_is_a_410_gone_that_relists(
    raw: RawServer, client: wk.Client, code: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    field = f',"code":{code}' if code is not None else ""
    gone = (b'{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},'
            b'"status":"Failure","message":"too old resource version: 1 (9)",'
            b'"reason":"Expired"' + field.encode() + b"}}\n")
    raw.routes[CMS] = respond(200, LIST)
    raw.watch_routes[CMS] = stream(gone)
    api = client.api("configmaps", namespace="default")
    seen: list[Any] = []
    caplog.set_level(logging.WARNING, "watchkeeper.watcher")
    async with asyncio.timeout(20):
        async for ev in wk.watcher(api, FAST, backoff=wk.ConstantBackoff(0.01)):
            seen.append(ev)
            if sum(isinstance(e, wk.InitDone) for e in seen) == 2:
                break
    error = next(e.error for e in seen if isinstance(e, wk.WatchError))
    assert isinstance(error, wk.Gone) and error.code == 410, repr(error)
    assert raw.count(CMS, watch=False) == 2  # relisted at once
    degraded = [r.getMessage() for r in caplog.records if "degraded" in r.getMessage()]
    assert degraded == [f"watch configmaps in default degraded: WATCH {CMS}: too old "
                        "resource version: 1 (9) (410 Expired)"]


def test_a_status_without_a_usable_code_takes_the_code_its_reason_stands_for() -> None:
    for status, code, cls in [
        ({"reason": "NotFound", "message": "gone"}, 404, wk.NotFound),
        ({"reason": "Expired", "code": True}, 410, wk.Gone),
        ({"reason": "TooManyRequests", "code": "429"}, 429, wk.TooManyRequests),
        ({"reason": "SomethingElse"}, 500, wk.ServerError),
        ({"code": 503.0}, 503, wk.ServerError),
    ]:
        error = wk.client.errors.error_from_status({"kind": "Status", **status})
        assert (type(error), error.code) == (cls, code), (status, error)
