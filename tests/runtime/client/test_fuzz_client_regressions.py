"""Regressions found by coverage-guided fuzzing (atheris) of the client's parsers of
untrusted input: the HTTP/1.1 response framing (_http1), the watch piece decoder (_pieces),
kubeconfig loading (config) and exec plugin output (exec_auth). Each hostile input must be a
typed error (InvalidResponse, ConfigError, ExecPluginError) that quotes no credential, never
an untyped exception, a hang or a buffer that grows without bound.

Goes in tests/runtime/client/ (it uses the raw server there).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import watchkeeper as wk
from watchkeeper.client import _http1
from watchkeeper.client._http1 import FramingError, ResponseProtocol, parse_head
from watchkeeper.client._pieces import PieceDecoder
from watchkeeper.client.config import ConfigError, load_kubeconfig
from watchkeeper.client.exec_auth import ExecAuth, ExecPluginError
from watchkeeper.client.objects import raw_event_class
from watchkeeper.client.stream import _RAW_CLASSES

from .rawserver import Handler, RawServer, Request

CMS = "/api/v1/namespaces/default/configmaps"
EV = b'{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"2"}}}\n'
CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


def raw_bytes(data: bytes) -> Handler:
    """Exactly ``data`` on the socket, then silence (the connection stays open)."""

    async def handler(_req: Request, w: asyncio.StreamWriter) -> None:
        w.write(data)
        await w.drain()
        await asyncio.Event().wait()

    return handler


async def watch_error(url: str) -> BaseException:
    """What a watch of ``CMS`` ends with (bounded: a hang fails the test, not the run)."""
    async with wk.Client(wk.ClientConfig(server=url)) as client:
        api = client.api("configmaps", namespace="default")

        async def run() -> None:
            async with api.watch(resource_version="1", read_timeout=30) as events:
                async for _ in events:
                    pass

        try:
            await asyncio.wait_for(run(), 10)
        except TimeoutError:
            pytest.fail("the watch neither ended nor failed within 10 s")
        except Exception as exc:  # the type is what is checked
            return exc
    pytest.fail("the watch ended cleanly")


class _Transport:
    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...
    def abort(self) -> None: ...


def protocol(buffer_size: int = _http1.BUFFER_SIZE) -> ResponseProtocol:
    proto = ResponseProtocol(1 << 20, buffer_size)
    proto.connection_made(_Transport())
    return proto


def feed(proto: ResponseProtocol, data: bytes, size: int | None = None) -> None:
    """As asyncio delivers reads: get_buffer, copy, buffer_updated (none once failed)."""
    pos = 0
    while pos < len(data) and proto.error is None:
        view = proto.get_buffer(-1)
        n = min(len(view), len(data) - pos, size or len(data))
        view[:n] = data[pos:pos + n]
        proto.buffer_updated(n)
        pos += n
    if proto.head_ready is not None and proto.head_ready.done():
        proto.head_ready.exception()  # retrieved


# -- _http1: the response framing ----------------------------------------------------------------


@pytest.mark.parametrize("status", [b"\xb2", b"2\xb3\xb9", b"2" * 5000, b"20", b"2000"])
async def test_status_code_is_three_ascii_digits(status: bytes) -> None:
    """str.isdigit() took "²" (latin-1 0xB2) and 5,000 digits; int() then raised ValueError
    out of buffer_updated (asyncio logged a fatal error, the watch said ConnectionFailed)."""
    head = b"HTTP/1.1 " + status + b" OK\r\nContent-Length: 0"
    with pytest.raises(FramingError):
        parse_head(head)
    proto = protocol()
    feed(proto, head + b"\r\n\r\n")  # raised ValueError before
    assert isinstance(proto.error, FramingError)


async def test_watch_with_a_bad_status_code_is_invalid_response() -> None:
    async with RawServer() as raw:
        raw.watch_routes[CMS] = raw_bytes(b"HTTP/1.1 \xb2 OK\r\nContent-Length: 0\r\n\r\n")
        err = await watch_error(raw.url)
    assert isinstance(err, wk.InvalidResponse), repr(err)  # was ConnectionFailed


@pytest.mark.parametrize("length", [b"-1", b"-100", b"+5", b"5_0", b"5, 6", b"\xb2"])
async def test_content_length_is_digits_only(length: bytes) -> None:
    """int() took "-100": the body end moved 100 bytes before its start, and take() then
    searched the buffer from its far end (the watch "ended cleanly" with what followed)."""
    proto = protocol()
    feed(proto, b"HTTP/1.1 200 OK\r\nContent-Length: " + length + b"\r\n\r\n" + EV * 3)
    assert isinstance(proto.error, FramingError)
    assert proto.r <= proto.b


async def test_watch_with_a_negative_content_length_is_invalid_response() -> None:
    async with RawServer() as raw:
        raw.watch_routes[CMS] = raw_bytes(
            b"HTTP/1.1 200 OK\r\nContent-Length: -100\r\n\r\n" + EV * 3)
        err = await watch_error(raw.url)
    assert isinstance(err, wk.InvalidResponse), repr(err)


async def test_endless_trailer_section_is_refused_and_the_buffer_stays_bounded() -> None:
    """After the last chunk the trailer section had no limit: the buffer grew by every read
    (nothing pauses reading when no body is pending, and bytes keep the idle timer quiet),
    each read rescanning all of it for the blank line."""
    proto = protocol()
    feed(proto, CHUNKED + b"%x\r\n" % len(EV) + EV + b"\r\n0\r\nX-Trailer: ")
    assert proto.take(1 << 16) == EV
    for _ in range(64):  # 4 MiB of trailer in 64 KiB reads
        feed(proto, b"a" * (64 << 10))
        if proto.error is not None:
            break
    assert isinstance(proto.error, FramingError)
    assert len(proto.buf) <= _http1.BUFFER_SIZE


async def test_watch_with_an_endless_trailer_section_is_invalid_response() -> None:
    async with RawServer() as raw:
        raw.watch_routes[CMS] = raw_bytes(
            CHUNKED + b"%x\r\n" % len(EV) + EV + b"\r\n0\r\nX-T: " + b"a" * (4 << 20))
        err = await watch_error(raw.url)
    assert isinstance(err, wk.InvalidResponse), repr(err)  # waited, growing, before


async def test_last_chunk_waits_for_its_crlf_instead_of_reading_stale_bytes() -> None:
    """_chunks looked at buf[eol+2:eol+4] after "0\\r\\n" without checking that those bytes
    had arrived: bytes an earlier read left there decided whether the body was complete."""
    for stale in (b"\x00\x00", b"\r\n"):
        proto = protocol()
        body = CHUNKED + b"%x\r\n" % len(EV) + EV + b"\r\n0\r\n"  # its final CRLF never comes
        proto.buf[len(body):len(body) + 2] = stale
        feed(proto, body)
        proto.connection_lost(None)
        assert not proto.eof and isinstance(proto.error, FramingError), stale
    proto = protocol()
    feed(proto, body + b"\r\n")
    assert proto.eof and proto.error is None


@pytest.mark.parametrize("size", [None, 1024])
async def test_head_and_chunk_header_limits_do_not_depend_on_read_sizes(size: int | None) -> None:
    """MAX_HEAD and MAX_CHUNK_HEADER were checked only while the end had not arrived: the
    same bytes were refused in small reads and accepted in one."""
    proto = protocol()
    feed(proto, b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * (100 << 10) + b"\r\n\r\n", size)
    assert isinstance(proto.error, FramingError) and "head too long" in str(proto.error)
    proto = protocol()
    feed(proto, CHUNKED + b"8;" + b"x" * 8000 + b"\r\n" + b'{"a":1}\n\r\n0\r\n\r\n', size)
    assert isinstance(proto.error, FramingError) and "chunk header" in str(proto.error)


# -- _pieces: one value per line -----------------------------------------------------------------

A = b'{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"1"}}}'
BOOKMARK = b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"7"}}}'
C = (b'{"type":"ADDED","object":{"metadata":{"name":"c","resourceVersion":"8",'
     b'"annotations":{"k8s.io/initial-events-end":"true"}}}}')
GONE = b'{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"x"}}'


def decoded(body: bytes, lazy: bool, piece: int) -> tuple[list[Any], str]:
    """Events and error of ``body`` decoded in pieces of about ``piece`` bytes, as
    FastWatchStream.batches does (whole lines per piece)."""
    dec = PieceDecoder("/p", lazy=lazy)
    out: list[Any] = []
    r = 0
    while r < len(body):
        end = body.rfind(b"\n", r, r + piece) if r + piece < len(body) else len(body) - 1
        end = body.find(b"\n", r) if end < r else end
        envs, bad = dec.decode(body[r:end + 1])
        err: wk.ApiError | None = bad
        r = end + 1
        if envs:
            batch, err2 = dec.events(envs, _RAW_CLASSES, raw_event_class, {})
            out += [(type(e).__name__, e.name, e.resource_version, e.obj) for e in batch]
            err = err or err2
        if err is not None:
            return out, type(err).__name__
    return out, ""


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("body", [
    A + b" " + BOOKMARK + b"\n" + C + b"\n\n",  # two values on a line, a blank line
    A + b" " + GONE + b"\n" + C + b"\n\n",
    A[:-1] + b"\n" + b"} " + C + b"\n",  # a value over two lines, two values on the next
    A + b"\n" + GONE[:-20] + b"\n\n" + GONE[-20:] + b"\n",  # newlines inside a string
], ids=["bookmark", "error", "split-value", "newline-in-string"])
def test_a_piece_with_a_line_of_two_values_is_refused_as_line_by_line(
    body: bytes, lazy: bool
) -> None:
    """The fast path compared the number of values with the number of newlines, which a
    line of two values plus a blank line (or a split value) also satisfies: the piece was
    accepted though the same line alone is refused, and in a lazy stream event i read line
    i, another event's: the BOOKMARK got "c"'s resourceVersion and annotations, and the
    410 Gone was decoded from an ADDED line as a ServerError 500."""
    whole = decoded(body, lazy, 1 << 16)
    by_line = decoded(body, lazy, 1)
    assert whole == by_line
    assert whole[1] == "InvalidResponse"


@pytest.mark.parametrize("lazy", [False, True])
def test_ordinary_pieces_still_take_the_fast_path(lazy: bool) -> None:
    body = A + b"\n" + BOOKMARK + b"\n" + C + b"\r\n" + GONE + b"\n"
    dec = PieceDecoder("/p", lazy=lazy)
    envs, bad = dec.decode(body)
    assert bad is None and len(envs) == 4 and dec.plain is False
    batch, err = dec.events(envs, _RAW_CLASSES, raw_event_class, {})
    assert [(getattr(e, "type", ""), e.resource_version) for e in batch] == [
        ("ADDED", "1"), ("BOOKMARK", "7"), ("ADDED", "8")]
    assert isinstance(err, wk.Gone)


# -- exec plugins: their stdout --------------------------------------------------------------------

TOKEN = "tok-3f9a0c1e5b7d"


def credential(status: dict[str, Any]) -> bytes:
    return json.dumps({"kind": "ExecCredential",
                       "apiVersion": "client.authentication.k8s.io/v1", "status": status},
                      ensure_ascii=True).encode()


@pytest.mark.parametrize("status", [
    {"clientCertificateData": "\ud800", "clientKeyData": "k"},  # cert.encode() raised
    {"clientCertificateData": "c", "clientKeyData": "-----BEGIN\udfff"},
    {"token": TOKEN + "\n"},  # accepted, then every request raised ValueError
    {"token": TOKEN + "\r\nX-Injected: 1"},
    {"token": TOKEN + "\0"},
    {"token": TOKEN + "\u4e2d"},  # the watch stream raised UnicodeEncodeError
    {"token": TOKEN + "\ud800"},
], ids=["cert-surrogate", "key-surrogate", "token-lf", "token-crlf", "token-nul",
        "token-cjk", "token-surrogate"])
async def test_exec_plugin_output_that_no_request_can_use_is_exec_plugin_error(
    tmp_path: Path, status: dict[str, Any]
) -> None:
    plugin = tmp_path / "plugin.py"
    plugin.write_bytes(b"import sys\nsys.stdout.buffer.write(" + repr(credential(status)).encode()
                       + b")\n")
    auth = ExecAuth(sys.executable, [str(plugin)])
    with pytest.raises(ExecPluginError) as info:
        await auth.headers()
    assert TOKEN not in str(info.value)


# -- kubeconfig ----------------------------------------------------------------------------------


def kubeconfig(tmp_path: Path, cluster: dict[str, Any], user: dict[str, Any]) -> Path:
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
           "clusters": [{"name": "k", "cluster": cluster}],
           "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
           "users": [{"name": "u", "user": user}]}
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(doc))
    return path


SERVER = {"server": "https://127.0.0.1:6443", "insecure-skip-tls-verify": True}


@pytest.mark.parametrize("cluster, user", [
    ({"server": "https://h", "certificate-authority": "ca\0.crt"}, {}),  # ValueError before
    (SERVER, {"client-certificate": "a\0b", "client-key": "k"}),
    (SERVER, {"token": TOKEN + "\n"}),  # loaded; then every request raised ValueError
    (SERVER, {"token": TOKEN + "\u4e2d"}),
    (SERVER, {"token": "x", "as": "alice\r\nX-Injected: 1"}),
    (SERVER, {"token": "x", "as": "alice", "as-groups": ["g\0"]}),
    ({"server": "https://:*"}, {}),  # the watch raised ValueError for these servers
    ({"server": "https://h:99999"}, {}),
    ({"server": "ftp://h"}, {}),
    ({"server": "https://[::1"}, {}),
    ({"server": "https://h\u4e2d"}, {}),
], ids=["ca-nul", "cert-nul", "token-lf", "token-cjk", "as-crlf", "group-nul", "no-host",
        "port", "scheme", "ipv6", "non-ascii-host"])
def test_kubeconfig_values_no_request_can_use_are_config_errors(
    tmp_path: Path, cluster: dict[str, Any], user: dict[str, Any]
) -> None:
    path = kubeconfig(tmp_path, cluster, user)
    with pytest.raises(ConfigError) as info:
        load_kubeconfig([path])
    assert str(path) in str(info.value) and TOKEN not in str(info.value)


EXEC = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "plugin",
                 "interactiveMode": "Never", "provideClusterInfo": True}}


def with_extension(extension: Any) -> dict[str, Any]:
    return {**SERVER, "extensions": [{"name": "client.authentication.k8s.io/exec",
                                      "extension": extension}]}


def test_exec_cluster_extension_with_a_yaml_date_is_passed_as_text(tmp_path: Path) -> None:
    """A YAML date in the extension made json.dumps raise TypeError when the plugin was
    first run (out of every request); client-go passes it as RFC 3339 text."""
    import datetime

    path = kubeconfig(tmp_path, with_extension({"since": datetime.date(2001, 2, 3)}), EXEC)
    auth = load_kubeconfig([path]).auth
    assert isinstance(auth, ExecAuth)
    info = json.loads(auth._exec_info())
    assert info["spec"]["cluster"]["config"] == {"since": "2001-02-03"}


@pytest.mark.parametrize("extension", ["{a: .nan}", "&x [*x]"], ids=["nan", "cycle"])
def test_exec_cluster_extension_that_is_no_json_is_a_config_error(
    tmp_path: Path, extension: str
) -> None:
    path = kubeconfig(tmp_path, with_extension("EXT"), EXEC)
    path.write_text(path.read_text().replace("extension: EXT", "extension: " + extension))
    with pytest.raises(ConfigError, match="cannot be passed to the exec plugin as JSON"):
        load_kubeconfig([path])
