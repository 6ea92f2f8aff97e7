"""The watch stream's own HTTP/1.1 reader and piece decoder (client/stream.py), against a raw
127.0.0.1 server that sends exactly the bytes a test chooses, split as the test chooses."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import watchkeeper as wk
from watchkeeper.client._http1 import BUFFER_SIZE, HIGH_WATER
from watchkeeper.client.stream import FastWatchStream, open_stream
from watchkeeper_sim import ApiServer

PATH = "/api/v1/namespaces/ns/configmaps"
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def line(i: int, kind: str = "MODIFIED") -> bytes:
    """One watch line; some carry non-ASCII (valid UTF-8) text, lengths vary."""
    data = "ü€" * (i % 3) + "v" * (i * 7 % 50)
    return msgspec.json.encode({"type": kind, "object": {
        "kind": "ConfigMap", "apiVersion": "v1",
        "metadata": {"name": f"cm-{i}", "namespace": "ns", "resourceVersion": str(100 + i)},
        "data": {"k": data}}}) + b"\n"


# Every legal way to write a chunk's size line: lower and upper case hex, leading zeros, an
# extension (the receiver has a fast path for the plain form and must agree with it).
HEADER_FORMS = {
    "plain": lambda n: b"%x" % n,
    "upper": lambda n: b"%X" % n,
    "zeros": lambda n: b"%012x" % n,
    "extension": lambda n: b"%x;name=value" % n,
}


def chunked(body: bytes, sizes: list[int], forms: list[str] | None = None) -> bytes:
    out, i, n = [], 0, 0
    while i < len(body):
        size = sizes[n % len(sizes)] if sizes else len(body)
        form = HEADER_FORMS[forms[n % len(forms)] if forms else "plain"]
        n += 1
        part = body[i:i + size]
        out.append(b"%s\r\n%s\r\n" % (form(len(part)), part))
        i += size
    out.append(b"0\r\n\r\n")
    return b"".join(out)


HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"


async def send_split(writer: asyncio.StreamWriter, data: bytes, splits: list[int]) -> None:
    """Write ``data`` in pieces, yielding to the loop between them so reads see the splits."""
    i = n = 0
    while i < len(data):
        size = splits[n % len(splits)] if splits else len(data)
        n += 1
        writer.write(data[i:i + size])
        await writer.drain()
        await asyncio.sleep(0)
        i += size


def respond_with(data: bytes, splits: list[int] | None = None, *, close: bool = True) -> Handler:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        await send_split(writer, data, splits or [])
        if close:
            writer.close()
        else:
            await asyncio.sleep(3600)

    return handler


@asynccontextmanager
async def raw_server(handler: Handler) -> AsyncIterator[wk.Client]:
    """A server on 127.0.0.1 running ``handler`` per connection, and a client for it."""
    tasks: set[asyncio.Task[None]] = set()

    async def run(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        tasks.add(task)
        try:
            await handler(reader, writer)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(run, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with wk.Client(wk.ClientConfig(server=f"http://127.0.0.1:{port}")) as client:
            yield client
    finally:
        for t in tasks:
            t.cancel()
        server.close()
        await asyncio.gather(*tasks, return_exceptions=True)


async def collect(stream: FastWatchStream, out: list[tuple[str, str, str]]) -> None:
    async for ev in stream:
        out.append((ev.type, ev.name, ev.resource_version))


def expected(indices: range | list[int]) -> list[tuple[str, str, str]]:
    return [("MODIFIED", f"cm-{i}", str(100 + i)) for i in indices]


# -- framing and splitting ---------------------------------------------------------------------


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    count=st.integers(0, 40),
    chunk_sizes=st.lists(st.integers(1, 2100), min_size=1, max_size=8),
    forms=st.lists(st.sampled_from(sorted(HEADER_FORMS)), min_size=1, max_size=5),
    write_sizes=st.lists(st.integers(1, 3000), min_size=1, max_size=8),
    piece=st.integers(1, 5000),
    lazy=st.booleans(),
)
def test_any_chunking_and_read_splits_give_the_same_events(
    count: int, chunk_sizes: list[int], forms: list[str], write_sizes: list[int], piece: int,
    lazy: bool
) -> None:
    body = b"".join(line(i) for i in range(count))
    data = HEAD + chunked(body, chunk_sizes, forms)

    async def scenario() -> list[tuple[str, str, str]]:
        got: list[tuple[str, str, str]] = []
        async with raw_server(respond_with(data, write_sizes)) as client, open_stream(
            client.transport, PATH, lazy=lazy, piece=piece, buffer_size=64 << 10
        ) as stream:
            await collect(stream, got)
        return got

    assert asyncio.run(scenario()) == expected(range(count))


@pytest.mark.parametrize("framing", ["content-length", "close-delimited", "extensions-trailers"])
async def test_other_body_framings(framing: str) -> None:
    body = b"".join(line(i) for i in range(5))
    if framing == "content-length":
        data = (b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body)) + body
    elif framing == "close-delimited":
        data = b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + body
    else:
        data = HEAD + b"%x;name=value\r\n%s\r\n0\r\nX-Trailer: 1\r\n\r\n" % (len(body), body)
    got: list[tuple[str, str, str]] = []
    async with raw_server(respond_with(data, [7])) as client, open_stream(
        client.transport, PATH
    ) as stream:
        await collect(stream, got)
    assert got == expected(range(5))


async def test_interim_response_is_skipped() -> None:
    data = b"HTTP/1.1 100 Continue\r\n\r\n" + HEAD + chunked(line(1), [])
    got: list[tuple[str, str, str]] = []
    async with raw_server(respond_with(data)) as client, open_stream(
        client.transport, PATH
    ) as stream:
        await collect(stream, got)
    assert got == expected([1])


async def test_a_cut_connection_delivers_what_came_then_fails() -> None:
    data = HEAD + b"%x\r\n%s" % (1000, line(1) + line(2)[:20])  # the chunk never completes
    got: list[tuple[str, str, str]] = []
    async with raw_server(respond_with(data)) as client:
        with pytest.raises(wk.ConnectionFailed) as info:
            async with open_stream(client.transport, PATH) as stream:
                await collect(stream, got)
    assert got == expected([1])
    assert info.value.reason == "ConnectionReset"


@pytest.mark.parametrize("header", [b"zz", b"-5", b"8_00", b" 800", b""])
async def test_a_malformed_chunk_header_after_good_chunks_fails_after_their_events(
    header: bytes
) -> None:
    """Go-sized chunks (2,048 bytes, the receiver's fast path), then a bad size line: the
    events before it arrive, then the watch fails as malformed (nothing after it is read)."""
    good = b"".join(line(i) for i in range(20))
    cut = len(good) - len(good) % 2048
    data = HEAD + chunked(good[:cut], [2048])[:-5] + header + b"\r\n" + good[cut:] + b"\r\n"
    got: list[tuple[str, str, str]] = []
    async with raw_server(respond_with(data, [4096], close=False)) as client:
        with pytest.raises(wk.InvalidResponse, match="malformed HTTP response"):
            async with open_stream(client.transport, PATH) as stream:
                await collect(stream, got)
    whole = good[:cut].count(b"\n")
    assert got == expected(range(whole))


async def test_malformed_chunk_framing_is_an_invalid_response() -> None:
    data = HEAD + b"zz\r\n" + line(1) + b"\r\n"
    async with raw_server(respond_with(data, close=False)) as client:
        with pytest.raises(wk.InvalidResponse, match="malformed HTTP response"):
            async with open_stream(client.transport, PATH) as stream:
                await collect(stream, [])


async def test_a_compressed_watch_is_refused_we_ask_for_identity() -> None:
    seen: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()

    async with raw_server(handler) as client:
        with pytest.raises(wk.InvalidResponse, match="Content-Encoding 'gzip'"):
            async with open_stream(client.transport, PATH):
                pass
    assert b"\r\nAccept-Encoding: identity\r\n" in seen[0]


async def test_error_status_is_typed_and_warnings_are_surfaced() -> None:
    status = msgspec.json.encode({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                  "reason": "Forbidden", "code": 403,
                                  "message": 'configmaps is forbidden: User "u" cannot watch'})
    data = (b"HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\n"
            b'Warning: 299 - "deprecated thing"\r\n'
            b"Content-Length: %d\r\n\r\n%s" % (len(status), status))
    warnings: list[str] = []
    async with raw_server(respond_with(data, [5])) as client:
        client.transport.on_warning = warnings.append
        with pytest.raises(wk.Forbidden, match="cannot watch"):
            async with open_stream(client.transport, PATH):
                pass
    assert warnings == ["deprecated thing"]


async def test_a_401_is_retried_once_with_refreshed_credentials() -> None:
    answers = [b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n",
               HEAD + chunked(line(3), [])]

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answers.pop(0))
        await writer.drain()

    got: list[tuple[str, str, str]] = []
    async with raw_server(handler) as client, open_stream(client.transport, PATH) as stream:
        await collect(stream, got)
    assert got == expected([3]) and not answers


# -- bad lines ---------------------------------------------------------------------------------

BAD_LINES = {
    "invalid-json": b'{"type":"MODIFIED","object":{"metadata":{"name":"x"}',
    "non-utf8": b'{"type":"MODIFIED","object":{"metadata":{"name":"x"},"data":{"k":"\xff\xfe"}}}',
    "two-values": b'{"type":"MODIFIED","object":{}} {"type":"MODIFIED","object":{}}',
    "object-not-a-map": b'{"type":"MODIFIED","object":5}',
    "type-not-a-string": b'{"type":1,"object":{}}',
    "no-type": b'{"object":{"metadata":{"name":"x"}}}',
    "not-an-object": b"[1,2,3]",
    "garbage": b"this is not json",
}
GOOD = 6


@pytest.mark.parametrize("lazy", [True, False], ids=["lazy", "eager"])
@pytest.mark.parametrize("kind", list(BAD_LINES))
async def test_a_bad_line_anywhere_in_a_piece(kind: str, lazy: bool) -> None:
    """Events before the bad line are delivered; the error carries the line (truncated) and
    the last good resourceVersion; nothing after it is delivered."""
    bad = BAD_LINES[kind]
    for position in range(GOOD + 1):
        lines = [line(i) for i in range(GOOD)]
        lines.insert(position, bad + b"\n")
        data = HEAD + chunked(b"".join(lines), [])
        got: list[tuple[str, str, str]] = []
        async with raw_server(respond_with(data, close=False)) as client:
            with pytest.raises(wk.InvalidResponse) as info:
                async with open_stream(client.transport, PATH, lazy=lazy,
                                       read_timeout=10) as stream:
                    await collect(stream, got)
        assert got == expected(range(position)), (kind, position)
        err: Any = info.value
        assert err.line == bad[:80]
        assert err.resource_version == (str(100 + position - 1) if position else "")
        assert "undecodable watch event" in str(err)
        assert f"after resourceVersion {err.resource_version or '(none)'}" in str(err)


async def test_the_error_quotes_at_most_80_bytes_of_the_line() -> None:
    bad = b'{"type":"MODIFIED","object":{"data":{"k":"' + b"s" * 5000 + b'"}}'  # no closing }
    data = HEAD + chunked(line(0) + bad + b"\n", [])
    async with raw_server(respond_with(data, close=False)) as client:
        with pytest.raises(wk.InvalidResponse) as info:
            async with open_stream(client.transport, PATH, lazy=True) as stream:
                await collect(stream, [])
    assert "s" * 81 not in str(info.value) and "(5,045 bytes)" in str(info.value)


@pytest.mark.parametrize("lazy", [True, False], ids=["lazy", "eager"])
async def test_blank_lines_are_skipped(lazy: bool) -> None:
    data = HEAD + chunked(line(1) + b"\n  \n" + line(2) + b"\r\n" + line(3), [11])
    got: list[tuple[str, str, str]] = []
    async with raw_server(respond_with(data)) as client, open_stream(
        client.transport, PATH, lazy=lazy
    ) as stream:
        await collect(stream, got)
    assert got == expected([1, 2, 3])


# -- limits: line cap, line timeout, idle timeout, backpressure ---------------------------------


async def test_an_overlong_line_is_an_invalid_response_not_memory() -> None:
    data = HEAD + chunked(line(1) + b'{"type":"MODIFIED","object":{"k":"' + b"x" * 300_000, [4096])
    async with raw_server(respond_with(data, close=False)) as client:
        with pytest.raises(wk.InvalidResponse, match="longer than 65536 bytes"):
            async with open_stream(client.transport, PATH, max_line=65_536,
                                   buffer_size=64 << 10) as stream:
                proto = stream._conn.proto
                got: list[tuple[str, str, str]] = []
                try:
                    await collect(stream, got)
                finally:
                    assert len(proto.buf) <= 3 * (64 << 10) + 65_536
        assert got == expected([1])


async def test_a_long_line_under_the_cap_grows_the_buffer_then_it_shrinks_back() -> None:
    long = msgspec.json.encode({"type": "MODIFIED", "object": {
        "metadata": {"name": "big", "resourceVersion": "7"}, "data": {"k": "y" * 500_000}}})
    data = HEAD + chunked(long + b"\n" + line(1), [10_000])
    got: list[tuple[str, str, str]] = []
    async with raw_server(respond_with(data)) as client, open_stream(
        client.transport, PATH, buffer_size=64 << 10
    ) as stream:
        await collect(stream, got)
        assert len(stream._conn.proto.buf) == 64 << 10
    assert got == [("MODIFIED", "big", "7"), *expected([1])]


async def test_a_line_that_never_completes_times_out() -> None:
    async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(HEAD + chunked(line(1), [])[:-5] + b"100000\r\n{")  # a line begins
        while True:  # ... and one byte keeps coming, so the stream is never idle
            await asyncio.sleep(0.05)
            writer.write(b" ")
            await writer.drain()

    got: list[tuple[str, str, str]] = []
    async with raw_server(trickle) as client:
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(wk.Timeout) as info:
            async with open_stream(client.transport, PATH, read_timeout=30,
                                   line_timeout=0.5) as stream:
                await collect(stream, got)
    assert info.value.reason == "LineTimeout"
    assert "did not complete within 0.5 s" in str(info.value)
    assert 0.4 < loop.time() - started < 5
    assert got == expected([1])


async def test_a_silent_stream_times_out() -> None:
    async with raw_server(respond_with(HEAD, close=False)) as client:
        with pytest.raises(wk.Timeout) as info:
            async with open_stream(client.transport, PATH, read_timeout=0.3) as stream:
                await collect(stream, [])
    assert info.value.reason == "ClientTimeout"


async def test_a_slow_consumer_pauses_reading_and_memory_stays_bounded() -> None:
    """The server can send 60 MB at once; while the consumer sleeps, the client stops
    reading (the kernel's buffers fill and the server's writes block)."""
    one = b"".join(line(i) for i in range(500))
    block = b"%x\r\n%s\r\n" % (len(one), one)
    repeats = 60_000_000 // len(one)
    sent = 0

    async def flood(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal sent
        await reader.readuntil(b"\r\n\r\n")
        writer.write(HEAD)
        for _ in range(repeats):
            writer.write(block)
            sent += len(block)
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        writer.close()

    async with raw_server(flood) as client, open_stream(client.transport, PATH) as stream:
        proto = stream._conn.proto
        count = 0
        biggest = 0
        async for envs in stream.pieces():
            count += len(envs)
            biggest = max(biggest, len(proto.buf))
            if count == len(envs):  # after the first piece: a long pause
                await asyncio.sleep(1.0)
                assert proto.paused
                assert proto.b - proto.r <= HIGH_WATER + BUFFER_SIZE
                assert sent < 30_000_000, f"{sent:,} bytes sent while the consumer slept"
    assert count == 500 * repeats
    assert biggest == BUFFER_SIZE


def test_reads_uvloop_makes_in_one_loop_turn_stop_at_the_high_water_mark() -> None:
    """uvloop (``watchkeeper[fast]``) reads up to 32 times per loop turn before the woken
    consumer runs: reading pauses at the high-water mark then too, so a burst never grows
    the receive buffer (it grew to 8-16 MiB while the consumer's wake-up was pending)."""
    import uvloop

    one = b"".join(line(i) for i in range(500))
    block = b"%x\r\n%s\r\n" % (len(one), one)
    repeats = 30_000_000 // len(one)

    async def flood(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(HEAD)
        for _ in range(repeats):
            writer.write(block)
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        writer.close()

    async def main() -> tuple[int, int, int]:
        count = biggest = most = 0
        async with raw_server(flood) as client, open_stream(client.transport, PATH) as stream:
            proto = stream._conn.proto
            async for batch in stream.batches():
                count += len(batch)
                biggest = max(biggest, len(proto.buf))
                most = max(most, proto.b - proto.r)
        return count, biggest, most

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        count, biggest, most = runner.run(main())
    assert count == 500 * repeats
    assert biggest == BUFFER_SIZE, f"the buffer grew to {biggest:,} bytes"
    assert most <= HIGH_WATER + BUFFER_SIZE


# -- over the simulator, plain and TLS ---------------------------------------------------------


def cm(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}, "data": {"k": "ü"}}


@pytest.mark.parametrize("lazy", [True, False], ids=["lazy", "eager"])
@pytest.mark.parametrize("mtls", [False, True], ids=["token", "client-cert"])
async def test_watcher_over_tls(lazy: bool, mtls: bool) -> None:
    async with ApiServer(tls=True) as srv:
        config = srv.client_config("admin", cert_groups=["system:masters"] if mtls else None)
        async with wk.Client(config) as client:
            api = client.api("configmaps", namespace="default")
            await api.create(cm("before"))
            names: list[str] = []
            cfg = wk.WatchConfig(lazy_decode=lazy, max_unhealthy=None)

            async def consume() -> None:
                async for ev in wk.watcher(api, cfg):
                    if isinstance(ev, wk.InitApply | wk.Apply):
                        names.append(ev.name)
                        assert ev.obj["data"] == {"k": "ü"}
                        if ev.name == "after":
                            return
                    elif isinstance(ev, wk.WatchError):
                        raise ev.error

            task = asyncio.create_task(consume())
            while not srv.open_watches:
                await asyncio.sleep(0.01)
            await api.create(cm("after"))
            await asyncio.wait_for(task, 10)
    assert names == ["before", "after"]
    assert srv.requests[-1].user == "admin" or any(r.is_watch for r in srv.requests)


async def test_tls_watch_verifies_the_server_and_uses_the_server_name() -> None:
    async with ApiServer(tls=True) as srv:
        untrusted = dataclasses.replace(srv.client_config("admin"), ca_data=None)
        async with wk.Client(untrusted) as client:
            with pytest.raises(wk.ConnectionFailed) as info:
                async with client.api("configmaps", namespace="default").watch():
                    pass
            assert info.value.reason == "TLSError"
            assert "verification failed" in str(info.value)
        # Connecting by IP but verifying the certificate's DNS name (kubeconfig's
        # tls-server-name) works; a name the certificate lacks does not.
        named = dataclasses.replace(srv.client_config("admin"), tls_server_name="localhost")
        wrong = dataclasses.replace(srv.client_config("admin"), tls_server_name="example.org")
        async with wk.Client(named) as client, client.api(
            "configmaps", namespace="default"
        ).watch(timeout_seconds=1) as stream:
            async for _ev in stream:
                pass
        async with wk.Client(wrong) as client:
            with pytest.raises(wk.ConnectionFailed, match="verification failed"):
                async with client.api("configmaps", namespace="default").watch():
                    pass
    assert not [r for r in srv.requests if r.is_watch and r.user != "admin"]


async def test_api_watch_errors_carry_the_last_good_resource_version() -> None:
    """Through the public ``Api.watch``: what a resume needs is on the error."""
    data = HEAD + chunked(line(1) + line(2) + b"{oops\n", [])
    async with raw_server(respond_with(data, close=False)) as client:
        api = client.api("configmaps", namespace="ns")
        got: list[tuple[str, str, str]] = []
        with pytest.raises(wk.InvalidResponse) as info:
            async with api.watch(lazy=True) as stream:
                await collect(stream, got)
    assert got == expected([1, 2])
    assert info.value.details["lastResourceVersion"] == "102"


@pytest.mark.parametrize("lazy", [True, False], ids=["lazy", "eager"])
async def test_a_consumer_that_stops_mid_piece_resumes_from_what_it_saw(lazy: bool) -> None:
    """Bookkeeping is per piece, but the resume version is the last event delivered."""
    data = HEAD + chunked(b"".join(line(i) for i in range(10)), [])
    async with raw_server(respond_with(data, close=False)) as client:
        api = client.api("configmaps", namespace="ns")
        w = wk.watcher(api, wk.WatchConfig(lazy_decode=lazy), resource_version="1")
        events = aiter(w)
        seen = []
        async for ev in events:
            assert isinstance(ev, wk.Apply)
            seen.append(ev.name)
            if len(seen) == 3:
                break
        await events.aclose()  # type: ignore[attr-defined]
    assert seen == ["cm-0", "cm-1", "cm-2"]
    assert w.resource_version == "102"


# -- LIST pager -----------------------------------------------------------------------------------


def test_the_pager_reads_the_continue_token_from_the_head_only() -> None:
    from watchkeeper.client._pager import peek_continue

    head = b'{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"5",'
    assert peek_continue(head + b'"continue":"eyJ2Ijo=_-."},"items":[]}') == "eyJ2Ijo=_-."
    assert peek_continue(head + b'"continue":""},"items":[]}') is None
    # A "continue" inside an item is not the list's.
    assert peek_continue(head + b'"x":1},"items":[{"continue":"no"}]}') is None


async def test_list_all_with_metadata_after_items_still_follows_every_page() -> None:
    """A server that writes ``items`` first: the token is found by decoding, sequentially."""
    pages = {None: (b"a", "t1"), "t1": (b"b", "t2"), "t2": (b"c", None)}
    asked: list[str | None] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            target = head.split(b" ")[1].decode()
            token = target.split("continue=")[1].split("&")[0] if "continue=" in target \
                else None
            asked.append(token)
            name, nxt = pages[token]
            meta: dict[str, Any] = {"resourceVersion": "9"}
            if nxt:
                meta["continue"] = nxt
            body = msgspec.json.encode({"kind": "ConfigMapList", "items": [
                {"metadata": {"name": name.decode()}}], "metadata": meta})
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()

    async with raw_server(handler) as client:
        listed = await client.api("configmaps", namespace="ns").list_all(page_size=1)
    assert [i["metadata"]["name"] for i in listed.items] == ["a", "b", "c"]
    assert asked == [None, "t1", "t2"] and listed.resource_version == "9"
