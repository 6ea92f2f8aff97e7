"""Serving one watch: chunked JSON lines, bookmarks, timeouts and stream faults.

The lines go out in the HTTP chunks kube-apiserver sends (``wire.body.ChunkBuffer``): full
2,048-byte chunks while events are queued, a flush once none is.

Bookmarks carry the store's resourceVersion at a moment when this watch's queue was drained
synchronously, so a bookmark never claims an event the client has not been sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web

from watchkeeper_sim.faults import Faults, RequestInfo
from watchkeeper_sim.model import JSON, ResourceType
from watchkeeper_sim.storage.registry import present
from watchkeeper_sim.storage.store import Subscription, WatchEvent
from watchkeeper_sim.wire import http as _http
from watchkeeper_sim.wire.body import ChunkBuffer
from watchkeeper_sim.wire.http import BASE_HEADERS, encode

INITIAL_EVENTS_END = "k8s.io/initial-events-end"


@dataclass
class WatchOptions:
    bookmarks: bool = False
    timeout: float | None = None  # seconds; None = until the client or the server ends it
    initial_events_end: bool = False  # send the k8s.io/initial-events-end bookmark
    bookmark_interval: float = 60.0
    bookmark_lead: float = 2.0  # one bookmark this long before the deadline (if timeout > it)
    initial_events_end_delay: float = 0.0  # the end-of-initial-events bookmark waits this long
    # turns each {"type", "object"} line into the negotiated representation (Table, ...)
    render: Callable[[JSON], JSON] | None = None
    # a stored object at the watch's version through a CRD conversion webhook; None drops
    # the event (one it cannot convert)
    convert: Callable[[JSON], Awaitable[JSON | None]] | None = None


@dataclass(eq=False)
class OpenWatch:
    """A watch being served, so the server can end or reset it."""

    request: web.Request
    sub: Subscription
    info: RequestInfo
    aborted: bool = False
    events_sent: int = 0
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def abort(self) -> None:
        """Reset the connection (no final chunk): what a crashed server looks like."""
        self.aborted = True
        transport = self.request.transport
        if transport is not None:
            transport.abort()
        self.sub.end()


def bookmark(rt: ResourceType, rv: int, initial_end: bool = False) -> JSON:
    meta: JSON = {"resourceVersion": str(rv), "creationTimestamp": None}
    if initial_end:
        meta["annotations"] = {INITIAL_EVENTS_END: "true"}
    return {"type": "BOOKMARK", "object": {"kind": rt.kind, "apiVersion": rt.group_version,
                                           "metadata": meta}}


class _Aborted(Exception):
    pass


class WatchStream:
    """Writes one watch response; ``run`` returns when the stream ends."""

    def __init__(
        self,
        request: web.Request,
        watch: OpenWatch,
        opts: WatchOptions,
        faults: Faults,
        stopping: asyncio.Event,
    ) -> None:
        self.request = request
        self.watch = watch
        self.sub = watch.sub
        self.rt = watch.sub.rt
        self.opts = opts
        self.faults = faults
        self.stopping = stopping
        self.resp = web.StreamResponse(
            status=200, headers={**BASE_HEADERS, "Content-Type": "application/json"}
        )
        self.resp.enable_chunked_encoding()
        self.chunks = ChunkBuffer()

    async def start(self) -> web.StreamResponse:
        """Send the headers at once (clients wait for them before reading events)."""
        await self.resp.prepare(self.request)
        record = self.request.get(_http.RECORD)
        if record is not None:
            record.status = 200
        return self.resp

    async def error_and_close(self, status: JSON) -> web.StreamResponse:
        await self.start()
        await self.resp.write(encode({"type": "ERROR", "object": status}))
        await self.resp.write_eof()
        return self.resp

    # ---- writing, with stream faults -------------------------------------------------------

    def _encode(self, line: JSON) -> bytes:
        render = self.opts.render
        return encode(line if render is None else render(line))

    async def _line(self, line: JSON) -> None:
        if not self.faults.any_active:  # the common case: no fault lookups per event
            await self._send(self._encode(line))
            return
        await self._flush()  # a fault's bytes go after everything sent before it
        await self._stall()
        if self.watch.aborted:
            raise _Aborted
        info = self.watch.info
        garbage = self.faults.take("garbage", info)
        if garbage is not None:
            data = garbage.data
            await self.resp.write(data if data.endswith(b"\n") else data + b"\n")
        payload = self._encode(line)
        if self.faults.take("truncate", info) is not None:
            await self.resp.write(payload[: max(1, len(payload) // 2)])
            await asyncio.sleep(0.01)  # let the half line leave before the reset
            self.watch.abort()
            raise _Aborted
        await self.resp.write(payload)
        self.watch.events_sent += 1
        self._maybe_reset()

    def _maybe_reset(self) -> None:
        f = self.faults.find("reset", self.watch.info)
        if f is not None and self.watch.events_sent >= f.after_events:
            self.faults.take("reset", self.watch.info)
            self.watch.abort()
            raise _Aborted

    async def _stall(self) -> None:
        while (self.faults.find("stall", self.watch.info) is not None
               and not self.watch.aborted and not self.stopping.is_set()):
            await self.faults.wait_change(0.2)

    def _event_line(self, ev: WatchEvent) -> JSON:
        return {"type": ev.type, "object": present(ev.object, self.rt)}

    async def _event(self, ev: WatchEvent) -> None:
        if self.opts.convert is not None and ev.type != "BOOKMARK":
            obj = await self.opts.convert(ev.object)
            if obj is not None:
                await self._line({"type": ev.type, "object": present(obj, self.rt)})
            return
        await self._line(self._event_line(ev))

    async def _replay(self, events: list[WatchEvent]) -> None:
        """Send a replay (or initial state): the events queue up, so they go out in full
        2,048-byte chunks (``ChunkBuffer``); the rest is flushed once nothing is queued."""
        for ev in events:
            await self._event(ev)

    async def _send(self, data: bytes) -> None:
        """One event line, through the response buffer as Go's net/http would send it."""
        if self.watch.aborted:
            raise _Aborted
        for chunk in self.chunks.write(data):
            await self.resp.write(chunk)
        self.watch.events_sent += 1

    async def _flush(self) -> None:
        """Send what the response buffer holds (the watch handler's ``Flush``)."""
        data = self.chunks.flush()
        if data:
            if self.watch.aborted:
                raise _Aborted
            await self.resp.write(data)

    async def _flush_if_idle(self) -> None:
        """kube-apiserver flushes only when no further event is queued for this watch."""
        if self.sub.queue.empty():
            await self._flush()

    # ---- the loop --------------------------------------------------------------------------

    async def run(self) -> web.StreamResponse:
        loop = asyncio.get_running_loop()
        start = loop.time()
        deadline = None if self.opts.timeout is None else start + self.opts.timeout
        lead_at: float | None = None
        if (deadline is not None and self.opts.bookmarks and self.opts.timeout
                and self.opts.timeout > self.opts.bookmark_lead):
            # the cacher's pre-timeout bookmark (deadline - 2 s) is skipped when that time has
            # already passed as the watch starts: none for timeoutSeconds <= 2 (files 066, 069)
            lead_at = deadline - self.opts.bookmark_lead
        next_bm = start + self.opts.bookmark_interval if self.opts.bookmarks else None
        try:
            await self.start()
            self._maybe_reset()
            await self._replay(self.sub.initial)
            end_at: float | None = None
            if self.opts.initial_events_end and self.opts.bookmarks:
                if self.opts.initial_events_end_delay > 0:
                    end_at = loop.time() + self.opts.initial_events_end_delay
                else:
                    await self._line(bookmark(self.rt, self.sub.start_rv, True))
            while not self.stopping.is_set():
                now = loop.time()
                wake = min(t for t in (deadline, next_bm, lead_at, end_at, now + 0.5)
                           if t is not None)
                transport = self.request.transport
                if transport is None or transport.is_closing():
                    break  # the client went away
                if deadline is not None and now >= deadline:
                    break
                if end_at is not None and now >= end_at:
                    end_at = None  # at the RV the live events sent so far reach (file 065)
                    if not await self._bookmark(initial_end=True):
                        break
                    continue
                if (next_bm is not None and now >= next_bm) or (lead_at is not None
                                                                 and now >= lead_at):
                    if lead_at is not None and now >= lead_at:
                        lead_at = None
                    if next_bm is not None and now >= next_bm:
                        next_bm = now + self.opts.bookmark_interval
                    if not await self._bookmark():
                        break
                    continue
                await self._flush_if_idle()  # the only place the stream waits for events
                try:
                    ev: WatchEvent | None = await asyncio.wait_for(
                        self.sub.queue.get(), max(0.001, wake - now)  # >0: no spin on virtual time
                    )
                except TimeoutError:
                    continue
                if ev is None:
                    break
                await self._event(ev)
            if not self.watch.aborted:
                await self._flush()
                await self.resp.write_eof()
        except (_Aborted, ConnectionError, RuntimeError):
            # RuntimeError: aiohttp refuses writes after the transport closed
            self._drop()
        except asyncio.CancelledError:
            self._drop()
            raise
        finally:
            self.sub.close()
            self.watch.done.set()
        return self.resp

    def _drop(self) -> None:
        if not self.watch.aborted:
            self.watch.aborted = True
            transport = self.request.transport
            if transport is not None:
                transport.abort()

    async def _bookmark(self, initial_end: bool = False) -> bool:
        """Flush queued events, then a bookmark at the RV they reach; False if the watch ended."""
        pending: list[WatchEvent | None] = []
        while not self.sub.queue.empty():
            pending.append(self.sub.queue.get_nowait())
        rv = self.sub.store.rv
        for ev in pending:
            if ev is None:
                return False
            await self._event(ev)
        await self._line(bookmark(self.rt, rv, initial_end))
        return True
