"""A watch goes on the wire in the HTTP chunks kube-apiserver sends: Go's net/http buffers
the response in 2,048 bytes (``bufferBeforeChunkingSize``) and the watch handler flushes
only when no further event is queued. So a replay (a watch that is behind) arrives in full
2,048-byte chunks, and a live event on an idle watch in a chunk of its own."""

from __future__ import annotations

import asyncio
import json
from urllib.parse import urlsplit

from watchkeeper_sim import ApiServer
from watchkeeper_sim.wire.body import ChunkBuffer

from .._util import cm

CMS = "/api/v1/namespaces/default/configmaps"


def test_the_buffer_sends_full_chunks_and_keeps_the_rest() -> None:
    buf = ChunkBuffer(2048)
    assert buf.write(b"a" * 1176) == []
    assert buf.write(b"b" * 1176) == [b"a" * 1176 + b"b" * 872]
    assert buf.write(b"c" * 1744) == []  # exactly full: it goes out with the next write
    assert buf.write(b"d") == [b"b" * 304 + b"c" * 1744]
    assert buf.flush() == b"d"
    assert buf.flush() == b""


def test_a_large_write_goes_out_whole_when_nothing_is_buffered() -> None:
    buf = ChunkBuffer(2048)
    assert buf.write(b"x" * 5000) == [b"x" * 5000]  # bufio writes it through, one chunk
    assert buf.write(b"y" * 100) == []
    # Buffered bytes first fill the buffer; the rest (over 2,048, buffer now empty) goes
    # out whole.
    assert buf.write(b"z" * 5000) == [b"y" * 100 + b"z" * 1948, b"z" * 3052]
    assert buf.write(b"w" * 10) == []
    assert buf.flush() == b"w" * 10
    assert buf.flush() == b""


async def _chunks(reader: asyncio.StreamReader, lines: int) -> list[bytes]:
    """Chunk payloads as they arrive, until they hold ``lines`` whole lines (or the last
    chunk came)."""
    out: list[bytes] = []
    while sum(c.count(b"\n") for c in out) < lines:
        size = int((await reader.readuntil(b"\r\n"))[:-2].split(b";")[0], 16)
        if size == 0:
            break
        out.append(await reader.readexactly(size))
        assert await reader.readexactly(2) == b"\r\n"
    return out


async def test_a_replay_arrives_in_2048_byte_chunks_and_a_live_event_in_its_own(
    apiserver: ApiServer,
) -> None:
    rv = apiserver.store.rv
    for i in range(40):
        apiserver.create_object(cm(f"c{i:02d}", payload="p" * 900))
    url = urlsplit(apiserver.url)
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    try:
        writer.write(
            f"GET {CMS}?watch=1&resourceVersion={rv} HTTP/1.1\r\nHost: {url.netloc}\r\n"
            f"Authorization: Bearer {apiserver.token('admin')}\r\n\r\n".encode())
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert b"Transfer-Encoding: chunked" in head
        replay = await asyncio.wait_for(_chunks(reader, 40), 5)
        body = b"".join(replay)
        lines = body.splitlines()
        assert [json.loads(x)["object"]["metadata"]["name"] for x in lines] == [
            f"c{i:02d}" for i in range(40)]
        assert len(body) > 10 * 2048  # the lines are ~1.1 KB: many chunks
        assert [len(c) for c in replay[:-1]] == [2048] * (len(replay) - 1)
        assert 0 < len(replay[-1]) <= 2048  # the rest, flushed once nothing was queued
        assert body.endswith(b"\n")

        apiserver.create_object(cm("live", payload="q" * 50))  # the watch is idle now
        (live,) = await asyncio.wait_for(_chunks(reader, 1), 5)
        assert live.endswith(b"\n") and live.count(b"\n") == 1
        assert json.loads(live)["object"]["metadata"]["name"] == "live"
    finally:
        writer.close()
