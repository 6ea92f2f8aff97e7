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

from watchkeeper_sim import status as _status
from watchkeeper_sim.documents import protodecode as _protodecode
from watchkeeper_sim.documents.protodecode import ProtoError
from watchkeeper_sim.model import JSON
from watchkeeper_sim.storage.store import StoreError
from watchkeeper_sim.wire.reqlog import RequestRecord

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


MAX_DEPTH = 200
"""How deeply a request body may nest. kube-apiserver's JSON decoder stops at 10,000 levels
(Go encoding/json); the simulator's Python recursion (copying, field tracking, YAML output)
does not reach that far, so it answers a deeper body with the same 400 instead of a 500."""


class _BodyError(ValueError):
    """A decoded body the apiserver would refuse; the message is its parse error."""


def _unrecognized(kind: str, fmt: str, detail: str) -> StoreError:
    return StoreError(_status.bad_request(
        f"the object provided is unrecognized (must be of type {kind}): couldn't get "
        f"version/kind; {fmt} parse error: {detail}"))


def _check_depth(value: Any, depth: int = 0) -> None:
    if depth > MAX_DEPTH:
        raise _BodyError("exceeded max depth")
    if isinstance(value, dict):
        for v in value.values():
            if isinstance(v, (dict, list)):
                _check_depth(v, depth + 1)
    elif isinstance(value, list):
        for v in value:
            if isinstance(v, (dict, list)):
                _check_depth(v, depth + 1)


def decode_json(raw: bytes, kind: str) -> Any:
    """JSON body -> value; 400 with the apiserver's decode-error wording (file 092)."""
    try:
        value = msgspec.json.decode(raw)
        _check_depth(value)
        return value
    except (msgspec.DecodeError, RecursionError, _BodyError) as exc:
        text = raw.decode("utf-8", "replace")
        snippet = text[:30] + " ..." if len(text) > 30 else text
        if isinstance(exc, RecursionError):
            detail = "exceeded max depth"
        else:
            detail = "unexpected end of JSON input" if "truncated" in str(exc) else str(exc)
        raise _unrecognized(kind, "json", f"{detail} ({snippet})") from None


class _YamlLoader(yaml.SafeLoader):
    """YAML as sigs.k8s.io/yaml reads it for the apiserver: an unquoted date stays a string."""


_YamlLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _yaml_key(key: Any) -> str:
    """sigs.k8s.io/yaml's YAMLToJSON turns non-string map keys into strings."""
    if isinstance(key, str):
        return _yaml_str(key)
    if key is None:
        return "null"
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, (int, float)):
        return format(key, "g") if isinstance(key, float) else str(key)
    raise _BodyError(f"unsupported map key of type {type(key).__name__}")


def _yaml_str(text: str) -> str:
    # lone surrogates ("\ud800") cannot be encoded as UTF-8: Go decodes them as U+FFFD
    return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text) \
        if any("\ud800" <= c <= "\udfff" for c in text) else text


def _yaml_json(value: Any, depth: int, budget: list[int]) -> Any:
    """The JSON value YAMLToJSON makes of a loaded YAML document (keys as strings, no
    NaN/Inf); refuses cycles, nesting beyond MAX_DEPTH and alias expansion beyond
    ``budget`` nodes (go-yaml: "document contains excessive aliasing")."""
    budget[0] -= 1
    if budget[0] < 0:
        raise _BodyError("yaml: document contains excessive aliasing")
    if depth > MAX_DEPTH:
        raise _BodyError("exceeded max depth")
    if isinstance(value, dict):
        return {_yaml_key(k): _yaml_json(v, depth + 1, budget) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):  # !!set: a map of nulls
        return {_yaml_key(k): None for k in value}
    if isinstance(value, (list, tuple)):
        return [_yaml_json(v, depth + 1, budget) for v in value]
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        raise _BodyError(f"json: unsupported value: {value}")
    if isinstance(value, bytes):  # !!binary
        return value.decode("utf-8", "replace")
    if isinstance(value, str):
        return _yaml_str(value)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return str(value)


def decode_yaml(raw: bytes, kind: str) -> Any:
    try:
        loaded = yaml.load(raw.decode("utf-8"), Loader=_YamlLoader)  # a SafeLoader
        # without aliases a document has fewer nodes than bytes: more means alias expansion
        return _yaml_json(loaded, 0, [len(raw) + 1024])
    except (yaml.YAMLError, UnicodeDecodeError, RecursionError, _BodyError) as exc:
        detail = "exceeded max depth" if isinstance(exc, RecursionError) else str(exc)
        raise _unrecognized(kind, "yaml", detail) from None


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
