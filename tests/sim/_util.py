"""Helpers for the simulator tests (raw HTTP, no watchkeeper.Client)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

from watchkeeper_sim import ApiServer


def auth(srv: ApiServer, user: str = "admin") -> dict[str, str]:
    return {"Authorization": f"Bearer {srv.token(user)}"}


def cm(name: str, ns: str = "default", labels: dict[str, str] | None = None,
       **data: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data or {"k": "v"}}


class Watch:
    """An open watch response; ``next()`` returns the next parsed line."""

    def __init__(self, resp: aiohttp.ClientResponse) -> None:
        self.resp = resp
        self.status = resp.status
        self.headers = resp.headers

    async def next(self, timeout: float = 3.0) -> dict[str, Any] | None:
        line = await asyncio.wait_for(self.resp.content.readline(), timeout)
        if not line:
            return None
        parsed: dict[str, Any] = json.loads(line)
        return parsed

    async def raw(self, timeout: float = 3.0) -> bytes:
        return await asyncio.wait_for(self.resp.content.readline(), timeout)

    async def rest(self, timeout: float = 5.0) -> list[dict[str, Any]]:
        """Every remaining line until the server ends the stream."""
        out = []
        while True:
            ev = await self.next(timeout)
            if ev is None:
                return out
            out.append(ev)

    async def until(self, type_: str, timeout: float = 3.0) -> dict[str, Any]:
        while True:
            ev = await self.next(timeout)
            assert ev is not None, f"stream ended before a {type_} event"
            if ev["type"] == type_:
                return ev

    def close(self) -> None:
        self.resp.close()


async def open_watch(session: aiohttp.ClientSession, srv: ApiServer, path: str,
                     user: str = "admin", accept: str | None = None, **params: Any) -> Watch:
    params.setdefault("watch", "1")
    q = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in params.items()}
    headers = auth(srv, user)
    if accept is not None:
        headers["Accept"] = accept
    resp = await session.get(srv.url + path, params=q, headers=headers)
    return Watch(resp)
