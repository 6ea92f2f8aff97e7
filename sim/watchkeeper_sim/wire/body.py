"""How a finished JSON body goes on the wire: pretty printing and chunking.

kube-apiserver indents negotiated JSON for curl, Wget and browsers (or ``?pretty=true``) and
sends compact JSON plus a newline to everyone else (files 124, 127, 128, 129); ``/version``
is always indented (001). Go's net/http sends a body of up to 2048 bytes with
Content-Length and a longer one chunked (003, 004, 014, 015). The OpenAPI documents are
served by http.ServeContent: compact, always with Content-Length (018, 019).
"""

from __future__ import annotations

import json

from aiohttp import web

CHUNKING_THRESHOLD = 2048  # net/http bufferBeforeChunkingSize
_PRETTY_AGENTS = ("curl", "Wget", "Mozilla/5.0")
_GO_TRUE = ("1", "t", "T", "TRUE", "true", "True")


def wants_pretty(request: web.Request) -> bool:
    """apiserver isPrettyPrint: a non-empty ``pretty`` query wins, else the User-Agent."""
    value = request.query.get("pretty", "")
    if value:
        return value in _GO_TRUE
    return request.headers.get("User-Agent", "").startswith(_PRETTY_AGENTS)


def _is_json(resp: web.Response) -> bool:
    return resp.content_type == "application/json"


def _plain_body(request: web.Request, resp: web.StreamResponse) -> bytes | None:
    if not isinstance(resp, web.Response) or not isinstance(resp.body, bytes) \
            or request.path.startswith("/openapi/"):
        return None
    return resp.body


def prettify(request: web.Request, resp: web.StreamResponse) -> None:
    """Indent a JSON body when the client asked for it (by agent or query); streams
    (watches) and OpenAPI documents are left alone."""
    body = _plain_body(request, resp)
    if body and isinstance(resp, web.Response) and _is_json(resp) \
            and (request.path == "/version" or wants_pretty(request)):
        resp.body = json.dumps(json.loads(body), indent=2, ensure_ascii=False).encode()


def chunk(request: web.Request, resp: web.StreamResponse) -> None:
    """Chunk a body over 2048 bytes as net/http does; a gzip'd body keeps its length (022)."""
    body = _plain_body(request, resp)
    if body is not None and len(body) > CHUNKING_THRESHOLD and request.version >= (1, 1) \
            and "Content-Encoding" not in resp.headers and resp.status not in (204, 304) \
            and request.method != "HEAD":
        resp.enable_chunked_encoding()


class ChunkBuffer:
    """What Go's net/http puts between a streaming handler and the wire: a 2,048-byte buffer
    (``bufio.Writer`` over the chunk writer) that goes out as one HTTP chunk each time it
    fills or the handler flushes. kube-apiserver's watch handler writes each event in one
    write and flushes only when no further event is queued, so a watch that is behind
    arrives in 2,048-byte chunks and one that keeps up in one chunk per event. A write
    larger than the buffer, made while the buffer is empty, goes out whole as one chunk
    (bufio writes it directly)."""

    __slots__ = ("_held", "size")

    def __init__(self, size: int = CHUNKING_THRESHOLD) -> None:
        self.size = size
        self._held = bytearray()

    def write(self, data: bytes) -> list[bytes]:
        """The chunks that must go out now, in order; the rest stays buffered."""
        out: list[bytes] = []
        held, size = self._held, self.size
        while len(data) > size - len(held):
            if not held:
                out.append(data)
                return out
            room = size - len(held)
            held += data[:room]
            out.append(bytes(held))
            held.clear()
            data = data[room:]
        held += data
        return out

    def flush(self) -> bytes:
        """What is buffered (b"" if nothing), as the chunk a flush sends."""
        data = bytes(self._held)
        self._held.clear()
        return data
