"""Routing of the document endpoints: discovery (/api, /apis, ...) and OpenAPI (/openapi/...).

The documents themselves come from the pure functions in ``_discovery.py`` and ``_openapi.py``;
this module only maps a GET path and its headers onto them and turns their ``Document``
answers into aiohttp responses. ``serve_document`` returns None for paths it does not own, so
the caller can answer those itself (e.g. with the plain-text 404).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aiohttp import web

from watchkeeper_sim import status as _status
from watchkeeper_sim.documents.discovery import (
    Document,
    Root,
    api_group,
    api_resource_list,
    discovery_response,
    legacy_document,
)
from watchkeeper_sim.documents.openapi import (
    openapi_v2_response,
    openapi_v3_index_response,
    openapi_v3_response,
)
from watchkeeper_sim.model import ResourceType
from watchkeeper_sim.wire import http as _http

OPENAPI_V3 = "/openapi/v3"


def document_response(doc: Document) -> web.Response:
    """A ``Document`` sent as is: its status, its headers, its bytes (none for 301/304)."""
    resp = web.Response(status=doc.status, body=doc.body or None, headers=doc.headers)
    if not doc.body and "Content-Type" not in doc.headers:
        # aiohttp would otherwise announce application/octet-stream for an empty body
        resp.headers.pop("Content-Type", None)
    return resp


def _group_version(types: Sequence[ResourceType], group: str, version: str) -> web.Response:
    """``/api/v1`` or ``/apis/G/V``: APIResourceList, or the apiserver's two kinds of 404."""
    doc = api_resource_list(types, group, version)
    if doc is not None:
        return document_response(legacy_document(doc))
    if group and api_group(types, group) is not None:
        return _http.status_response(_status.resource_not_found())  # 084: known group
    return _http.page_not_found()  # 083: unknown group (and /api/<not v1>)


def _discovery(path: str, headers: Mapping[str, str], types: Sequence[ResourceType],
               server_address: str) -> web.Response | None:
    parts = [p for p in path.split("/") if p]
    if parts in (["api"], ["apis"]):
        root: Root = "api" if parts == ["api"] else "apis"
        return document_response(discovery_response(
            types, root, headers.get("Accept"), headers.get("If-None-Match"), server_address))
    if len(parts) == 2 and parts[0] == "api":
        return _group_version(types, "", parts[1])
    if len(parts) == 2 and parts[0] == "apis":
        group_doc = api_group(types, parts[1])
        if group_doc is None:
            return _http.page_not_found()
        return document_response(legacy_document(group_doc))
    if len(parts) == 3 and parts[0] == "apis":
        return _group_version(types, parts[1], parts[2])
    return None


def _openapi(path: str, headers: Mapping[str, str], query: Mapping[str, str],
             types: Sequence[ResourceType]) -> web.Response | None:
    if path == "/openapi/v2":
        resp = document_response(openapi_v2_response(headers.get("Accept")))
        # its handler sits behind a gzip wrapper, which names Accept-Encoding first (021)
        vary = resp.headers.popall("Vary", [])
        for value in ("Accept-Encoding", *vary):
            resp.headers.add("Vary", value)
        return resp
    if path == OPENAPI_V3:
        return document_response(openapi_v3_index_response(types))
    if path.startswith(OPENAPI_V3 + "/"):
        rest = path[len(OPENAPI_V3) + 1:]
        return document_response(openapi_v3_response(
            types, rest, query.get("hash"), headers.get("Accept"),
            headers.get("If-None-Match")))
    return None


def serve_document(request: web.Request, path: str, types: Sequence[ResourceType],
                   server_address: str) -> web.Response | None:
    """The answer to a GET of a discovery or OpenAPI path; None when ``path`` is neither.

    ``path`` is the request path without a trailing slash. Only GET and HEAD are served.
    """
    if request.method not in ("GET", "HEAD"):
        return None
    if path.startswith("/openapi/"):
        return _openapi(path, request.headers, request.query, types)
    if path == "/api" or path.startswith(("/api/", "/apis")):
        return _discovery(path, request.headers, types, server_address)
    return None
