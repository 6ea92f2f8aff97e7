"""A watch that keeps up is handed each read's lines in the future its consumer awaits
(``ResponseProtocol.hand``): no ``take`` per read. Nothing may be lost or reordered by it: a
cancelled wait, lines already pending, more than the consumer asked for, a grown buffer
all leave the bytes in the buffer for ``take``, as before.

Protocol-level (reads fed as asyncio delivers them), and one watch end to end against a
raw server on 127.0.0.1; run with the C part and without it (``make unit``).
"""

from __future__ import annotations

import asyncio

import pytest

import watchkeeper as wk
from watchkeeper.client._http1 import ResponseProtocol

from .rawserver import RawServer, Request

CMS = "/api/v1/namespaces/default/configmaps"
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"


def line(name: str, rv: int) -> bytes:
    return (b'{"type":"ADDED","object":{"metadata":{"name":"%s","resourceVersion":"%d"}}}\n'
            % (name.encode(), rv))


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class _Transport:
    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...
    def abort(self) -> None: ...


def feed(proto: ResponseProtocol, data: bytes) -> None:
    """One read, as asyncio delivers it: get_buffer, copy, buffer_updated."""
    view = proto.get_buffer(-1)
    view[:len(data)] = data
    proto.buffer_updated(len(data))


async def streaming() -> ResponseProtocol:
    """A protocol past its head and first chunk (taken), as a watch that keeps up is."""
    proto = ResponseProtocol(1 << 20)
    proto.connection_made(_Transport())
    feed(proto, HEAD + chunk(line("first", 1)))
    assert proto.head_ready is not None and proto.head_ready.done()
    assert proto.take(1 << 16) == line("first", 1)
    return proto


def wait_for_lines(proto: ResponseProtocol, size: int) -> asyncio.Future[bytes | None]:
    """What ``FastWatchStream.batches`` does when all is taken."""
    fut = proto._waiter = asyncio.get_running_loop().create_future()
    proto.hand = size
    return fut


async def test_a_read_of_whole_lines_is_handed_to_the_waiting_consumer() -> None:
    proto = await streaming()
    fut = wait_for_lines(proto, 1 << 16)
    two = line("a", 2) + line("b", 3)
    feed(proto, chunk(line("a", 2)) + chunk(line("b", 3)))
    assert fut.done() and fut.result() == two
    assert (proto.r, proto.b, proto.p, proto.w) == (0, 0, 0, 2)  # back at the front
    assert proto._waiter is None
    # The next read goes on from the CRLF left at the front.
    fut = wait_for_lines(proto, 1 << 16)
    feed(proto, chunk(line("c", 4)))
    assert fut.result() == line("c", 4)


async def test_a_cancelled_wait_leaves_the_lines_for_take() -> None:
    proto = await streaming()
    fut = wait_for_lines(proto, 1 << 16)
    fut.cancel()
    feed(proto, chunk(line("a", 2)))  # set_result on a cancelled future would raise here
    assert proto.error is None
    assert proto.take(1 << 16) == line("a", 2)


async def test_lines_over_what_the_consumer_takes_at_once_are_left_for_take() -> None:
    proto = await streaming()
    fut = wait_for_lines(proto, len(line("a", 2)))
    feed(proto, chunk(line("a", 2)) + chunk(line("b", 3)))
    assert fut.done() and fut.result() is None  # woken, handed nothing
    assert proto.take(len(line("a", 2))) == line("a", 2)
    assert proto.take(1 << 16) == line("b", 3)


async def test_a_line_cut_inside_a_chunk_is_left_for_take() -> None:
    proto = await streaming()
    fut = wait_for_lines(proto, 1 << 16)
    whole = chunk(line("a", 2) + line("b", 3))
    cut = whole.index(b"}\n") + 7  # the first line and part of the second, in one chunk
    feed(proto, whole[:cut])
    assert fut.result() is None
    assert proto.take(1 << 16) == line("a", 2)
    fut = proto.waiter()  # a line has begun: the stream waits for anything
    feed(proto, whole[cut:])
    assert fut.result() is None
    assert proto.take(1 << 16) == line("b", 3)


async def test_a_line_split_over_chunks_is_handed_over_whole() -> None:
    proto = await streaming()
    b = line("b", 3)
    feed(proto, chunk(line("a", 2) + b[:20]))  # no waiter: left in the buffer
    assert proto.take(1 << 16) == line("a", 2)
    fut = wait_for_lines(proto, 1 << 16)
    feed(proto, chunk(b[20:]))
    assert fut.result() == b
    assert (proto.r, proto.b, proto.p, proto.w) == (0, 0, 0, 2)


async def test_a_plain_wait_is_never_handed_bytes() -> None:
    proto = await streaming()
    proto.hand = 1 << 16  # left over from a consumer's wait for lines
    fut = proto.waiter()  # the general wait (an error body, the eager stream)
    feed(proto, chunk(line("a", 2)))
    assert fut.result() is None
    assert proto.take(1 << 16) == line("a", 2)


async def test_a_paced_watch_gets_every_event_in_order() -> None:
    """End to end: one chunk per event, each after the consumer has waited (the hand-over),
    and now and then two in one chunk or a line split over two chunks (``take``)."""
    count = 60

    async def handler(req: Request, writer: asyncio.StreamWriter) -> None:
        writer.write(HEAD)
        rv = 1
        while rv <= count:
            if rv % 10 == 0 and rv + 1 <= count:
                writer.write(chunk(line(f"cm-{rv}", rv) + line(f"cm-{rv + 1}", rv + 1)))
                rv += 2
            elif rv % 7 == 0:
                data = line(f"cm-{rv}", rv)
                writer.write(chunk(data[:20]))
                await writer.drain()
                await asyncio.sleep(0.005)
                writer.write(chunk(data[20:]))
                rv += 1
            else:
                writer.write(chunk(line(f"cm-{rv}", rv)))
                rv += 1
            await writer.drain()
            await asyncio.sleep(0.005)
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async with RawServer() as raw:
        raw.watch_routes[CMS] = handler
        async with wk.Client(wk.ClientConfig(server=raw.url)) as client:
            api = client.api("configmaps", namespace="default")
            got: list[str] = []
            async with api.watch(resource_version="1", lazy=True) as stream:
                async for ev in stream:
                    got.append(ev.resource_version)
    assert got == [str(rv) for rv in range(1, count + 1)]


@pytest.mark.parametrize("size", [1 << 16, 4096])
async def test_handed_lines_respect_the_consumers_size(size: int) -> None:
    proto = await streaming()
    big = line("x" * 5000, 2)
    fut = wait_for_lines(proto, size)
    feed(proto, chunk(big))
    assert fut.result() == (big if len(big) <= size else None)
    if len(big) > size:
        assert proto.take(size) == big  # one line over the piece size still comes whole
