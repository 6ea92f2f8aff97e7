"""A server that quotes the request's credentials back, with any status, in any place: no
credential reaches an error, a log line, ``/readyz`` or ``watchkeeper status``.

An echo service or a debug proxy at the wrong address answers 200 and puts the request's
Authorization header in its body, a watch line, an ERROR event or a ``Warning`` header.
A raw server on 127.0.0.1 plays it (the simulator only says well-formed things); every
text a person or a log shipper could see is searched, the probe server's answers included.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import aiohttp
import pytest

import watchkeeper as wk
from watchkeeper.client import Timeouts
from watchkeeper.client.auth import StaticToken, TokenFile
from watchkeeper.client.redact import REDACTED, Redactor
from watchkeeper.ops import HealthServer
from watchkeeper.ops.status import print_status

from .rawserver import RawServer, Request, chunk, head, respond
from .test_secrets import assert_hidden, distinctive, exception_text, log_text

CMS = "/api/v1/namespaces/default/configmaps"
EMPTY_LIST = json.dumps({"kind": "ConfigMapList", "apiVersion": "v1",
                         "metadata": {"resourceVersion": "5"}, "items": []}).encode()


@pytest.fixture(autouse=True)
def debug_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    for name in ("watchkeeper", "aiohttp", "asyncio"):
        caplog.set_level(logging.DEBUG, logger=name)
    return caplog


def authorization(req: Request) -> str:
    return req.headers.get("authorization", "")


async def echo_in_a_200_body(req: Request, w: asyncio.StreamWriter) -> None:
    """A 200 whose body (not JSON) quotes the request's Authorization header."""
    body = f"you sent Authorization: {authorization(req)}\n".encode()
    w.write(head(200, {"Content-Type": "text/plain"}, length=len(body)) + body)
    await w.drain()


# -- a watcher, its health, the probes and `watchkeeper status` ----------------------------------


async def test_a_200_echo_reaches_no_watch_error_log_probe_or_status(
    raw: RawServer, tmp_path: Path, debug_logs: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The watch answers 200 with the Authorization header in a non-JSON line: the watcher's
    WatchError, its WARNING log line, its health's ``last_error`` as /readyz (plain and
    verbose) and ``watchkeeper status`` show it, all hold ``<redacted>`` instead of the
    token, also after the token file rotated to a new token mid-way."""
    first, second = distinctive("tokenfile-a"), distinctive("tokenfile-b")
    token_file = tmp_path / "token"
    token_file.write_text(first)
    raw.routes[CMS] = respond(200, EMPTY_LIST)
    raw.watch_routes[CMS] = echo_in_a_200_body
    monkeypatch.setenv("COLUMNS", "4000")  # `status` prints tables: no line wrapped
    config = wk.ClientConfig(server=raw.url, auth=TokenFile(token_file, max_age=0))
    errors: list[wk.ApiError] = []
    seen: list[str] = []
    async with wk.Client(config) as client:
        w = wk.watcher(client.api("configmaps", namespace="default"),
                       wk.WatchConfig(max_unhealthy=None), backoff=wk.ConstantBackoff(0.01))
        probes = HealthServer().add_watch(w.health)
        await probes.start()
        try:
            async with aiohttp.ClientSession() as http:
                async for ev in w:
                    if not isinstance(ev, wk.WatchError):
                        continue
                    errors.append(ev.error)
                    if len(errors) == 1:
                        token_file.write_text(second)  # rotated: the next request sends it
                    if len(errors) == 3:
                        for path in ("/readyz?verbose", "/readyz", "/healthz"):
                            async with http.get(probes.url + path) as resp:
                                seen.append(await resp.text())
                        assert await print_status(probes.url) == 1  # not ready
                        seen.append(capsys.readouterr().out)
                        break
        finally:
            await probes.stop()
    sent = [authorization(r) for r in raw.requests if r.is_watch]
    assert f"Bearer {first}" in sent and f"Bearer {second}" in sent
    assert_hidden([first, second], *(exception_text(e) for e in errors), *seen,
                  log_text(debug_logs))
    assert all(isinstance(e, wk.InvalidResponse) for e in errors)
    assert all(REDACTED in str(e) for e in errors)  # the echo was quoted, blanked out
    verbose = json.loads(seen[0])
    assert REDACTED in verbose["watches"][0]["last_error"]
    assert REDACTED in seen[1] and REDACTED in seen[3]  # /readyz and `watchkeeper status`
    degraded = [r for r in debug_logs.records
                if r.levelno == logging.WARNING and "degraded" in r.getMessage()]
    assert degraded and REDACTED in degraded[0].getMessage()


# -- Warning headers -----------------------------------------------------------------------------


def warning_echo(body: bytes) -> Callable[[Request, asyncio.StreamWriter], Any]:
    async def handler(req: Request, w: asyncio.StreamWriter) -> None:
        warning = f'299 - "your header was {authorization(req)}"'
        w.write(head(200, {"Warning": warning}, length=len(body)) + body)
        await w.drain()

    return handler


@pytest.mark.parametrize("verb", ["list", "watch"])
async def test_a_warning_header_quoting_the_token_is_logged_scrubbed(
    raw: RawServer, debug_logs: pytest.LogCaptureFixture, verb: str
) -> None:
    """The default handler logs the warning once at WARNING, and a user's handler gets
    it, both with the token blanked out (from a plain request and from a watch)."""
    token = distinctive("bearer")
    raw.routes[CMS] = warning_echo(EMPTY_LIST)
    raw.watch_routes[CMS] = warning_echo(b"")
    config = wk.ClientConfig(server=raw.url, auth=StaticToken(token))
    handed: list[str] = []
    for handler in (None, handed.append):
        async with wk.Client(config, on_warning=handler) as client:
            api = client.api("configmaps", namespace="default")
            if verb == "list":
                await api.list()
            else:
                async with api.watch(resource_version="1") as events:
                    assert [ev async for ev in events] == []
    assert_hidden([token], log_text(debug_logs), *handed)
    logged = [r.getMessage() for r in debug_logs.records if r.levelno == logging.WARNING]
    assert logged == [f"API server warning: your header was {REDACTED}"]
    assert handed == [f"your header was {REDACTED}"]


# -- cut excerpts and encodings ------------------------------------------------------------------


def cut_in(prefix_len: int, where: str) -> Callable[[Request, asyncio.StreamWriter], Any]:
    """A server that quotes the header so that the client's excerpt ends in its middle: a
    502 text body (500 characters quoted), a watch line (80 bytes), a header line (60)."""

    async def handler(req: Request, w: asyncio.StreamWriter) -> None:
        said = ("x" * prefix_len + authorization(req)).encode()
        if where == "body":
            w.write(head(502, {"Content-Type": "text/plain"}, length=len(said)) + said)
        elif where == "line":
            w.write(head(200, chunked=True) + chunk(said + b"\n") + chunk(b""))
        else:
            w.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n" + said + b"\r\n\r\n")
        await w.drain()

    return handler


@pytest.mark.parametrize("where, limit, expected", [
    ("body", 500, wk.ServerError), ("line", 80, wk.InvalidResponse),
    ("header", 60, wk.InvalidResponse),
])
async def test_an_excerpt_never_ends_with_the_start_of_a_token(
    raw: RawServer, debug_logs: pytest.LogCaptureFixture, where: str, limit: int,
    expected: type[wk.ApiError],
) -> None:
    """The token straddles where the message's excerpt is cut: scrubbed before the cut, no
    piece of it remains (before, the first characters of the token were shown)."""
    token = distinctive("bearer")
    cut_at = 12  # characters of the token before the cut
    raw.routes[CMS] = cut_in(limit - len("Bearer ") - cut_at, where)
    config = wk.ClientConfig(server=raw.url, auth=StaticToken(token))
    async with wk.Client(config, timeouts=Timeouts(connect=2, request=2)) as client:
        api = client.api("configmaps", namespace="default")
        with pytest.raises(wk.ApiError) as info:
            if where == "body":
                await api.list()
            else:
                async with api.watch(resource_version="1") as events:
                    async for _ev in events:
                        pass
    assert type(info.value) is expected
    text = exception_text(info.value) + log_text(debug_logs)
    assert token[:cut_at] not in text and token[:8] not in text
    assert REDACTED in info.value.message


ODD_TOKEN = "wk+opaque/token=with+/=" + "a1b2c3d4e5f6a7b8"  # base64-ish: encodings differ


def every_encoding(value: str) -> str:
    """The header value as a server may quote it: as is, JSON-escaped once and twice (a
    JSON log line quoting JSON), URL-encoded (path and form style)."""
    once = json.dumps(value)[1:-1]
    return " | ".join([value, once, json.dumps(once)[1:-1], quote(value, safe=""),
                       quote_plus(value, safe="")])


async def encoded_echo(req: Request, w: asyncio.StreamWriter) -> None:
    said = every_encoding(authorization(req))
    if req.is_watch:  # an ERROR event, and a Status before it in a bad line
        status = {"kind": "Status", "code": 500, "reason": "InternalError", "message": said,
                  "details": {"causes": [{"message": said}]}}
        line = json.dumps({"type": "ERROR", "object": status}).encode() + b"\n"
        w.write(head(200, chunked=True) + chunk(line) + chunk(b""))
    else:
        body = said.encode()
        w.write(head(502, {"Content-Type": "text/plain"}, length=len(body)) + body)
    await w.drain()


@pytest.mark.parametrize("verb", ["list", "watch"])
async def test_every_encoding_of_an_echoed_token_is_blanked(
    raw: RawServer, debug_logs: pytest.LogCaptureFixture, verb: str
) -> None:
    """A token with ``+``, ``/`` and ``=`` (an opaque, base64-like one): quoted as is,
    JSON-escaped, double-escaped and URL-encoded in a text body and in a watch ERROR
    event's Status (message and details): none of the forms remains."""
    raw.routes[CMS] = encoded_echo
    config = wk.ClientConfig(server=raw.url, auth=StaticToken(ODD_TOKEN))
    async with wk.Client(config) as client:
        api = client.api("configmaps", namespace="default")
        with pytest.raises(wk.ServerError) as info:
            if verb == "list":
                await api.list()
            else:
                async with api.watch(resource_version="1") as events:
                    async for _ev in events:
                        pass
    err = info.value
    forms = every_encoding(ODD_TOKEN).split(" | ")
    texts = [exception_text(err), repr(err.status), repr(err.details), log_text(debug_logs)]
    assert_hidden(forms, *texts)
    assert err.message.count(REDACTED) >= len(forms)


# -- the Redactor itself -------------------------------------------------------------------------


def test_excerpts_cut_anywhere_in_a_secret_leave_none_of_it() -> None:
    """Whatever the position of the secret relative to the cut, and with other secrets
    before it blanked out (the text shrinks), the excerpt holds no character of it."""
    short, long = "s3cr3t-short", "L" * 30 + "-long-secret-" + "9" * 30
    redactor = Redactor()
    redactor.note({"Authorization": f"Bearer {short}"})
    redactor.note({"Authorization": f"Bearer {long}"})
    for before in range(0, 120):
        for text in ("a" * before + long + "b" * 200,
                     long * 3 + "a" * before + short + long + "b" * 50):
            for data in (text, text.encode()):
                shown = redactor.excerpt(data, 80)
                as_text = shown if isinstance(shown, str) else shown.decode()
                assert as_text.replace(REDACTED, "").strip("ab") == "", (before, as_text)


def test_a_rotated_credential_is_still_known_for_a_while() -> None:
    redactor = Redactor()
    tokens = [f"rotating-token-{i:02d}" for i in range(12)]
    for token in tokens:
        redactor.note({"Authorization": f"Bearer {token}"})
    text = " ".join(tokens)
    scrubbed = redactor.scrub(text)
    assert all(t not in scrubbed for t in tokens[-8:])  # the last eight: still open watches
    assert tokens[0] in scrubbed  # bounded: a client rotating forever stays small
    assert "rotating" not in repr(redactor)


# -- a LIST answer that is not a list, quoting the token -----------------------------------------


async def echo_in_a_status_list(req: Request, w: asyncio.StreamWriter) -> None:
    """A 200 whose JSON body is no list: its kind and reason quote the Authorization header."""
    said = authorization(req)
    body = json.dumps({"kind": f"Status {said}", "apiVersion": "v1", "status": "Success",
                       "reason": said}).encode()
    w.write(head(200, {"Content-Type": "application/json"}, length=len(body)) + body)
    await w.drain()


@pytest.mark.parametrize("call", ["list", "list_all"])
async def test_a_non_list_answer_quoting_the_token_is_refused_scrubbed(
    raw: RawServer, call: str, debug_logs: pytest.LogCaptureFixture,
) -> None:
    token = distinctive("list-echo")
    raw.routes[CMS] = echo_in_a_status_list
    config = wk.ClientConfig(server=raw.url, auth=StaticToken(token))
    async with wk.Client(config) as client:
        api = client.api("configmaps", namespace="default")
        with pytest.raises(wk.InvalidResponse) as caught:
            await (api.list() if call == "list" else api.list_all())
    assert "ConfigMapList" in str(caught.value) and REDACTED in str(caught.value)
    assert_hidden([token], exception_text(caught.value), log_text(debug_logs))
