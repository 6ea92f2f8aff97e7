"""A tiny raw HTTP/1.1 server on 127.0.0.1 that answers with exactly the bytes a test gives.

The simulator only says well-formed things; hostile or broken servers are modelled here:
each route is a coroutine that writes whatever it likes on the socket, so a test controls
every byte, including bodies no HTTP library would produce. One request per connection
(``Connection: close``), which keeps the parser trivial.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import TracebackType
from urllib.parse import parse_qs, urlsplit


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    @property
    def is_watch(self) -> bool:
        return self.query.get("watch") == "true"


Handler = Callable[[Request, asyncio.StreamWriter], Awaitable[None]]


def head(status: int, headers: dict[str, str] | None = None, *, length: int | None = None,
         chunked: bool = False) -> bytes:
    lines = [f"HTTP/1.1 {status} X", "Connection: close"]
    hdrs = {"Content-Type": "application/json", **(headers or {})}
    if length is not None:
        hdrs["Content-Length"] = str(length)
    if chunked:
        hdrs["Transfer-Encoding"] = "chunked"
    lines += [f"{k}: {v}" for k, v in hdrs.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def chunk(data: bytes) -> bytes:
    """One HTTP/1.1 chunk (empty ``data`` is the last chunk)."""
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def respond(status: int, body: bytes, headers: dict[str, str] | None = None) -> Handler:
    async def handler(_req: Request, w: asyncio.StreamWriter) -> None:
        w.write(head(status, headers, length=len(body)) + body)
        await w.drain()

    return handler


def stream(*pieces: bytes, then_hang: bool = False, pause: float = 0.0) -> Handler:
    """A chunked 200 response made of ``pieces`` (each one HTTP chunk), then the end of the
    body, or silence forever with ``then_hang``."""

    async def handler(_req: Request, w: asyncio.StreamWriter) -> None:
        w.write(head(200, chunked=True))
        for piece in pieces:
            w.write(chunk(piece))
            await w.drain()
            if pause:
                await asyncio.sleep(pause)
        if then_hang:
            await asyncio.Event().wait()
        w.write(chunk(b""))
        await w.drain()

    return handler


class RawServer:
    """``routes`` maps a path (no query) to a handler; for a path both listed and watched,
    ``watch_routes`` takes the watch requests. Unknown paths get a 404 Status."""

    def __init__(self) -> None:
        self.routes: dict[str, Handler] = {}
        self.watch_routes: dict[str, Handler] = {}
        self.requests: list[Request] = []
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def count(self, path: str, *, watch: bool | None = None) -> int:
        return sum(1 for r in self.requests
                   if r.path == path and (watch is None or r.is_watch == watch))

    async def __aenter__(self) -> RawServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            raw = await reader.readuntil(b"\r\n\r\n")
            first, *rest = raw.decode("latin-1").split("\r\n")
            method, target, _ = first.split(" ", 2)
            headers = {}
            for line in rest:
                if ":" in line:
                    k, v = line.split(":", 1)
                    headers[k.strip().lower()] = v.strip()
            body = b""
            if int(headers.get("content-length", "0") or 0):
                body = await reader.readexactly(int(headers["content-length"]))
            url = urlsplit(target)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            req = Request(method, url.path, query, headers, body)
            self.requests.append(req)
            handler = (self.watch_routes.get(url.path) if req.is_watch else None) or (
                self.routes.get(url.path) or _not_found
            )
            await handler(req, writer)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._tasks.discard(task)
            with contextlib.suppress(Exception):
                writer.close()


async def _not_found(_req: Request, w: asyncio.StreamWriter) -> None:
    body = (b'{"kind":"Status","apiVersion":"v1","status":"Failure","message":"not found",'
            b'"reason":"NotFound","code":404}')
    w.write(head(404, length=len(body)) + body)
    await w.drain()
