"""HTTP plumbing shared by the handlers: URL parsing, body decoding, JSON responses.

``parse_path`` mirrors apiserver's RequestInfoFactory, so authorization sees the same
attributes (verb, resource, namespace, name, subresource) a real cluster would.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from typing import Any

import msgspec
import yaml
from aiohttp import web

from watchkeeper.testing import _protodecode, _status
from watchkeeper.testing._protodecode import ProtoError
from watchkeeper.testing._reqlog import RequestRecord
from watchkeeper.testing._store import JSON, StoreError

USER = web.RequestKey("wk_user", str)
MANAGER = web.RequestKey("wk_manager", str)
RECORD = web.RequestKey("wk_record", RequestRecord)
BASE_HEADERS = {"Cache-Control": "no-cache, private"}
NAMESPACE_SUBRESOURCES = ("status", "finalize")
GZIP_THRESHOLD = 128 * 1024  # apiserver's defaultGzipThresholdBytes (022 vs 023, 024)
GZIP_LEVEL = 1  # defaultGzipContentEncodingLevel


def query_bool(query: Any, name: str) -> bool:
    """A boolean query parameter (watch, allowWatchBookmarks, sendInitialEvents, force) as
    the apiserver's parameter codec reads it (apimachinery Convert_Slice_string_To_bool):
    absent is false; "0" and any casing of "false" are false; anything else, even "yes",
    "on" or an empty value, is true. Never a 400: it is not strconv.ParseBool."""
    values = query.getall(name, []) if hasattr(query, "getall") else (
        [query[name]] if name in query else [])
    return bool(values) and param_true(str(values[0]))


def param_true(value: str) -> bool:
    """One present boolean query value, read as ``query_bool`` reads it."""
    return not (value == "0" or value.casefold() == "false")


@dataclass(frozen=True)
class Route:
    """A resource request's coordinates, before knowing whether the resource exists."""

    api_prefix: str  # "api" or "apis"
    group: str
    version: str
    resource: str
    namespace: str = ""
    name: str = ""
    subresource: str = ""
    watch_prefix: bool = False  # the deprecated /watch/ path form
    namespaced_path: bool = False  # the URL carried /namespaces/{ns}/ for this resource


def parse_path(path: str) -> Route | None:
    """A Route for /api/v1/... or /apis/G/V/... resource paths; None for anything else."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        prefix, group, version, rest = "api", "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        prefix, group, version, rest = "apis", parts[1], parts[2], parts[3:]
    else:
        return None
    watch = False
    if rest and rest[0] == "watch":
        watch, rest = True, rest[1:]
    if not rest:
        return None
    namespace = ""
    namespaced_path = False
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
            namespaced_path = True
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    sub = "/".join(rest[2:])
    return Route(prefix, group, version, resource, namespace, name, sub, watch, namespaced_path)


def verb_of(method: str, route: Route, query: Any) -> str:
    """The Kubernetes verb of a request (what RBAC authorizes)."""
    if method in ("GET", "HEAD"):
        if route.watch_prefix or (not route.name and query_bool(query, "watch")):
            return "watch"
        return "get" if route.name else "list"
    if method == "POST":
        return "create"
    if method == "PUT":
        return "update"
    if method == "PATCH":
        return "patch"
    if method == "DELETE":
        return "delete" if route.name else "deletecollection"
    return method.lower()


def encode(body: Any) -> bytes:
    return msgspec.json.encode(body) + b"\n"


def json_response(
    body: Any, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    """Compact JSON + newline, as kube-apiserver answers non-curl clients (file 127)."""
    return web.Response(
        body=encode(body),
        status=status,
        content_type="application/json",
        headers={**BASE_HEADERS, **(headers or {})},
    )


def status_response(st: JSON, headers: dict[str, str] | None = None) -> web.Response:
    return json_response(st, int(st.get("code", 200)), headers)


def forbidden_response(st: JSON) -> web.Response:
    """The authorization filter's 403 (responsewriters.Forbidden) also sets nosniff (056,
    074-080, 130, 131); an admission 403 (169) does not."""
    return status_response(st, {"X-Content-Type-Options": "nosniff"})


def error_response(exc: StoreError) -> web.Response:
    return status_response(exc.status, exc.headers)


def text_response(text: str, status: int, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        text=text,
        status=status,
        content_type="text/plain",
        charset="utf-8",
        headers={**BASE_HEADERS, "X-Content-Type-Options": "nosniff", **(headers or {})},
    )


def accepts_gzip(request: web.Request) -> bool:
    return any(part.split(";")[0].strip().lower() == "gzip"
               for part in request.headers.get("Accept-Encoding", "").split(","))


def compress(request: web.Request, resp: web.StreamResponse) -> None:
    """gzip a whole response body over 128 KiB for a client that accepts gzip (Go clients
    always do), with ``Vary: Accept-Encoding``; smaller bodies and streams go as they are."""
    if not isinstance(resp, web.Response) or not isinstance(resp.body, bytes) \
            or len(resp.body) <= GZIP_THRESHOLD or "Content-Encoding" in resp.headers \
            or not accepts_gzip(request):
        return
    resp.body = gzip.compress(resp.body, compresslevel=GZIP_LEVEL)
    resp.headers["Content-Encoding"] = "gzip"
    vary = resp.headers.get("Vary")
    resp.headers["Vary"] = f"{vary}, Accept-Encoding" if vary else "Accept-Encoding"


def page_not_found() -> web.Response:
    """The Go mux's plain-text 404 for paths outside any served group (files 083, 155)."""
    return text_response("404 page not found\n", 404)


def media_type(request: web.Request) -> str:
    raw = request.headers.get("Content-Type", "")
    return raw.split(";")[0].strip().lower()


def decode_json(raw: bytes, kind: str) -> Any:
    """JSON body -> value; 400 with the apiserver's decode-error wording (file 092)."""
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        text = raw.decode("utf-8", "replace")
        snippet = text[:30] + " ..." if len(text) > 30 else text
        detail = "unexpected end of JSON input" if "truncated" in str(exc) else str(exc)
        raise StoreError(_status.bad_request(
            f"the object provided is unrecognized (must be of type {kind}): couldn't get "
            f"version/kind; json parse error: {detail} ({snippet})")) from None


def decode_yaml(raw: bytes, kind: str) -> Any:
    try:
        return yaml.safe_load(raw.decode("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise StoreError(_status.bad_request(
            f"the object provided is unrecognized (must be of type {kind}): "
            f"couldn't get version/kind; yaml parse error: {exc}")) from None


WRITE_TYPES = ("application/json", "application/yaml", "application/vnd.kubernetes.protobuf")
PATCH_TYPES = {
    "application/merge-patch+json": "merge",
    "application/json-patch+json": "json",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
}
CUSTOM_PATCH_TYPES = [
    "application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"
]


def decode_write_body(request: web.Request, raw: bytes, kind: str) -> Any:
    """POST/PUT body: JSON or YAML; 415 for anything else (file 093)."""
    mt = media_type(request)
    if mt in ("", "application/json", "application/octet-stream"):
        return decode_json(raw, kind)
    if mt == "application/yaml":
        return decode_yaml(raw, kind)
    if mt == "application/vnd.kubernetes.protobuf":
        try:  # what typed clients (kubectl create rolebinding, ...) send
            return _protodecode.decode(raw)
        except ProtoError:
            pass
    raise StoreError(_status.unsupported_media_type(list(WRITE_TYPES)))


def decode_patch_body(request: web.Request, raw: bytes, kind: str, custom: bool) -> tuple[str, Any]:
    """(patch type, parsed body) by Content-Type; 415 like files 094, 095, 145."""
    mt = media_type(request)
    ptype = PATCH_TYPES.get(mt)
    if ptype is None:
        raise StoreError(_status.unsupported_media_type())
    if ptype == "strategic" and custom:
        raise StoreError(_status.unsupported_media_type(CUSTOM_PATCH_TYPES))
    if ptype == "apply":
        return ptype, decode_yaml(raw, kind)
    return ptype, decode_json(raw, kind)
