"""``Api``: the verbs on one resource in one namespace (or all), over the transport.

Objects are plain dicts decoded by msgspec. ``watch`` is one raw HTTP watch stream, framed
here from raw chunks (the aiohttp line reader is the bottleneck at high event rates) and
decoded line by line; reconnecting, backing off and relisting are the watcher's job.
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal, Protocol

import msgspec

from watchkeeper.client._json import encode as _encode  # deep objects written back too
from watchkeeper.client._pager import list_pages
from watchkeeper.client.errors import InvalidResponse, NotFound
from watchkeeper.client.objects import _NO_META as _NO_META
from watchkeeper.client.objects import KeyFields as KeyFields
from watchkeeper.client.objects import LazyList as LazyList
from watchkeeper.client.objects import ListShape
from watchkeeper.client.objects import ObjectList as ObjectList
from watchkeeper.client.objects import RawEvent as RawEvent
from watchkeeper.client.objects import _decode_any as _decode_any
from watchkeeper.client.objects import _decode_large as _decode_large
from watchkeeper.client.objects import _decode_obj as _decode_obj
from watchkeeper.client.objects import _Head as _Head
from watchkeeper.client.objects import _HeadObject as _HeadObject
from watchkeeper.client.objects import _object_list as _object_list
from watchkeeper.client.objects import decode_line_object as decode_line_object
from watchkeeper.client.objects import key_fields as key_fields
from watchkeeper.client.objects import lazy_list as _lazy_list
from watchkeeper.client.resource import Resource
from watchkeeper.client.stream import open_stream

if TYPE_CHECKING:
    from watchkeeper.client.discovery import Discovery
    from watchkeeper.client.stream import FastWatchStream
    from watchkeeper.client.transport import Transport

JSON = dict[str, Any]


class ApiClient(Protocol):
    """What an ``Api`` needs of its client (``Client`` is one): the transport and the
    discovery cache. A protocol, so that ``client`` builds ``Api``s and ``api`` does not
    import ``client`` back."""

    @property
    def transport(self) -> Transport: ...

    @property
    def discovery(self) -> Discovery: ...


PatchType = Literal["merge", "json", "strategic", "apply"]

_PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}

# PartialObjectMetadata: only kind, apiVersion and metadata of each object (big kinds).
METADATA_ACCEPT = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
METADATA_LIST_ACCEPT = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"

DEFAULT_MAX_EVENT_BYTES = 16 * 1024 * 1024
"""The longest watch event line accepted. etcd refuses requests over 1.5 MiB by default
(``--max-request-bytes``), so a stored object is at most about that; its JSON in a watch
event can grow to 2-3 MiB (escaping, the event envelope, managedFields rewritten by the
server). 16 MiB is several times that, yet bounds what a broken or hostile server can make
us buffer for one line."""


def _list_shape(resource: Resource, accept: str = "application/json") -> ListShape:
    """What a LIST answer must be: the representation the Accept header asked for
    (``as=PartialObjectMetadataList;g=meta.k8s.io;v=v1``), else the resource's own list
    kind (``<Kind>List``, as kube-apiserver names them, in its group/version)."""
    params = dict(p.strip().partition("=")[::2] for p in accept.split(",")[0].split(";")[1:])
    if params.get("as"):
        group, version = params.get("g", ""), params.get("v", "")
        return ListShape(params["as"], f"{group}/{version}" if group else version)
    return ListShape(f"{resource.kind}List" if resource.kind else "", resource.api_version)


def _selectors(label_selector: str | None, field_selector: str | None) -> dict[str, str]:
    params: dict[str, str] = {}
    if label_selector:
        params["labelSelector"] = label_selector
    if field_selector:
        params["fieldSelector"] = field_selector
    return params


def _list_params(label_selector: str | None, field_selector: str | None, limit: int | None,
                 continue_token: str | None, resource_version: str | None,
                 resource_version_match: str | None) -> dict[str, str]:
    params = _selectors(label_selector, field_selector)
    if limit:
        params["limit"] = str(limit)
    if continue_token:
        params["continue"] = continue_token
    if resource_version is not None:
        params["resourceVersion"] = resource_version
    if resource_version_match:
        params["resourceVersionMatch"] = resource_version_match
    return params


class Api:
    """Verbs on ``resource``; ``namespace=None`` on a namespaced resource means all namespaces
    for list/watch, and the object's own namespace for writes."""

    def __init__(self, client: ApiClient, resource: Resource | str, namespace: str | None) -> None:
        self.client = client
        self._given = resource
        self._resource = resource
        self._spec = resource if isinstance(resource, str) else resource.qualified
        self.namespace = namespace

    def __repr__(self) -> str:
        ns = self.namespace if self.namespace is not None else "*"
        return f"Api({self._resource_name()}, namespace={ns!r})"

    def _resource_name(self) -> str:
        r = self._resource
        return r.qualified if isinstance(r, Resource) else r

    @property
    def resource_name(self) -> str:
        return self._resource_name()

    async def resource(self) -> Resource:
        """The resolved resource (discovery on first use for non-built-ins)."""
        if isinstance(self._resource, str):
            self._resource = await self.client.discovery.resolve(self._resource)
        return self._resource

    async def _path(
        self, name: str | None = None, namespace: str | None = None, sub: str | None = None
    ) -> str:
        res = await self.resource()
        ns = namespace if namespace is not None else self.namespace
        if res.namespaced and name is not None and not ns:
            raise ValueError(
                f"{res.qualified} is namespaced: give a namespace to the Api or the call"
            )
        return res.path(ns, name, sub)

    def _type_missing(self, exc: NotFound) -> None:
        """After a 404 for the type itself (CRD deleted), look it up afresh next time: in the
        discovery cache and here, since a re-created CRD may serve another version."""
        if not exc.details.get("name"):
            self.client.discovery.forget(self._spec)
            self._resource = self._given

    async def _body(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        accept: str = "application/json",
    ) -> bytes:
        payload = body if isinstance(body, bytes) or body is None else _encode(body)
        try:
            resp = await self.client.transport.request(
                method, path, params=params, body=payload,
                content_type=content_type if payload is not None else None, accept=accept,
            )
        except NotFound as exc:
            self._type_missing(exc)
            raise
        return resp.body

    async def _json(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        accept: str = "application/json",
    ) -> JSON:
        raw = await self._body(method, path, params=params, body=body,
                               content_type=content_type, accept=accept)
        try:
            return _decode_large(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            said = self.client.transport.redactor.scrub(str(exc))
            raise InvalidResponse(
                f"undecodable response body ({said})", method=method, path=path
            ) from None

    # -- reads ---------------------------------------------------------------------------

    async def get(self, name: str, *, namespace: str | None = None) -> JSON:
        return await self._json("GET", await self._path(name, namespace))

    async def get_status(self, name: str, *, namespace: str | None = None) -> JSON:
        return await self._json("GET", await self._path(name, namespace, "status"))

    async def list(
        self,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
        metadata_only: bool = False,
    ) -> ObjectList:
        """One page; follow ``continue_token`` (or use ``list_all``) for the rest.
        ``metadata_only`` asks for PartialObjectMetadata: no spec, data or status."""
        params = _list_params(label_selector, field_selector, limit, continue_token,
                              resource_version, resource_version_match)
        accept = METADATA_LIST_ACCEPT if metadata_only else "application/json"
        path = await self._path()
        data = await self._json("GET", path, params=params, accept=accept)
        return await self._checked_list(data, path, accept)

    async def _checked_list(self, data: JSON, path: str, accept: str) -> ObjectList:
        shape = _list_shape(await self.resource(), accept)
        try:
            return _object_list(data, path, shape)
        except InvalidResponse as exc:  # it quotes what the server said: scrubbed
            raise self.client.transport.redactor.error(exc) from None

    async def list_lazy(
        self,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
        metadata_only: bool = False,
    ) -> LazyList | ObjectList:
        """``list``, its items left as JSON (``ListItem``: the bytes and the key fields) for
        a lazy watcher, whose Store compresses those bytes without building a dict. A page
        that is not a well-formed list is decoded the eager way (an ``ObjectList``, or the
        ``InvalidResponse`` ``list`` raises): the same answer, the same errors."""
        params = _list_params(label_selector, field_selector, limit, continue_token,
                              resource_version, None)
        accept = METADATA_LIST_ACCEPT if metadata_only else "application/json"
        path = await self._path()
        body = await self._body("GET", path, params=params, accept=accept)
        page = _lazy_list(body, path, _list_shape(await self.resource(), accept))
        if page is not None:
            return page
        try:
            data = _decode_large(body)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            said = self.client.transport.redactor.scrub(str(exc))
            raise InvalidResponse(
                f"undecodable response body ({said})", method="GET", path=path
            ) from None
        return await self._checked_list(data, path, accept)

    async def list_all(
        self,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
        resource_version: str | None = None,
    ) -> ObjectList:
        """Every page, as one list at the first page's resourceVersion.

        The cyclic GC is paused meanwhile (no user code runs inside): every object of every
        page stays alive, and collections while they arrive walked them again and again
        (measured on 10,000 ConfigMaps: 68 -> 47 ms of client CPU; docs/decisions.md)."""
        params = {**_selectors(label_selector, field_selector), "limit": str(page_size)}
        path = await self._path()
        shape = _list_shape(await self.resource())
        transport, missing = self.client.transport, self._type_missing
        if not gc.isenabled():
            return await list_pages(transport, path, params, resource_version, missing, shape)
        gc.disable()
        try:
            return await list_pages(transport, path, params, resource_version, missing, shape)
        finally:
            gc.enable()

    @asynccontextmanager
    async def watch(
        self,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
        send_initial_events: bool = False,
        read_timeout: float | None = None,
        extra_params: Mapping[str, str] | None = None,
        metadata_only: bool = False,
        lazy: bool = False,
    ) -> AsyncIterator[FastWatchStream]:
        """Open one watch; the stream raises typed errors, ends at the server's timeout.

        ``lazy`` decodes each event's object only when it is first read (``RawEvent``).
        ``read_timeout`` bounds silence, and also how long one event may take to arrive
        whole; an event longer than the client's ``max_event_bytes`` is an InvalidResponse."""
        params = {"watch": "true", **_selectors(label_selector, field_selector)}
        if resource_version is not None:
            params["resourceVersion"] = resource_version
        if timeout_seconds is not None:
            params["timeoutSeconds"] = str(timeout_seconds)
        if allow_bookmarks:
            params["allowWatchBookmarks"] = "true"
        if send_initial_events:
            params["sendInitialEvents"] = "true"
            params["resourceVersionMatch"] = "NotOlderThan"
        if extra_params:
            params.update(extra_params)
        path = await self._path()
        opened = False
        limit = getattr(self.client, "max_event_bytes", DEFAULT_MAX_EVENT_BYTES)
        try:
            async with open_stream(
                self.client.transport, path, params=params, read_timeout=read_timeout,
                accept=METADATA_ACCEPT if metadata_only else "application/json", lazy=lazy,
                max_line=limit,
            ) as stream:
                opened = True
                yield stream
        except NotFound as exc:
            if not opened:  # the watch request itself got the 404, not the caller's code
                self._type_missing(exc)
            raise

    # -- writes --------------------------------------------------------------------------

    def _write_ns(self, obj: JSON) -> str | None:
        return self.namespace or (obj.get("metadata") or {}).get("namespace")

    async def create(
        self, obj: JSON, *, dry_run: bool = False, field_manager: str | None = None
    ) -> JSON:
        res = await self.resource()
        ns = self._write_ns(obj)
        if res.namespaced and not ns:
            raise ValueError(f"{res.qualified} is namespaced: set metadata.namespace or Api ns")
        params = _write_params(dry_run, field_manager)
        return await self._json("POST", res.path(ns), params=params, body=obj)

    async def replace(
        self, name: str, obj: JSON, *, dry_run: bool = False, field_manager: str | None = None
    ) -> JSON:
        path = await self._path(name, self._write_ns(obj))
        return await self._json("PUT", path, params=_write_params(dry_run, field_manager), body=obj)

    async def replace_status(self, name: str, obj: JSON) -> JSON:
        return await self._json("PUT", await self._path(name, self._write_ns(obj), "status"),
                                body=obj)

    async def patch(
        self,
        name: str,
        patch: Any,
        *,
        type: PatchType = "merge",
        field_manager: str | None = None,
        force: bool = False,
        namespace: str | None = None,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> JSON:
        """Merge, JSON (RFC 6902), strategic-merge or server-side apply (needs a manager)."""
        if type not in _PATCH_CONTENT_TYPES:
            raise ValueError(f"unknown patch type {type!r}: use merge, json, strategic or apply")
        if type == "apply" and not field_manager:
            raise ValueError("server-side apply needs field_manager (who owns the fields)")
        params = _write_params(dry_run, field_manager)
        if force:
            params["force"] = "true"
        return await self._json(
            "PATCH", await self._path(name, namespace, subresource), params=params, body=patch,
            content_type=_PATCH_CONTENT_TYPES[type],
        )

    async def patch_status(self, name: str, patch: Any, **kw: Any) -> JSON:
        return await self.patch(name, patch, subresource="status", **kw)

    async def delete(
        self,
        name: str,
        *,
        namespace: str | None = None,
        propagation_policy: Literal["Background", "Foreground", "Orphan"] | None = None,
        grace_period_seconds: int | None = None,
        preconditions: Mapping[str, str] | None = None,
        dry_run: bool = False,
    ) -> JSON:
        """Returns the server's answer: a Status, or the object when finalizers hold it."""
        options: JSON = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if preconditions:
            options["preconditions"] = dict(preconditions)
        if dry_run:
            options["dryRun"] = ["All"]
        return await self._json("DELETE", await self._path(name, namespace), body=options)


def _write_params(dry_run: bool, field_manager: str | None) -> dict[str, str]:
    params: dict[str, str] = {}
    if dry_run:
        params["dryRun"] = "All"
    if field_manager:
        params["fieldManager"] = field_manager
    return params
