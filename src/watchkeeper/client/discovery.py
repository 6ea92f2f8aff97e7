"""Find a non-built-in resource (a CRD) by asking the server, and remember the answer.

Only the groups a name can belong to are fetched; the cache is dropped for a name whose
resource turned out missing, so a CRD installed later is found without a restart.
"""

from __future__ import annotations

import asyncio
from typing import TypeVar

import msgspec

from watchkeeper.client.errors import InvalidResponse, NotFound
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

    async def _get(self, path: str, shape: type[_T]) -> _T:
        """A discovery document, checked against the fields we use: an HTML page from a
        proxy, or an entry without ``kind``, is an ``InvalidResponse`` naming the path."""
        resp = await self._transport.request("GET", path)
        try:
            return _decode(resp.body, shape)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            said = self._transport.redactor.scrub(str(exc))
            raise InvalidResponse(
                f"malformed discovery document ({said})", method="GET", path=path
            ) from None

    async def _search(self, spec: Spec) -> Resource | None:
        for group, version in await self._candidate_versions(spec):
            path = f"/apis/{group}/{version}" if group else f"/api/{version}"
            try:
                listing = await self._get(path, _ResourceList)
            except NotFound:
                continue
            for entry in listing.resources:
                if "/" in entry.name:
                    continue  # subresources
                names = {entry.name, entry.singularName, entry.kind.lower(), *entry.shortNames}
                if spec.name.lower() in names or spec.name in names:
                    return Resource(group, version, entry.kind, entry.name, entry.namespaced)
        return None

    async def _candidate_versions(self, spec: Spec) -> list[tuple[str, str]]:
        if spec.group is not None and spec.version is not None:
            return [(spec.group, spec.version)]
        groups = await self._get("/apis", _GroupList)
        out: list[tuple[str, str]] = []
        if spec.group in (None, ""):
            out.append(("", "v1"))
        for g in groups.groups:
            if spec.group is not None and g.name != spec.group:
                continue
            preferred = g.preferredVersion.version if g.preferredVersion else ""
            if preferred:
                out.append((g.name, preferred))
        return out


# The fields of the discovery documents (meta/v1 APIGroupList, APIResourceList) we read;
# the rest is skipped. Required where client-go's discovery would fail without them.


class _Version(msgspec.Struct):
    version: str = ""


class _Group(msgspec.Struct):
    name: str
    preferredVersion: _Version | None = None


class _GroupList(msgspec.Struct):
    groups: list[_Group] = msgspec.field(default_factory=list)


class _ApiResource(msgspec.Struct):
    name: str
    kind: str
    namespaced: bool
    singularName: str = ""
    shortNames: list[str] = msgspec.field(default_factory=list)


class _ResourceList(msgspec.Struct):
    resources: list[_ApiResource] = msgspec.field(default_factory=list)


_T = TypeVar("_T", _GroupList, _ResourceList)


def _decode(body: bytes, shape: type[_T]) -> _T:
    try:
        return msgspec.json.decode(body, type=shape)
    except RecursionError:  # a discovery document is shallow: deeper is garbage
        raise msgspec.DecodeError("JSON nested too deep for a discovery document") from None
