"""Resource verbs over HTTP: get, list, watch, create, update, patch, delete, deletecollection.

Authentication, authorization, faults and logging happen before these handlers run (in
apiserver.py); here a request is resolved to a ResourceType and served with the exact
statuses and bodies kube-apiserver 1.28 uses. Reads (get, list, watch) come out in the
representation the Accept header negotiates (JSON, YAML, Table, PartialObjectMetadata), see
``_represent.py``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestPayloadError

from watchkeeper_sim import status as _status
from watchkeeper_sim.api import admit as _admit
from watchkeeper_sim.api.represent import (
    WatchRenderer,
    list_item,
    list_response,
    negotiate,
    object_response,
    watch_renderer,
)
from watchkeeper_sim.api.watch import OpenWatch, WatchOptions, WatchStream
from watchkeeper_sim.faults import Faults, RequestInfo
from watchkeeper_sim.model import JSON, ResourceType
from watchkeeper_sim.storage import metavalid as _metavalid
from watchkeeper_sim.storage import validation as _validation
from watchkeeper_sim.storage.clone import clone
from watchkeeper_sim.storage.registry import Registry, present
from watchkeeper_sim.storage.resources import CRD_GROUP
from watchkeeper_sim.storage.selectors import SelectorError, matcher
from watchkeeper_sim.storage.store import ObjectStore, RVTooLarge, StoreError, parse_rv
from watchkeeper_sim.webhooks import conversion as _conversion
from watchkeeper_sim.webhooks.conversion import ConversionFailed, Converter, WebhookConversion
from watchkeeper_sim.wire import http as _http
from watchkeeper_sim.wire.http import Route


@dataclass
class HandlerOptions:
    """The tunables of request handling (set from ApiServer's constructor)."""

    watch_list: bool = True  # the WatchList feature gate
    bookmark_interval: float = 60.0
    bookmark_lead: float = 2.0
    initial_events_end_delay: float = 0.0
    too_large_rv_wait: float = 0.5  # apiserver waits ~3 s before its 504 (file 046)
    default_watch_timeout: float | None = None
    max_body_bytes: int = 3 * 1024 * 1024


def _meta_of(obj: JSON) -> JSON:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _cause(field: str, reason: str, message: str) -> JSON:
    return _status.cause(reason, message, field)


def validate_list_options(q: Any, watch: bool, gate: bool) -> list[JSON]:
    """apimachinery's ValidateListOptions (files 039, 040, 057, 068, 070) as 422 causes."""
    causes: list[JSON] = []
    match = q.get("resourceVersionMatch", "")
    rv = q.get("resourceVersion", "")
    cont = q.get("continue", "")
    sie = q.get("sendInitialEvents")
    forbid = "FieldValueForbidden"
    if watch:
        if sie is not None:
            if match != "NotOlderThan":
                causes.append(_cause("resourceVersionMatch", forbid,
                                     "Forbidden: sendInitialEvents requires setting "
                                     "resourceVersionMatch to NotOlderThan"))
            if not gate:
                causes.append(_cause("sendInitialEvents", forbid,
                                     "Forbidden: sendInitialEvents is forbidden for watch unless "
                                     "the WatchList feature gate is enabled"))
        if match:
            if sie is None:
                causes.append(_cause("resourceVersionMatch", forbid,
                                     "Forbidden: resourceVersionMatch is forbidden for watch "
                                     "unless sendInitialEvents is provided"))
            if match != "NotOlderThan":
                causes.append(_cause("resourceVersionMatch", "FieldValueNotSupported",
                                     f'Unsupported value: "{match}": supported values: '
                                     '"NotOlderThan"'))
            if cont:
                causes.append(_cause("resourceVersionMatch", forbid,
                                     "Forbidden: resourceVersionMatch is forbidden when "
                                     "continue is provided"))
        return causes
    if match in ("Exact", "NotOlderThan"):
        if not rv:
            causes.append(_cause("resourceVersionMatch", forbid,
                                 "Forbidden: resourceVersionMatch is forbidden unless "
                                 "resourceVersion is provided"))
        if cont:
            causes.append(_cause("resourceVersionMatch", forbid,
                                 "Forbidden: resourceVersionMatch is forbidden when continue is "
                                 "provided"))
        if match == "Exact" and rv == "0":
            causes.append(_cause("resourceVersionMatch", forbid,
                                 'Forbidden: resourceVersionMatch "exact" is forbidden for '
                                 'resourceVersion "0"'))
    elif match:
        causes.append(_cause("resourceVersionMatch", "FieldValueNotSupported",
                             f'Unsupported value: "{match}": supported values: "Exact", '
                             '"NotOlderThan", ""'))
    if sie is not None:
        causes.append(_cause("sendInitialEvents", forbid,
                             "Forbidden: sendInitialEvents is forbidden for list"))
    return causes


_GO_INT = re.compile(r"[+-]?[0-9]+")


def _go_int(raw: str) -> int:
    """A query integer as the parameter codec reads it (Go ``strconv.ParseInt(s, 10, 64)``):
    ASCII digits only (no "1.5", "nan", "1_0", spaces or other scripts' digits), int64 range;
    a 400 with Go's wording otherwise."""
    if not _GO_INT.fullmatch(raw):
        raise StoreError(_status.bad_request(
            f'strconv.ParseInt: parsing "{raw}": invalid syntax'))
    value = int(raw)
    if not -(2**63) <= value < 2**63:
        raise StoreError(_status.bad_request(
            f'strconv.ParseInt: parsing "{raw}": value out of range'))
    return value


_DECIMAL = re.compile(r"[+-]?[0-9]+\.[0-9]+")


def _timeout_seconds(raw: str) -> float:
    """timeoutSeconds: an int64 like kube-apiserver's, plus plain decimal fractions ("0.3"),
    a simulator extension its tests use for short watches. Never "nan" or "inf" (float()
    took those: "nan" made a watch that never ended and woke every millisecond)."""
    if _DECIMAL.fullmatch(raw) and abs(float(raw)) < 2**63:
        return float(raw)
    return float(_go_int(raw))


def _int_param(q: Any, name: str) -> int:
    raw = q.get(name, "")
    if raw == "":
        return 0
    return _go_int(raw)


def _string_slice(values: list[str]) -> str:
    """Go's %#v of a []string."""
    return "[]string{" + ", ".join(_status.go_quote(v) for v in values) + "}"


def dry_run_causes(values: list[str]) -> list[JSON]:
    """ValidateDryRun: every dryRun value must be "All" (a 422 otherwise, never a write)."""
    if all(v == "All" for v in values):
        return []
    return [_cause("dryRun", "FieldValueNotSupported",
                   f'Unsupported value: {_string_slice(values)}: supported values: "All"')]


def field_manager_causes(value: str) -> list[JSON]:
    """ValidateFieldManager: at most 128 bytes, printable characters only."""
    causes: list[JSON] = []
    if len(value.encode("utf-8", "surrogatepass")) > 128:
        causes.append(_cause("fieldManager", "FieldValueTooLong",
                             "Too long: must have at most 128 bytes"))
    position = 0  # Go ranges over a string by byte offset
    for c in value:
        if not c.isprintable():
            causes.append(_cause(
                "fieldManager", "FieldValueInvalid",
                f"Invalid value: {_status.go_quote(value)}: invalid character U+{ord(c):04X} "
                f"(at position {position})"))
        position += len(c.encode("utf-8", "surrogatepass"))
    return causes


_PROPAGATION = ("Foreground", "Background", "Orphan")
# DeleteOptions fields, the JSON type each must have, its Go type
_DELETE_OPTION_TYPES: tuple[tuple[str, type, str], ...] = (
    ("gracePeriodSeconds", int, "int64"), ("orphanDependents", bool, "bool"),
    ("propagationPolicy", str, "v1.DeletionPropagation"), ("dryRun", list, "[]string"),
    ("preconditions", dict, "v1.Preconditions"),
)


def delete_options_error(opts: Any) -> str | None:
    """What kube-apiserver 1.28 answers (as a reason-less 500, kubernetes#132359, 400 only
    from 1.35) for a DeleteOptions body of the wrong JSON types; None when it decodes."""
    if opts is None:
        return None
    if not isinstance(opts, dict):
        return ("couldn't get version/kind; json parse error: json: cannot unmarshal "
                f"{_metavalid.json_type(opts)} into Go value of type struct {{ APIVersion string "
                '"json:\\"apiVersion,omitempty\\""; Kind string "json:\\"kind,omitempty\\"" }')

    def wrong(value: Any, field: str, go_type: str, struct: str = "DeleteOptions") -> str:
        return (f"json: cannot unmarshal {_metavalid.json_type(value)} into Go struct field "
                f"{struct}.{field} of type {go_type}")

    for field, want, go_type in _DELETE_OPTION_TYPES:
        value: Any = opts.get(field)
        if value is None:
            continue
        ok = isinstance(value, want) and not (want is int and isinstance(value, bool))
        if want is int and isinstance(value, float) and value.is_integer():
            ok = True
        if not ok:
            return wrong(value, field, go_type)
        if field == "dryRun":
            for item in value:
                if item is not None and not isinstance(item, str):
                    return wrong(item, field, "string")
        if field == "preconditions":
            for key, go in (("uid", "types.UID"), ("resourceVersion", "string")):
                item = value.get(key)
                if item is not None and not isinstance(item, str):
                    return wrong(item, f"preconditions.{key}", go, "Preconditions")
    return None


def _warned(resp: web.Response, check: _validation.FieldCheck) -> web.Response:
    """Add one ``Warning`` header per field problem fieldValidation=Warn found (112, 148)."""
    for value in check.headers():
        resp.headers.add("Warning", value)
    return resp


# Serves a subresource that is no stored object (e.g. serviceaccounts/token):
# (request, route, namespace, verb) -> response; StoreErrors become Status responses.
SubresourceHandler = Callable[[web.Request, Route, str, str], Awaitable[web.StreamResponse]]


class Handlers:
    """Serves resource requests against one store."""

    def __init__(
        self,
        store: ObjectStore,
        registry: Registry,
        faults: Faults,
        opts: HandlerOptions,
        stopping: asyncio.Event,
    ) -> None:
        self.store = store
        self.registry = registry
        self.faults = faults
        self.opts = opts
        self.stopping = stopping
        self.watches: set[OpenWatch] = set()
        self.subresources: dict[tuple[str, str, str], SubresourceHandler] = {}  # group, plural, sub
        # calls CRD conversion webhooks; None: custom resources only change apiVersion
        self.converter: Converter | None = None
        self.writes = _admit.AdmittedWrites(registry)  # ApiServer gives it the webhooks

    # ---- routing ---------------------------------------------------------------------------

    def resolve(self, route: Route) -> ResourceType | web.Response:
        """The ResourceType for a route, or the 404 response the apiserver gives."""
        if route.api_prefix == "api":
            if route.version != "v1":
                return _http.page_not_found()
        elif route.group not in self.store.groups():
            return _http.page_not_found()
        rt = self.store.lookup(route.group, route.version, route.resource)
        # a group of CRDs is served by apiextensions, whose misses fall through to the Go
        # mux's plain 404 (conformance crd-versions, crd-cluster-scoped)
        custom = any(t.is_custom for (g, _, _), t in self.store.types.items()
                     if g == route.group)
        if rt is None or (route.namespaced_path and not rt.namespaced):
            return _http.page_not_found() if custom else _http.status_response(
                _status.resource_not_found())
        if route.subresource and not (route.subresource == "status" and rt.has_status) \
                and not (route.subresource == "scale" and rt.scale is not None) \
                and (rt.group, rt.plural, route.subresource) not in self.subresources:
            if rt.is_custom:  # the object is what it does not find (crd-status-subresource)
                return _http.status_response(_status.not_found(rt.plural, rt.group,
                                                               route.name))
            return _http.status_response(_status.resource_not_found())
        return rt

    async def serve(
        self,
        request: web.Request,
        route: Route,
        verb: str,
        manager: str,
        info: RequestInfo,
    ) -> web.StreamResponse:
        response = await self._serve(request, route, verb, manager, info)
        for value in _admit.warning_headers(request):  # admission webhooks' warnings
            response.headers.add("Warning", value)
        return response

    async def _serve(
        self,
        request: web.Request,
        route: Route,
        verb: str,
        manager: str,
        info: RequestInfo,
    ) -> web.StreamResponse:
        resolved = self.resolve(route)
        if isinstance(resolved, web.Response):
            return resolved
        rt = resolved
        ns = route.namespace if rt.namespaced else ""
        if rt.namespaced and not route.namespaced_path and (route.name or verb == "create"):
            return _http.status_response(_status.resource_not_found())
        special = self.subresources.get((rt.group, rt.plural, route.subresource))
        if special is not None:
            try:
                return await special(request, route, ns, verb)
            except StoreError as exc:
                return _http.error_response(exc)
        if route.subresource == "scale" and rt.scale is not None:
            try:
                return await self._scale(request, rt, ns, route, verb)
            except StoreError as exc:
                return _http.error_response(exc)
        if (verb in ("update", "patch") and not route.name) or (verb == "create" and route.name):
            return _http.status_response(_status.method_not_allowed())
        if verb not in rt.verbs:
            return _http.status_response(_status.method_not_allowed())
        q = request.query
        dry_run = q.get("dryRun", "") == "All"
        try:
            if verb == "get":
                out = negotiate(request.headers.get("Accept"), q, rt, is_list=False)
                obj = await self._served(rt, self.store.get(rt, ns, route.name))
                return object_response(out, rt, obj)
            if verb in ("list", "watch"):
                return await self._collection(request, rt, ns or None, verb == "watch", route)
            if verb == "create":
                check = self._field_check(q, "CreateOptions")
                body = await self._body(request, rt, check)
                obj = await self.writes.create(request, rt, ns, body, manager=manager,
                                               dry_run=dry_run, check=check,
                                               commit=self._commit(rt, None))
                return _warned(_http.json_response(obj, 201), check)
            if verb == "update":
                check = self._field_check(q, "UpdateOptions")
                body = await self._body(request, rt, check)
                stored, current = await self._current(rt, ns, route.name, must_exist=True)

                def put(dry: bool, fc: _validation.FieldCheck) -> JSON:
                    return self.registry.update(rt, ns, route.name, clone(body),
                                                manager=manager, subresource=route.subresource,
                                                dry_run=dry, check=fc, current=current)

                obj = await self.writes.update(request, rt, ns, route.name, put,
                                               manager=manager, subresource=route.subresource,
                                               dry_run=dry_run, check=check,
                                               commit=self._commit(rt, stored), current=current)
                return _warned(_http.json_response(obj), check)
            if verb == "patch":
                return await self._patch(request, rt, ns, route, dry_run)
            if verb == "delete":
                return await self._delete(request, rt, ns, route.name, dry_run)
            if verb == "deletecollection":
                return await self._delete_collection(request, rt, ns or None, dry_run)
        except StoreError as exc:
            return _http.error_response(exc)
        except _admit.Refused as exc:
            return _http.status_response(exc.status)
        return _http.status_response(_status.method_not_allowed())

    # ---- CRD conversion webhooks ---------------------------------------------------------

    def _conversion(self, rt: ResourceType) -> WebhookConversion | None:
        """The webhook conversion of a custom resource's CRD, or None (apiVersion only)."""
        if not rt.is_custom or self.converter is None:
            return None
        crds = self.store.lookup(CRD_GROUP, "v1", "customresourcedefinitions")
        crd = None if crds is None else self.store.peek(crds, "", f"{rt.plural}.{rt.group}")
        return _conversion.of_crd(crd)

    def _converting(self, rt: ResourceType) -> bool:
        """A write at a version that is not the storage version: through the webhook."""
        conv = self._conversion(rt)
        return conv is not None and rt.version != conv.storage_version

    def _commit(self, rt: ResourceType, stored: JSON | None) -> _admit.Commit | None:
        """For a write at a non-storage version: every registry write at the request's
        version stays a dry run, and this stores the admitted preview through the webhook."""
        if not self._converting(rt):
            return None

        async def commit(preview: JSON, dry_run: bool) -> JSON:
            return await self._store_converted(rt, stored, preview, dry_run)

        return commit

    async def _at_version(self, conv: WebhookConversion, obj: JSON, api_version: str) -> JSON:
        assert self.converter is not None
        try:
            return await self.converter.convert(conv, obj, api_version)
        except ConversionFailed as exc:  # a reason-less 500, as kube-apiserver answers
            raise StoreError(_status.internal(str(exc))) from None

    async def _converted(self, rt: ResourceType, obj: JSON) -> JSON:
        """A stored object at ``rt``'s version: the webhook's work when the CRD has one and
        the object is stored at another version (an older storage version too)."""
        conv = self._conversion(rt)
        if conv is None:
            return obj
        return await self._at_version(conv, obj, rt.group_version)

    def versions(self, rt: ResourceType) -> list[ResourceType]:
        """The other served versions of a custom resource, in its CRD's order (what a
        webhook with matchPolicy Equivalent may be shown instead)."""
        if not rt.is_custom:
            return []
        return [t for (g, v, p), t in self.store.types.items()
                if (g, p) == (rt.group, rt.plural) and v != rt.version]

    async def convert_to(self, obj: JSON, rt: ResourceType) -> JSON:
        """An object of a custom resource at ``rt``'s version: by the CRD's conversion
        webhook when it has one, else by its apiVersion alone (strategy None)."""
        conv = self._conversion(rt)
        if conv is None:
            return {**obj, "apiVersion": rt.group_version}
        return await self._at_version(conv, obj, rt.group_version)

    async def _served(self, rt: ResourceType, obj: JSON) -> JSON:
        return present(await self._converted(rt, obj), rt)

    async def _current(self, rt: ResourceType, ns: str, name: str, must_exist: bool = False
                       ) -> tuple[JSON | None, JSON | None]:
        """Before a write through a conversion webhook: the stored object and the same at the
        request's version (which the write is computed against); (None, None) otherwise."""
        if self._conversion(rt) is None:
            return None, None
        stored = self.store.get(rt, ns, name) if must_exist else self.store.peek(rt, ns, name)
        if stored is None:
            return None, None
        return stored, await self._converted(rt, stored)

    async def _store_converted(self, rt: ResourceType, stored: JSON | None, preview: JSON,
                               dry_run: bool) -> JSON:
        """The tail of a write at a non-storage version: the dry run's object converted to
        the storage version, stored, and answered converted back; a dry run is converted
        both ways too and not stored (issue 24 combined, files 003, 017)."""
        conv = self._conversion(rt)
        assert conv is not None
        storage = self.store.lookup(rt.group, conv.storage_version, rt.plural) \
            or dataclasses.replace(rt, version=conv.storage_version)
        new = await self._at_version(conv, preview, storage.group_version)
        if dry_run:
            back = await self._served(rt, new)
            version = _meta_of(preview).get("resourceVersion")
            if version is not None and isinstance(back.get("metadata"), dict):
                back["metadata"] = {**back["metadata"], "resourceVersion": version}
            return back
        return await self._served(rt, self.registry.commit_converted(storage, stored, new))

    @staticmethod
    def _field_check(q: Any, options: str, causes: list[JSON] | None = None
                     ) -> _validation.FieldCheck:
        """The request's fieldValidation (default Warn); 422 on {options} for a bad value."""
        value = q.get("fieldValidation")
        causes = ((causes or []) + field_manager_causes(q.get("fieldManager", ""))
                  + dry_run_causes(q.getall("dryRun", [])) + _validation.directive_causes(value))
        if causes:
            raise StoreError(_status.invalid_options(options, causes))
        return _validation.FieldCheck(directive=value or "Warn")

    async def _body(self, request: web.Request, rt: ResourceType,
                    check: _validation.FieldCheck) -> Any:
        raw = await self.read_body(request)
        body = _http.decode_write_body(request, raw, rt.kind)
        if check.directive != "Ignore" and _http.media_type(request) != "application/yaml":
            check.duplicates = _validation.duplicate_fields(raw)
        return body

    async def read_body(self, request: web.Request) -> bytes:
        """The request body, refusing more than ``max_body_bytes`` with a 413 Status."""
        limit = self.opts.max_body_bytes
        if request.content_length is not None and request.content_length > limit:
            raise StoreError(_status.entity_too_large(limit))
        chunks: list[bytes] = []
        size = 0
        try:
            async for chunk in request.content.iter_chunked(65536):
                size += len(chunk)
                if size > limit:
                    raise StoreError(_status.entity_too_large(limit))
                chunks.append(chunk)
        except RequestPayloadError as exc:  # e.g. "Content-Encoding: gzip" that is not gzip
            raise StoreError(_status.bad_request(
                "unable to read the request body: "
                + str(exc).strip().splitlines()[-1].strip())) from None
        return b"".join(chunks)

    # ---- list & watch ----------------------------------------------------------------------

    async def _collection(
        self, request: web.Request, rt: ResourceType, ns: str | None, watch: bool, route: Route
    ) -> web.StreamResponse:
        q = request.query
        out = negotiate(request.headers.get("Accept"), q, rt, is_list=True, watch=watch)
        causes = validate_list_options(q, watch, self.opts.watch_list)
        if causes:
            raise StoreError(_status.invalid_options("ListOptions", causes))
        try:
            field_selector = q.get("fieldSelector", "")
            if route.watch_prefix and route.name:
                extra = f"metadata.name={route.name}"
                field_selector = f"{field_selector},{extra}" if field_selector else extra
            match = matcher(q.get("labelSelector", ""), field_selector, rt.plural)
        except SelectorError as exc:
            raise StoreError(_status.bad_request(str(exc))) from None
        filtered = bool(q.get("labelSelector") or q.get("fieldSelector"))
        if watch:
            return await self._watch(request, rt, ns, match, watch_renderer(out, rt))
        limit = _int_param(q, "limit")
        for attempt in (0, 1):
            try:
                result = self.store.list(
                    rt, ns, match,
                    resource_version=q.get("resourceVersion", ""),
                    rv_match=q.get("resourceVersionMatch", ""),
                    limit=limit,
                    continue_token=q.get("continue", ""),
                    filtered=filtered,
                )
                break
            except RVTooLarge as exc:
                if attempt or not await self.store.wait_for_rv(exc.requested,
                                                               self.opts.too_large_rv_wait):
                    raise
        items = result.items
        if self._conversion(rt) is not None:  # one review per object, as from etcd
            items = [await self._converted(rt, i) for i in items]
        meta: JSON = {"resourceVersion": result.resource_version}
        if result.continue_token:
            meta["continue"] = result.continue_token
        if result.remaining_item_count is not None:
            meta["remainingItemCount"] = result.remaining_item_count
        return list_response(out, rt, items, meta)

    async def _watch(
        self, request: web.Request, rt: ResourceType, ns: str | None,
        match: Callable[[JSON], bool], render: WatchRenderer | None,
    ) -> web.StreamResponse:
        q = request.query
        rv = q.get("resourceVersion", "")
        sie_raw = q.get("sendInitialEvents")
        bookmarks = _http.query_bool(q, "allowWatchBookmarks")
        if sie_raw is None and self.opts.watch_list and rv in ("", "0"):
            sie_raw = "true"  # SetListOptionsDefaults with the WatchList gate on (file 071)
        send_initial = sie_raw is not None and _http.param_true(sie_raw)
        timeout: float | None = self.opts.default_watch_timeout
        if q.get("timeoutSeconds"):
            timeout = _timeout_seconds(q["timeoutSeconds"])
        since: int | None
        if sie_raw is not None and not send_initial and rv in ("", "0"):
            since = self.store.rv  # sendInitialEvents=false: only changes from now on
        elif send_initial or rv in ("", "0"):
            since = None
            if rv not in ("", "0"):
                n = parse_rv(rv)
                if n > self.store.rv and not await self.store.wait_for_rv(
                        n, self.opts.too_large_rv_wait):
                    raise RVTooLarge(n, self.store.rv)
        else:
            since = parse_rv(rv)
            if since > self.store.rv and not await self.store.wait_for_rv(
                    since, self.opts.too_large_rv_wait):
                raise RVTooLarge(since, self.store.rv)
        info = RequestInfo(request.method, request.path, request.get(_http.USER), True)
        opts = WatchOptions(
            bookmarks=bookmarks,
            timeout=timeout,
            initial_events_end=send_initial and self.opts.watch_list,
            bookmark_interval=self.opts.bookmark_interval,
            bookmark_lead=self.opts.bookmark_lead,
            initial_events_end_delay=self.opts.initial_events_end_delay,
            render=render,
            convert=self._watch_converter(rt),
        )
        try:
            sub = self.store.subscribe(rt, ns, match, since=since)
        except RVTooLarge:
            raise
        except StoreError as exc:
            if exc.code != 410:
                raise
            # too old: HTTP 200, then one ERROR event, then the end (file 062)
            dummy = OpenWatch(request, self.store.subscribe(rt, ns, match, since=None), info)
            dummy.sub.close()
            return await WatchStream(request, dummy, opts, self.faults,
                                     self.stopping).error_and_close(exc.status)
        watch = OpenWatch(request, sub, info)
        self.watches.add(watch)
        try:
            return await WatchStream(request, watch, opts, self.faults, self.stopping).run()
        finally:
            self.watches.discard(watch)

    def _watch_converter(self, rt: ResourceType) -> Callable[[JSON], Awaitable[JSON | None]] | None:
        """Each event's object through the webhook; None drops an event it cannot convert,
        as kube-apiserver's watch cache leaves out what it cannot convert (file 028)."""
        conv, converter = self._conversion(rt), self.converter
        if conv is None or converter is None:
            return None

        async def convert(obj: JSON) -> JSON | None:
            try:
                return await converter.convert(conv, obj, rt.group_version)
            except ConversionFailed:
                return None
        return convert

    # ---- writes ----------------------------------------------------------------------------

    async def _patch(
        self, request: web.Request, rt: ResourceType, ns: str, route: Route, dry_run: bool
    ) -> web.Response:
        raw = await self.read_body(request)
        ptype, body = _http.decode_patch_body(request, raw, rt.kind, rt.is_custom)
        q = request.query
        manager = request[_http.MANAGER]
        causes: list[JSON] = []
        if ptype == "apply":
            if not q.get("fieldManager"):
                causes.append(_status.cause(
                    "FieldValueRequired", "Required value: is required for apply patch",
                    "fieldManager"))
            manager = q.get("fieldManager", "")
        check = self._field_check(q, "PatchOptions", causes)
        if check.directive != "Ignore" and ptype != "apply":
            check.duplicates = _validation.duplicate_fields(raw)
        stored, current = await self._current(rt, ns, route.name, must_exist=ptype != "apply")
        commit = self._commit(rt, stored)
        codes: list[int] = []

        def patch(dry: bool, fc: _validation.FieldCheck) -> JSON:
            obj, code = self.registry.patch(
                rt, ns, route.name, ptype, clone(body), manager=manager,
                subresource=route.subresource, force=_http.query_bool(q, "force"), dry_run=dry,
                check=fc, current=current)
            codes.append(code)
            return obj

        if ptype == "apply" and not route.subresource \
                and self.store.peek(rt, ns, route.name) is None:  # an apply that creates
            obj = await self.writes.create(request, rt, ns, body, manager=manager,
                                           dry_run=dry_run, check=check, original=patch,
                                           commit=commit)
        else:
            obj = await self.writes.update(request, rt, ns, route.name, patch, manager=manager,
                                           subresource=route.subresource, dry_run=dry_run,
                                           check=check, commit=commit, current=current)
        return _warned(_http.json_response(obj, codes[-1]), check)

    async def _scale(self, request: web.Request, rt: ResourceType, ns: str, route: Route,
                     verb: str) -> web.Response:
        """GET, PUT or PATCH of a custom resource's /scale (an autoscaling/v1 Scale)."""
        if verb not in ("get", "update", "patch"):
            return _http.status_response(_status.status(
                405, "MethodNotAllowed",
                f'{verb} is not supported on resources of kind "{rt.plural}.{rt.group}"', {}))
        if verb == "get":
            return _http.json_response(self.registry.get_scale(rt, ns, route.name))
        dry_run = request.query.get("dryRun", "") == "All"
        raw = await self.read_body(request)
        if verb == "update":
            ptype, body = "", _http.decode_json(raw, "Scale")
        else:
            ptype, body = _http.decode_patch_body(request, raw, rt.kind, rt.is_custom)
            if ptype == "apply":  # the Scale's managed fields are not simulated
                raise StoreError(_status.unsupported_media_type(
                    ["application/json-patch+json", "application/merge-patch+json"]))
        return _http.json_response(self.registry.write_scale(
            rt, ns, route.name, ptype, body, manager=request[_http.MANAGER], dry_run=dry_run))

    async def _delete(
        self, request: web.Request, rt: ResourceType, ns: str, name: str, dry_run: bool
    ) -> web.Response:
        raw = await self.read_body(request)
        opts: JSON = {}
        if raw.strip():
            decoded = _http.decode_json(raw, "DeleteOptions")
            wrong = delete_options_error(decoded)
            if wrong is not None:
                raise StoreError(_status.internal(wrong))
            if isinstance(decoded, dict):
                opts = decoded
        pre = opts.get("preconditions") or {}
        q = request.query
        propagation = q.get("propagationPolicy") or opts.get("propagationPolicy") or ""
        dry_values = q.getall("dryRun", []) or [v for v in opts.get("dryRun") or [] if v]
        causes = []
        if propagation and propagation not in _PROPAGATION:  # ValidateDeleteOptions
            causes.append(_cause(
                "propagationPolicy", "FieldValueNotSupported",
                f'Unsupported value: {_status.go_quote(propagation)}: supported values: '
                '"Foreground", "Background", "Orphan", "nil"'))
        causes += dry_run_causes(dry_values)
        if causes:
            raise StoreError(_status.invalid_options("DeleteOptions", causes))
        dry = dry_run or "All" in dry_values
        stored = self.store.peek(rt, ns, name) if self._conversion(rt) is not None else None
        # what the webhooks see as oldObject: the stored object converted (recorded: issue 24
        # combined, file 007), converted only when a webhook may be called
        current = (await self._converted(rt, stored)
                   if stored is not None and self.writes.wanted(rt, "DELETE", "") else None)

        def delete() -> JSON:
            return self.registry.delete(
                rt, ns, name, uid=str(pre.get("uid") or ""),
                resource_version=str(pre.get("resourceVersion") or ""),
                propagation=str(propagation), dry_run=dry)

        body = await self.writes.delete(request, rt, ns, name, _admit.delete_options(opts, q),
                                        dry, delete, current=current)
        if stored is not None and body.get("kind") == rt.kind:  # the object, as stored
            body = await self._served(rt, {**body, "apiVersion": stored["apiVersion"]})
        return _http.json_response(body)

    async def _delete_collection(
        self, request: web.Request, rt: ResourceType, ns: str | None, dry_run: bool
    ) -> web.Response:
        q = request.query
        try:
            match = matcher(q.get("labelSelector", ""), q.get("fieldSelector", ""), rt.plural)
        except SelectorError as exc:
            raise StoreError(_status.bad_request(str(exc))) from None
        listed_at = self.store.rv  # the list the deletions came from (file 123)
        gone = self.registry.delete_collection(rt, ns, match, dry_run=dry_run)
        if self._conversion(rt) is not None:
            gone = [await self._converted(rt, i) for i in gone]
        items = [list_item(rt, i) for i in gone]
        return _http.json_response({"kind": rt.list_kind, "apiVersion": rt.group_version,
                                    "metadata": {"resourceVersion": str(listed_at)},
                                    "items": items})

    # ---- server-side control ---------------------------------------------------------------

    def _selected(self, path_prefix: str | None) -> list[OpenWatch]:
        return [w for w in self.watches
                if path_prefix is None or w.request.path.startswith(path_prefix)]

    def stop_all(self, path_prefix: str | None = None) -> None:
        """End every open watch (whose URL path starts with ``path_prefix``) cleanly."""
        for w in self._selected(path_prefix):
            w.sub.end()

    def reset_all(self, path_prefix: str | None = None) -> None:
        """Abort the connection of every open watch (whose path starts with ``path_prefix``)."""
        for w in self._selected(path_prefix):
            w.abort()
