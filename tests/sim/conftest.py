"""Fixtures for the simulator's own tests: raw aiohttp sessions, not watchkeeper.Client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest

from watchkeeper_sim import ApiServer

Req = Callable[..., Awaitable[tuple[int, Any, aiohttp.typedefs.LooseHeaders]]]


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as s:
        yield s


@pytest.fixture
def req(apiserver: ApiServer, session: aiohttp.ClientSession) -> Req:
    """``await req("GET", "/api/v1/...", user="admin", json=..., headers=..., params=...)``
    -> (status, parsed body (JSON, else text), headers)."""

    async def call(method: str, path: str, user: str | None = "admin", **kw: Any) -> Any:
        headers = dict(kw.pop("headers", {}) or {})
        if user is not None:
            headers.setdefault("Authorization", f"Bearer {apiserver.token(user)}")
        async with session.request(method, apiserver.url + path, headers=headers, **kw) as r:
            text = await r.text()
            ctype = r.headers.get("Content-Type", "")
            body: Any = text
            if ctype.startswith("application/json") and text:
                import json

                body = json.loads(text)
            return r.status, body, r.headers

    return call
