"""Find a non-built-in resource (a CRD) by asking the server, and remember the answer.

Only the groups a name can belong to are fetched; the cache is dropped for a name whose
resource turned out missing, so a CRD installed later is found without a restart.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from watchkeeper.client.errors import NotFound
from watchkeeper.client.resource import Resource, Spec, UnknownResource, find_builtin, parse_spec
from watchkeeper.client.transport import Transport


class Discovery:
    def __init__(self, transport: Transport) -> None:
        self._transport = transport
        self._cache: dict[str, Resource] = {}
        self._lock = asyncio.Lock()

    def forget(self, text: str) -> None:
        self._cache.pop(text, None)

    async def resolve(self, text: str) -> Resource:
        spec = parse_spec(text)
        builtin = find_builtin(spec)
        if builtin is not None:
            return builtin
        if text in self._cache:
            return self._cache[text]
        async with self._lock:
            if text in self._cache:  # found by a concurrent caller while we waited
                return self._cache[text]
            found = await self._search(spec)
            if found is not None:
                self._cache[text] = found
        if found is None:
            where = f" in group {spec.group!r}" if spec.group else ""
            raise UnknownResource(
                f"the server does not serve a resource named {spec.name!r}{where} "
                "(kubectl api-resources lists what is served)"
            )
        return found

    async def _get(self, path: str) -> dict[str, Any]:
        resp = await self._transport.request("GET", path)
        decoded: dict[str, Any] = msgspec.json.decode(resp.body)
        return decoded

    async def _search(self, spec: Spec) -> Resource | None:
        for group, version in await self._candidate_versions(spec):
            path = f"/apis/{group}/{version}" if group else f"/api/{version}"
            try:
                listing = await self._get(path)
            except NotFound:
                continue
            for entry in listing.get("resources", []):
                if "/" in entry.get("name", ""):
                    continue  # subresources
                names = {
                    entry.get("name", ""),
                    entry.get("singularName", ""),
                    str(entry.get("kind", "")).lower(),
                    *(entry.get("shortNames") or []),
                }
                if spec.name.lower() in names or spec.name in names:
                    return Resource(
                        group, version, entry["kind"], entry["name"], bool(entry["namespaced"])
                    )
        return None

    async def _candidate_versions(self, spec: Spec) -> list[tuple[str, str]]:
        if spec.group is not None and spec.version is not None:
            return [(spec.group, spec.version)]
        groups = await self._get("/apis")
        out: list[tuple[str, str]] = []
        if spec.group in (None, ""):
            out.append(("", "v1"))
        for g in groups.get("groups", []):
            if spec.group is not None and g.get("name") != spec.group:
                continue
            preferred = (g.get("preferredVersion") or {}).get("version")
            if preferred:
                out.append((g["name"], preferred))
        return out
