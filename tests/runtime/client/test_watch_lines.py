"""Watch lines cannot be turned against the client: long lines cost linear time, a line has
a size cap (``Client(max_event_bytes=...)``) and must complete within the idle timeout.

Driven through ``Api.watch`` and ``wk.watcher`` against a raw server on 127.0.0.1 that sends
the exact bytes, so they hold whatever reads the stream underneath.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

import watchkeeper as wk
from watchkeeper.client.api import DEFAULT_MAX_EVENT_BYTES

from .rawserver import RawServer, Request, chunk, head, respond, stream

CMS = "/api/v1/namespaces/default/configmaps"


def event(name: str, rv: str, payload: str = "v") -> bytes:
    return (f'{{"type":"ADDED","object":{{"apiVersion":"v1","kind":"ConfigMap","metadata":'
            f'{{"name":"{name}","namespace":"default","resourceVersion":"{rv}"}},'
            f'"data":{{"k":"{payload}"}}}}}}\n').encode()


@pytest.fixture
async def raw() -> AsyncIterator[RawServer]:
    async with RawServer() as srv:
        srv.routes[CMS] = respond(200, b'{"kind":"ConfigMapList","metadata":{"resourceVersion":'
                                       b'"1"},"items":[]}')
        yield srv


async def _first_error(api: wk.Api, config: wk.WatchConfig) -> wk.ApiError:
    async for ev in wk.watcher(api, config, backoff=wk.ConstantBackoff(0.01)):
        if isinstance(ev, wk.WatchError):
            return ev.error
    raise AssertionError("the watcher ended")


async def first_error(api: wk.Api, config: wk.WatchConfig) -> wk.ApiError:
    return await asyncio.wait_for(_first_error(api, config), 20)


async def next_apply(api: wk.Api, config: wk.WatchConfig) -> wk.Apply:
    async for ev in wk.watcher(api, config, backoff=wk.ConstantBackoff(0.01)):
        assert not isinstance(ev, wk.WatchError), ev
        if isinstance(ev, wk.Apply):
            return ev
    raise AssertionError("the watcher ended")


CONFIG = wk.WatchConfig(max_unhealthy=None, server_timeout=30, idle_timeout=5)


def test_default_cap_is_well_above_what_etcd_stores() -> None:
    assert DEFAULT_MAX_EVENT_BYTES == 16 * 1024 * 1024 > 4 * int(1.5 * 1024 * 1024)
    with pytest.raises(ValueError, match="max_event_bytes"):
        wk.Client(wk.ClientConfig(server="http://127.0.0.1:1"), max_event_bytes=0)


@pytest.mark.parametrize("lazy", [False, True])
async def test_line_over_the_cap_is_invalid_response_and_the_watcher_retries(
    raw: RawServer, lazy: bool
) -> None:
    config = wk.WatchConfig(max_unhealthy=None, server_timeout=30, idle_timeout=5,
                            lazy_decode=lazy)
    async with wk.Client(wk.ClientConfig(server=raw.url), max_event_bytes=10_000) as client:
        api = client.api("configmaps", namespace="default")
        fits = event("fits", "2", "x" * 9_000)
        assert len(fits) < 10_000
        raw.watch_routes[CMS] = stream(fits[:5000], fits[5000:], then_hang=True)
        assert (await next_apply(api, config)).name == "fits"
        raw.watch_routes[CMS] = stream(event("big", "3", "x" * 50_000))  # in one chunk
        err = await first_error(api, config)
        assert isinstance(err, wk.InvalidResponse) and err.is_transient
        assert "longer than 10000 bytes" in str(err) and "max_event_bytes" in str(err)
        big = event("big", "3", "x" * 50_000)
        raw.watch_routes[CMS] = stream(*(big[i:i + 4096] for i in range(0, len(big), 4096)))
        err = await first_error(api, config)
        assert isinstance(err, wk.InvalidResponse) and "longer than 10000" in str(err)
        raw.watch_routes[CMS] = stream(event("ok", "4"), then_hang=True)
        assert (await next_apply(api, config)).name == "ok"  # and it goes on


async def test_endless_line_is_cut_at_the_cap_and_memory_stays_bounded(raw: RawServer) -> None:
    sent = 0

    async def endless(_req: Request, w: asyncio.StreamWriter) -> None:
        nonlocal sent
        w.write(head(200, chunked=True) + chunk(b'{"type":"ADDED","object":{"data":"'))
        piece = chunk(b"x" * 16_384)
        while True:
            w.write(piece)
            await w.drain()
            sent += 16_384

    raw.watch_routes[CMS] = endless
    async with wk.Client(wk.ClientConfig(server=raw.url), max_event_bytes=1_000_000) as client:
        err = await first_error(client.api("configmaps", namespace="default"), CONFIG)
    assert isinstance(err, wk.InvalidResponse) and "longer than 1000000 bytes" in str(err)
    # Read up to the cap, then dropped. ``sent`` also counts what sits in both kernels'
    # socket buffers, which autotune (tcp_rmem allows 32 MiB here) with the reader's pace.
    assert sent < 12_000_000


async def test_trickled_line_times_out_within_the_idle_timeout(raw: RawServer) -> None:
    """One byte every 50 ms keeps a socket busy but never completes an event: the idle
    timeout (0.6 s) also bounds how long one event may take."""

    async def trickle(_req: Request, w: asyncio.StreamWriter) -> None:
        w.write(head(200, chunked=True) + chunk(b'{"type":"ADDED","object":{"data":"'))
        while True:
            w.write(chunk(b"x"))
            await w.drain()
            await asyncio.sleep(0.05)

    raw.watch_routes[CMS] = trickle
    config = wk.WatchConfig(max_unhealthy=None, server_timeout=30, idle_timeout=0.6)
    async with wk.Client(wk.ClientConfig(server=raw.url)) as client:
        api = client.api("configmaps", namespace="default")
        started = time.monotonic()
        err = await first_error(api, config)
        took = time.monotonic() - started
    assert isinstance(err, wk.Timeout) and err.is_transient, err
    assert "did not complete within 0.6 s" in str(err)
    assert 0.5 < took < 3.0, took


@pytest.mark.looptime
async def test_a_silent_stream_times_out_on_the_loops_own_clock(raw: RawServer) -> None:
    """The stream notes when bytes last came on the loop's clock: on a virtual one
    (looptime), 300 s of silence end the watch after 300 s of that clock, at once in real
    time (the receive time read from time.monotonic, as asyncio's own loop does, would never
    reach the virtual deadline)."""
    raw.watch_routes[CMS] = stream(event("a", "2"), then_hang=True)
    config = wk.WatchConfig(max_unhealthy=None, server_timeout=600, idle_timeout=300)
    loop = asyncio.get_running_loop()
    async with wk.Client(wk.ClientConfig(server=raw.url)) as client:
        api = client.api("configmaps", namespace="default")
        started, real = loop.time(), time.monotonic()
        err = await asyncio.wait_for(_first_error(api, config), 400)
        took, took_real = loop.time() - started, time.monotonic() - real
    assert isinstance(err, wk.Timeout) and "silent for 300 s" in str(err), err
    assert 300 <= took < 310, took
    assert took_real < 10, took_real


async def test_slow_but_complete_lines_are_fine(raw: RawServer) -> None:
    """Pieces of one event spread over less than the idle timeout, and complete events
    spaced by more than half of it, are all delivered: only an unfinished line is timed."""
    one = event("slow", "2", "y" * 3000)
    raw.watch_routes[CMS] = stream(*(one[i:i + 500] for i in range(0, len(one), 500)),
                                   event("a", "3"), event("b", "4"), pause=0.05,
                                   then_hang=True)
    config = wk.WatchConfig(max_unhealthy=None, server_timeout=30, idle_timeout=1.0)
    got: list[str] = []
    async with wk.Client(wk.ClientConfig(server=raw.url)) as client:
        async for ev in wk.watcher(client.api("configmaps", namespace="default"), config,
                                   backoff=wk.ConstantBackoff(0.01)):
            assert not isinstance(ev, wk.WatchError), ev
            if isinstance(ev, wk.Apply):
                got.append(ev.name)
                if len(got) == 3:
                    break
    assert got == ["slow", "a", "b"]


async def test_a_long_line_costs_linear_time(raw: RawServer) -> None:
    """A 48 MB event in 16 KiB pieces: with ``buf + chunk`` per read this took ~4 CPU-s
    (quadratic); joined once it is well under one."""
    size = 48_000_000
    body = event("big", "2", "z" * (size - 200))

    async def big(_req: Request, w: asyncio.StreamWriter) -> None:
        w.write(head(200, chunked=True))
        view = memoryview(body)
        for i in range(0, len(body), 16_384):
            w.write(chunk(bytes(view[i:i + 16_384])))
            await w.drain()
        await asyncio.Event().wait()

    raw.watch_routes[CMS] = big
    async with wk.Client(wk.ClientConfig(server=raw.url), max_event_bytes=64_000_000) as client:
        api = client.api("configmaps", namespace="default")
        cpu = time.process_time()
        async with api.watch(resource_version="1", read_timeout=60) as events:
            async for ev in events:
                obj: Any = ev.object
                assert len(obj["data"]["k"]) == size - 200
                break
        cpu = time.process_time() - cpu  # the server's writes included
    assert cpu < 1.5, f"{cpu:.2f} CPU-seconds for one {size / 1e6:.0f} MB line"
