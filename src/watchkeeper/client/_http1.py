"""The receiving half of one HTTP/1.1 response, for the watch stream: an asyncio
``BufferedProtocol`` that reads into one preallocated buffer and undoes the body framing
(chunked, Content-Length or close-delimited) in place, so the decoder above sees the body
as one contiguous run of bytes and no read allocates.

Buffer layout, all offsets into ``buf`` (``r <= b <= p <= w``)::

    [ consumed | r: body not yet taken | b: raw bytes not yet de-framed (p..w) | w: free ]

De-framing only ever moves bytes towards the front (a chunk header is dropped and the
payload slides over it), so it works in place. The consumer takes whole lines from
``[r, b)``; reading pauses while more than ``HIGH_WATER`` bytes of complete body wait for a
slow consumer, so memory stays bounded whatever the server sends.
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

from multidict import CIMultiDict

from watchkeeper.client._fast import speedups

BUFFER_SIZE = 2 << 20  # preallocated per open watch
MIN_FREE = 64 << 10  # compact or grow below this much free space
HIGH_WATER = 1 << 20  # unconsumed body bytes (complete lines) that pause reading
LOW_WATER = 256 << 10  # ... and resume it
MAX_HEAD = 64 << 10  # status line + headers
MAX_CHUNK_HEADER = 4096
MAX_INTERIM = 5  # 1xx responses skipped before a real one (Go's net/http: max1xxResponses)

_IDLE, _HEAD, _CHUNKED, _LENGTH, _CLOSE, _DONE = range(6)
# The end of one chunk and the header of the next, in the plain form every server sends
# (no extension); anything else takes the general path in ``_chunks``.
_NEXT_CHUNK = re.compile(rb"\r\n([0-9A-Fa-f]{1,8})\r\n")
# A size line (RFC 9112 7.1: hex digits, then optional whitespace and extensions).
_SIZE_LINE = re.compile(rb"([0-9A-Fa-f]{1,16})[ \t]*(?:;[^\r\n]*)?")
_STATUS = re.compile(r"[0-9]{3}")
_LENGTH_VALUE = re.compile(r"[0-9]{1,18}")  # RFC 9112 8.6: 1*DIGIT (int() takes "-1", "+1")


class FramingError(Exception):
    """The bytes are not a well-formed HTTP/1.1 response. Its text never holds what the
    server sent: a line it would quote is kept apart in ``quoted``, for the stream to quote
    through the client's ``Redactor`` (a server may echo the Authorization header)."""

    def __init__(self, *args: object, quoted: str = "") -> None:
        super().__init__(*args)
        self.quoted = quoted


class Head:
    """Status and headers of the response."""

    __slots__ = ("headers", "reason", "status", "version")

    def __init__(self, version: str, status: int, reason: str, headers: CIMultiDict[str]) -> None:
        self.version, self.status, self.reason, self.headers = version, status, reason, headers


def parse_head(data: bytes) -> Head:
    """Status line and header fields (without the blank line that ends them)."""
    try:
        text = data.decode("latin-1")
    except UnicodeDecodeError as exc:  # pragma: no cover - latin-1 decodes every byte
        raise FramingError("undecodable response head") from exc
    lines = text.split("\r\n")
    parts = lines[0].split(" ", 2)
    # RFC 9112: the status code is exactly three ASCII digits. str.isdigit() alone also
    # takes "²" (latin-1 0xB2) and 5,000 digits, on which int() raises ValueError.
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not _STATUS.fullmatch(parts[1]):
        raise FramingError("not an HTTP/1.x status line", quoted=lines[0])
    headers: CIMultiDict[str] = CIMultiDict()
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise FramingError("malformed header line", quoted=line)
        headers.add(name, value.strip(" \t"))
    return Head(parts[0], int(parts[1]), parts[2] if len(parts) > 2 else "", headers)


def whole_chunks_py(buf: bytearray, p: int, b: int, w: int, head: bytes, size: int,
                    ) -> tuple[int, int, bytes, int]:
    """``ResponseProtocol._whole_chunks``'s loop, in Python (``_speedups.whole_chunks`` is
    the same in C): from ``p``, at the CRLF that ended the last chunk, each chunk that came
    whole before ``w`` is moved to ``b``; its header is the last one seen (``head`` of
    ``size``) or CRLF, 1-8 hex digits, CRLF. Returns the new ``p``, ``b``, and the last
    header seen with its size."""
    same, match = buf.startswith, _NEXT_CHUNK.match
    with memoryview(buf) as mv:
        while w - p > 2:  # more than the CRLF of the read's last chunk
            if same(head, p, w):
                start = p + len(head)
            elif (m := match(buf, p, w)) is not None:
                head, start, size = m[0], m.end(), int(m[1], 16)
            else:
                break
            end = start + size
            if end > w or not size:
                break
            mv[b:b + size] = mv[start:end]
            b += size
            p = end
    return p, b, head, size


_take_whole_chunks = speedups.whole_chunks if speedups is not None else whole_chunks_py


def hand_chunks_py(buf: bytearray, p: int, b: int, w: int, head: bytes, size: int, r: int,
                   hand: int) -> tuple[bytes | None, int, int, bytes, int]:
    """``whole_chunks_py``, then, when ``hand`` (the consumer waits for up to that many bytes
    of lines) and the read ended exactly with its last chunk's CRLF, and the body from ``r``
    is whole lines of at most ``hand`` bytes: those lines, with the CRLF moved to the front
    of ``buf`` and ``p`` and ``b`` at 0 (``_speedups.hand_chunks`` in C)."""
    p, b, head, size = _take_whole_chunks(buf, p, b, w, head, size)
    if hand and r < b <= r + hand and buf[b - 1] == 10 and w - p == 2 and \
            buf[p] == 13 and buf[p + 1] == 10:
        data = bytes(buf[r:b])
        buf[:2] = b"\r\n"
        return data, 0, 0, head, size
    return None, p, b, head, size


_hand_chunks = speedups.hand_chunks if speedups is not None else hand_chunks_py
_ASYNCIO_TIME = asyncio.BaseEventLoop.time


class ResponseProtocol(asyncio.BufferedProtocol):
    """Receives one response; ``take_lines``/``wait`` are the consumer's side."""

    def __init__(self, max_line: int, buffer_size: int = BUFFER_SIZE) -> None:
        self.max_line = max_line
        self._size0 = buffer_size
        self.buf = bytearray(buffer_size)
        self.mv = memoryview(self.buf)
        self._front: memoryview | None = None  # get_buffer's view after the CRLF at the front
        self.r = self.b = self.p = self.w = 0
        self._scan = 0  # no newline in [r, _scan): a long line is searched only once
        self._state = _IDLE
        self._remaining = 0  # bytes left in the current chunk / Content-Length body
        self._crlf = False  # a chunk's payload ended; its CRLF is still due
        self._next_head, self._next_size = b"\r\n800\r\n", 0x800  # see _whole_chunks
        self.head: Head | None = None
        self.head_ready: asyncio.Future[Head] | None = None
        self.transport: asyncio.Transport | None = None
        self.error: BaseException | None = None  # the connection's failure, once known
        self.eof = False  # the body ended cleanly
        self.closed = False
        self.paused = False
        # While the consumer awaits ``_waiter`` for lines of up to this many bytes (0: it
        # awaits anything), a read that completes them hands them over in the future.
        self.hand = 0
        self._waiter: asyncio.Future[bytes | None] | None = None
        self.last_rx = 0.0
        self._loop = asyncio.get_event_loop()
        # asyncio's own loop reads time.monotonic(): called directly, a Python frame fewer
        # per read (uvloop's ``time`` is C already, and any other loop keeps its own).
        loop_time = self._loop.time
        self._time = (time.monotonic if getattr(loop_time, "__func__", None) is _ASYNCIO_TIME
                      else loop_time)
        self.interim = 0  # 1xx responses skipped

    # -- asyncio callbacks -----------------------------------------------------------------

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self._state = _HEAD
        self.head_ready = self._loop.create_future()
        self.last_rx = self._loop.time()

    def get_buffer(self, sizehint: int) -> memoryview:
        if self.w == 2 and self.r == 0:
            # A watch that keeps up reads after the CRLF left at the front every time: the
            # same view (kept until the buffer is replaced).
            front = self._front
            if front is None:
                front = self._front = self._view()
            return front
        return self._view()

    def _view(self) -> memoryview:
        if len(self.buf) - self.w < MIN_FREE:
            self._compact()
            if len(self.buf) - self.w < MIN_FREE:
                self._grow()
        # Never read much past the line cap: a line over it is failed at the next wake-up.
        room = self.max_line + MIN_FREE - (self.w - self.r)
        if room < len(self.buf) - self.w:
            return self.mv[self.w:self.w + max(room, 4096)]
        return self.mv[self.w:]

    def buffer_updated(self, nbytes: int) -> None:
        w = self.w = self.w + nbytes
        self.last_rx = self._time()
        try:
            if self._state != _CHUNKED:
                self._deframe()
            elif not self._crlf or self._remaining:
                self._chunks()
            else:
                # A watch that keeps up: the last read ended with its chunk's CRLF, and
                # this one is whole chunks. Taken here; the general loop only for what
                # ``_whole_chunks`` leaves but the CRLF of the read's last chunk.
                buf, fut = self.buf, self._waiter
                # A consumer waiting for lines (``hand``) may be handed those of this read.
                hand = self.hand if fut is not None and len(buf) == self._size0 and \
                    not fut.done() else 0
                data, p, b, self._next_head, self._next_size = _hand_chunks(
                    buf, self.p, self.b, w, self._next_head, self._next_size, self.r, hand)
                if data is not None:
                    # The body from ``r`` is whole lines, at most ``hand`` bytes: handed over
                    # in the future; the buffer is back at its front (the CRLF moved there).
                    self._scan = self.r = self.b = self.p = 0
                    self.w = 2
                    self._waiter = None
                    fut.set_result(data)  # type: ignore[union-attr]
                    return
                self.p, self.b = p, b
                if w - p != 2 or buf[p] != 13 or buf[p + 1] != 10:
                    self._chunks()
        except FramingError as exc:
            self.fail(exc)
            return
        pending = self.b - self.r
        if (pending > HIGH_WATER or pending > self.max_line) and not self.paused and \
                self.transport is not None and (
                    pending > self.max_line if self._no_newline() else pending > HIGH_WATER):
            # Complete lines over the high-water mark pause reading even while the consumer
            # waits: uvloop reads up to 32 times per loop turn before the woken consumer
            # runs (the buffer grew to 8-16 MiB). One line still arriving is read on up to
            # the line cap, where the consumer fails it.
            self.paused = True
            self.transport.pause_reading()
        fut = self._waiter
        if fut is not None:
            self._waiter = None
            if not fut.done():
                fut.set_result(None)

    def _no_newline(self) -> bool:
        start = max(self.r, self._scan)
        if self.buf.find(b"\n", start, self.b) >= 0:
            return False
        self._scan = self.b
        return True

    def eof_received(self) -> bool | None:
        self._end_of_input()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._end_of_input(exc)
        self._wake()

    # -- framing ------------------------------------------------------------------------------

    def _end_of_input(self, exc: BaseException | None = None) -> None:
        if self._state == _CLOSE:
            self.b = self.p = self.w
            self._state = _DONE
            self.eof = True
        elif self._state != _DONE and self.error is None:
            self.error = FramingError("closed", exc) if exc is not None else FramingError("closed")
            if self.head_ready is not None and not self.head_ready.done():
                self.head_ready.set_exception(self.error)
        self._wake()

    def _deframe(self) -> None:
        while True:
            state = self._state
            if state == _CHUNKED:
                if not self._chunks():
                    return
            elif state == _LENGTH:
                n = min(self._remaining, self.w - self.p)
                self._move(n)
                self._remaining -= n
                if self._remaining == 0:
                    self._finish()
                return
            elif state == _CLOSE:
                self._move(self.w - self.p)
                return
            elif state == _HEAD:
                if not self._head():
                    return
            else:  # _DONE: trailing bytes after the body are ignored (we close anyway)
                return

    def _move(self, n: int) -> None:
        """Append ``n`` raw bytes at ``p`` to the body (a memmove when framing was dropped)."""
        p, b = self.p, self.b
        if p != b:
            self.mv[b:b + n] = self.mv[p:p + n]
        self.b, self.p = b + n, p + n

    def _chunks(self) -> bool:
        """De-chunk what has arrived; False when more bytes are needed."""
        buf, w = self.buf, self.w
        while True:
            if self._remaining:
                n = min(self._remaining, w - self.p)
                self._move(n)
                self._remaining -= n
                if self._remaining:
                    return False
                self._crlf = True
            if self._crlf:
                self._whole_chunks()
            p = self.p
            if self._crlf:
                if w - p < 2:
                    return False
                if buf[p:p + 2] != b"\r\n":
                    raise FramingError("chunk not followed by CRLF")
                if w - p == 2:
                    # Left for the next read: its chunks, header and all, are then taken
                    # by ``_whole_chunks`` (a watch that keeps up gets a chunk per read).
                    return False
                p = self.p = p + 2
                self._crlf = False
            eol = buf.find(b"\r\n", p, w)
            # However the bytes were split into reads: the line without its CRLF (of which a
            # CR may have come) is measured.
            if (eol if eol >= 0 else w - 1) - p > MAX_CHUNK_HEADER:
                raise FramingError("chunk header too long")
            if eol < 0:
                return False
            line = _SIZE_LINE.fullmatch(buf, p, eol)
            if line is None:  # int() alone would take "+8", " 8" or "8_00"
                raise FramingError("bad chunk size")
            size = int(line[1], 16)
            if size == 0:  # the last chunk; trailers (if any) end with an empty line
                if w - eol < 4:  # not all here: never look past w (stale bytes of earlier reads)
                    return False
                end = buf.find(b"\r\n\r\n", eol, w) if buf[eol + 2:eol + 4] != b"\r\n" else eol
                if (end if end >= 0 else w - 3) - eol > MAX_HEAD:
                    # endless trailers would grow the buffer (nothing pauses reading then)
                    raise FramingError("trailer section too long")
                if end < 0:
                    return False
                self.p = self.w = self.b  # nothing after the body matters
                self._finish()
                return False
            self.p = eol + 2
            self._remaining = size
            if self.p == w:
                return False

    def _whole_chunks(self) -> None:
        """Take the chunks that arrived whole, back to back, at a few C calls each.

        A kube-apiserver sends a watch in chunks of 2,048 bytes (Go's net/http response
        buffer, while events queue up) or one per event, so this runs once per event or
        two; through the general loop a chunk cost about 1.1 µs of Python, here ~0.35
        (benchmarks/chunk_framing.py). The last header seen is tried first (a run of
        2,048-byte chunks repeats it), then the pattern.
        Stops, with ``p`` at the CRLF that ends the last chunk taken, before anything it
        does not take whole (a partial chunk, the last chunk, an extension, a malformed
        header): the general loop deals with that."""
        self.p, self.b, self._next_head, self._next_size = _take_whole_chunks(
            self.buf, self.p, self.b, self.w, self._next_head, self._next_size)

    def _head(self) -> bool:
        end = self.buf.find(b"\r\n\r\n", self.p, self.w)
        # However the bytes were split into reads: the head without its blank line (of which
        # three bytes may have come) is measured.
        if (end if end >= 0 else self.w - 3) - self.p > MAX_HEAD:
            raise FramingError("response head too long")
        if end < 0:
            return False
        head = parse_head(bytes(self.mv[self.p:end]))
        start = end + 4
        self.r = self.b = self.p = self._scan = start
        if 100 <= head.status < 200 and head.status != 101:
            # An interim response (100 Continue, 103 Early Hints): skipped, as RFC 9110
            # asks, and as Go's client and aiohttp (our other verbs) do, up to Go's limit.
            # 101 Switching Protocols ends the HTTP response: the stream refuses it.
            self.interim += 1
            if self.interim > MAX_INTERIM:
                raise FramingError(f"more than {MAX_INTERIM} informational (1xx) responses")
            return True
        self.head = head
        h = head.headers
        te = h.get("Transfer-Encoding", "").lower()
        if "chunked" in te:
            self._state = _CHUNKED
        elif "Content-Length" in h:
            lengths = set(h.getall("Content-Length"))
            length = lengths.pop()
            if lengths or not _LENGTH_VALUE.fullmatch(length):
                raise FramingError("bad Content-Length")  # a negative one moved b below r
            self._remaining = int(length)
            self._state = _LENGTH
            if self._remaining == 0:
                self._finish()
        elif head.status in (204, 304):
            self._finish()
        else:
            self._state = _CLOSE
        if self.head_ready is not None and not self.head_ready.done():
            self.head_ready.set_result(head)
        return True

    def _finish(self) -> None:
        self._state = _DONE
        self.eof = True
        self._wake()

    # -- memory -------------------------------------------------------------------------------

    def _compact(self) -> None:
        r = self.r
        if r == 0:
            return
        w = self.w
        if w > r:
            self.mv[0:w - r] = self.mv[r:w]
        self.r, self.b, self.p, self.w = 0, self.b - r, self.p - r, w - r
        self._scan -= r

    def _grow(self) -> None:
        """Only for a line longer than the buffer (up to ``max_line``) or reads that came
        while pausing took effect; shrinks back once the consumer has taken it all."""
        size = len(self.buf)
        limit = self.max_line + self._size0 + MIN_FREE
        new = max(size * 2, self.w + MIN_FREE)
        if new > limit:  # past it only by what a read brings: the consumer fails the line
            new = max(limit, self.w + MIN_FREE)
        grown = bytearray(new)
        grown[:self.w] = self.mv[:self.w]
        self._front = None
        self.mv.release()
        self.buf, self.mv = grown, memoryview(grown)

    def reset_if_drained(self) -> None:
        """All the body consumed: start again at the front (and drop a grown buffer), with
        what is left of the framing (a chunk's CRLF left for the next read, a header cut by
        a read), so a watch that keeps up reads into the same few KiB every time."""
        r, p = self.r, self.p
        if r != self.b or (not p and len(self.buf) == self._size0):
            return
        w = self.w
        n = w - p
        if n > MAX_CHUNK_HEADER:  # framing bytes only ever come a few at a time
            return
        if len(self.buf) > self._size0:
            grown = self.mv
            self._front = None
            self.buf = bytearray(self._size0)
            self.mv = memoryview(self.buf)
            self.mv[:n] = grown[p:w]
            grown.release()
        elif n:
            self.mv[:n] = self.mv[p:w]
        self._scan = self.r = self.b = self.p = 0
        self.w = n

    # -- consumer side ------------------------------------------------------------------------

    def take(self, piece: int) -> bytes | None:
        """Whole lines from the body, about ``piece`` bytes, or None if none is complete."""
        self.hand = 0
        r, b = self.r, self.b
        if r == b:
            self.reset_if_drained()
            return None
        buf = self.buf
        end = r + piece
        if end >= b and buf[b - 1] == 10:
            # All of it, ending with a line (a watch that keeps up): taken without a search,
            # and the buffer is back at its front for the next read at once.
            mv = self.mv
            data = bytes(mv[r:b])
            if self.paused:
                self.resume()
            p, w = self.p, self.w
            n = w - p
            if n <= MAX_CHUNK_HEADER and len(buf) == self._size0:
                if n:  # framing left for the next read (the CRLF of a chunk)
                    mv[:n] = mv[p:w]
                self._scan = self.r = self.b = self.p = 0
                self.w = n
            else:
                self.r = self._scan = b
                self.reset_if_drained()
            return data
        if end < b:
            nl = buf.rfind(b"\n", r, end)
            if nl < 0:
                nl = buf.find(b"\n", max(end, self._scan), b)
        else:
            nl = buf.rfind(b"\n", max(r, self._scan), b)
        if nl < 0:
            self._scan = b
            return None
        data = bytes(self.mv[r:nl + 1])
        self.r = self._scan = nl + 1
        if self.paused and self.b - self.r < LOW_WATER:
            self.resume()
        return data

    def pending_line(self) -> int:
        """Bytes of a line that has begun but not ended."""
        return self.b - self.r

    def rest(self) -> bytes:
        """What is left of the body after the last newline."""
        return bytes(self.mv[self.r:self.b])

    def resume(self) -> None:
        if self.paused and self.transport is not None and not self.closed:
            self.paused = False
            self.transport.resume_reading()

    def waiter(self) -> asyncio.Future[None]:
        """A future done when more bytes, the end, or a failure arrive: the stream awaits
        it directly (no coroutine frame per read); ``take`` ends the wait."""
        if self.paused:
            self.resume()
        fut = self._waiter = self._loop.create_future()
        self.hand = 0
        return fut

    async def wait(self) -> None:
        """Until more bytes, the end, or a failure arrive."""
        try:
            await self.waiter()
        finally:
            self._waiter = None

    def _wake(self) -> None:
        fut = self._waiter
        if fut is not None and not fut.done():
            fut.set_result(None)

    def fail(self, exc: BaseException) -> None:
        """Record a failure (first one wins), drop the connection, wake the consumer."""
        if self.error is None:
            self.error = exc
        if self.head_ready is not None and not self.head_ready.done():
            self.head_ready.set_exception(exc)
        self.close()
        self._wake()

    def close(self) -> None:
        t = self.transport
        if t is not None and not self.closed:
            t.abort()
