"""``Api.list_all``'s pager: the next page is requested as soon as a page's body is in,
before that page is decoded, so the server's work on page N+1 overlaps ours on page N.

The continue token is read from the body's head (kube-apiserver writes ``metadata`` before
``items``); the decoded metadata is checked against it, and a page whose head did not show
the token is followed sequentially, so a server that orders keys otherwise costs only the
overlap. Same requests, same order, same count as the sequential pager.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from watchkeeper.client.errors import InvalidResponse, NotFound
from watchkeeper.client.objects import ListShape, ObjectList, _decode_large, _object_list
from watchkeeper.supervisor import start_task

if TYPE_CHECKING:
    from watchkeeper.client.transport import Transport

_CONTINUE = re.compile(rb'"continue":"([A-Za-z0-9+/=_.-]*)"')


def peek_continue(body: bytes) -> str | None:
    """The continue token in the list's metadata, if the head shows it."""
    end = body.find(b'"items"')
    match = _CONTINUE.search(body, 0, end if end >= 0 else min(len(body), 4096))
    return match.group(1).decode() if match and match.group(1) else None


async def list_pages(
    transport: Transport,
    path: str,
    params: dict[str, str],
    resource_version: str | None,
    type_missing: Callable[[NotFound], None],
    shape: ListShape,
) -> ObjectList:
    """All pages of the list at ``path``; ``type_missing`` hears of a 404 (``Api``'s
    discovery cache forgets the type). Every page must be a list of ``shape``: one that is
    not fails the whole list (nothing of the pages before it is returned). Given the pieces
    it needs rather than the ``Api``, so that ``api`` imports this module and not the other
    way round."""

    async def fetch(token: str | None) -> bytes:
        query = dict(params)
        if token:
            query["continue"] = token
        elif resource_version is not None:
            query["resourceVersion"] = resource_version
        try:
            resp = await transport.request("GET", path, params=query)
        except NotFound as exc:
            type_missing(exc)
            raise
        return resp.body

    def prefetch(token: str) -> asyncio.Task[bytes]:
        # Awaited or cancelled before this call returns; started through the supervisor's
        # start_task so that even an abandoned one cannot fail unseen.
        return start_task(fetch(token or None), name=f"LIST {path} page", awaited=True)

    items: list[dict[str, Any]] = []
    first: ObjectList | None = None
    ahead: asyncio.Task[bytes] | None = prefetch("")
    try:
        while ahead is not None:
            body = await ahead
            token = peek_continue(body)
            ahead = prefetch(token) if token else None
            if ahead is not None:
                await asyncio.sleep(0)  # let it send its request before we decode
            try:
                data = _decode_large(body)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                said = transport.redactor.scrub(str(exc))
                raise InvalidResponse(f"undecodable response body ({said})", method="GET",
                                      path=path) from None
            try:
                page = _object_list(data, path, shape)  # a malformed page is InvalidResponse
            except InvalidResponse as exc:  # it quotes what the server said: scrubbed
                raise transport.redactor.error(exc) from None
            real = page.continue_token
            if real != token:  # the head did not show it (or showed another): follow it
                if ahead is not None:
                    ahead.cancel()
                    await asyncio.gather(ahead, return_exceptions=True)
                ahead = prefetch(real) if real else None
            items.extend(page.items)
            if first is None:
                first = page
    finally:
        if ahead is not None and not ahead.done():
            ahead.cancel()
            await asyncio.gather(ahead, return_exceptions=True)
    assert first is not None
    return ObjectList(items, first.resource_version, None, None, first.raw_metadata)
