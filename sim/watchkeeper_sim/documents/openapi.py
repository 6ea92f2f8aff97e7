"""A minimal OpenAPI surface, enough for kubectl's writes (DESIGN.md section 7).

Before ``create -f`` / ``apply`` kubectl asks the OpenAPI v3 document of the object's
group/version whether the PATCH operation of that kind declares the ``fieldValidation`` query
parameter (cli-runtime's queryParamVerifierV3). If it does, validation is left to the server;
if the kind has no PATCH operation there, kubectl falls back to client-side validation with
OpenAPI v2 schemas, which we do not describe, and the command fails. So every served kind gets
collection/item/status paths whose write operations declare fieldValidation, tagged with
``x-kubernetes-group-version-kind``, plus a schema per kind carrying the same extension.

Strategic merge patch: client-side ``apply`` computes an SMP from OpenAPI schemas only when
they describe the kind (v3: the PATCH operation lists ``application/strategic-merge-patch+json``;
v2: a definition with the GVK). We do neither, so kubectl uses its compiled-in Go types, which
know the real patch strategies of built-ins, and sends a JSON merge patch for custom resources,
which it does not know. That keeps the schemas minimal yet correct; a partial schema would make
kubectl compute wrong patches or print warnings.

OpenAPI v2: kubectl 1.27 and 1.28 load ``/openapi/v2`` (protobuf) before every ``apply`` and
abort on a 404 (1.29+ no longer do), so an empty but valid v2 document is served.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

import msgspec

from watchkeeper_sim.documents.discovery import (
    Document,
    etag_matches,
    group_versions,
    media_ranges,
)
from watchkeeper_sim.documents.schemas import REAL_SCHEMAS
from watchkeeper_sim.model import ResourceType

JSON = dict[str, Any]

SERVER_VERSION = "v1.28.7"
_META = "io.k8s.apimachinery.pkg.apis.meta.v1"
_PATCH_TYPES = (
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
)


# ---------------------------------------------------------------------------------------------
# Names


def gv_path(group: str, version: str) -> str:
    """The index key of a group/version: ``api/v1`` or ``apis/G/V`` (018)."""
    return f"apis/{group}/{version}" if group else f"api/{version}"


def parse_gv_path(path: str) -> tuple[str, str] | None:
    """Inverse of ``gv_path`` for the tail of ``/openapi/v3/<path>``; None if malformed."""
    parts = path.strip("/").split("/")
    if len(parts) == 2 and parts[0] == "api":
        return "", parts[1]
    if len(parts) == 3 and parts[0] == "apis" and parts[1] and parts[2]:
        return parts[1], parts[2]
    return None


def schema_name(group: str, version: str, kind: str, custom: bool = False) -> str:
    """The components.schemas key, following the apiserver's naming (019, CRDs reversed)."""
    if custom:
        return ".".join([*reversed(group.split(".")), version, kind])
    if group == "":
        package = "io.k8s.api.core"
    elif group == "apiextensions.k8s.io":
        package = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions"
    elif group == "apiregistration.k8s.io":
        package = "io.k8s.kube-aggregator.pkg.apis.apiregistration"
    else:
        package = "io.k8s.api." + group.split(".")[0]
    return f"{package}.{version}.{kind}"


def _group_words(group: str) -> list[str]:
    words = group.removesuffix(".k8s.io").replace("-", ".").split(".") if group else ["core"]
    return [w for w in words if w]


def _op_prefix(group: str, version: str) -> str:
    """operationId infix such as ``CoreV1``, ``AppsV1``, ``RbacAuthorizationV1``."""
    return "".join(w[:1].upper() + w[1:] for w in _group_words(group)) + version.capitalize()


def _tag(group: str, version: str) -> str:
    """Operation tag such as ``core_v1`` or ``rbacAuthorization_v1``, as the apiserver's."""
    camel = _op_prefix(group, "")
    return f"{camel[:1].lower()}{camel[1:]}_{version}"


def _ref(name: str) -> JSON:
    return {"$ref": f"#/components/schemas/{name}"}


# ---------------------------------------------------------------------------------------------
# Operations


def _query(name: str, description: str, type_: str = "string") -> JSON:
    return {
        "name": name,
        "in": "query",
        "description": description,
        "schema": {"type": type_, "uniqueItems": True},
    }


_DRY_RUN = _query("dryRun", "When present, modifications are not persisted (All).")
_FIELD_MANAGER = _query("fieldManager", "Name of the actor making the change.")
_FIELD_VALIDATION = _query(
    "fieldValidation",
    "How to treat unknown or duplicate fields in the body: Ignore, Warn (default) or Strict.",
)
_FORCE = _query("force", "Apply only: take ownership of conflicting fields.", "boolean")
_PRETTY = _query("pretty", "If 'true', the output is pretty printed.")


def _path_param(name: str) -> JSON:
    return {
        "name": name,
        "in": "path",
        "description": f"{name} of the object",
        "required": True,
        "schema": {"type": "string", "uniqueItems": True},
    }


def _json_content(schema: JSON) -> JSON:
    return {"application/json": {"schema": schema}}


def _operation(
    rt: ResourceType,
    action: str,
    op_id: str,
    description: str,
    response: JSON,
    *,
    params: list[JSON] | None = None,
    body: JSON | None = None,
    created: bool = False,
) -> JSON:
    op: JSON = {
        "tags": [_tag(rt.group, rt.version)],
        "description": description,
        "operationId": op_id,
    }
    if params:
        op["parameters"] = params
    if body is not None:
        op["requestBody"] = {"content": body, "required": True}
    responses: JSON = {"200": {"description": "OK", "content": _json_content(response)}}
    if created:
        responses["201"] = {"description": "Created", "content": _json_content(response)}
    responses["401"] = {"description": "Unauthorized"}
    op["responses"] = responses
    op["x-kubernetes-action"] = action
    op["x-kubernetes-group-version-kind"] = {
        "group": rt.group,
        "kind": rt.kind,
        "version": rt.version,
    }
    return op


def _paths_for(rt: ResourceType) -> dict[str, JSON]:
    """Collection, item and status paths of one resource, limited to its verbs."""
    base = f"/apis/{rt.group}/{rt.version}" if rt.group else f"/api/{rt.version}"
    scope = "/namespaces/{namespace}" if rt.namespaced else ""
    collection = f"{base}{scope}/{rt.plural}"
    item = collection + "/{name}"
    prefix = _op_prefix(rt.group, rt.version)
    ns_word = "Namespaced" if rt.namespaced else ""
    kind_ref = _ref(schema_name(rt.group, rt.version, rt.kind, rt.is_custom))
    list_ref = _ref(schema_name(rt.group, rt.version, rt.list_kind, rt.is_custom))
    writes = [_DRY_RUN, _FIELD_MANAGER, _FIELD_VALIDATION]
    patch_body = {t: {"schema": _ref(f"{_META}.Patch")} for t in _PATCH_TYPES}
    verbs = set(rt.verbs)
    paths: dict[str, JSON] = {}

    def entry(path: str, names: list[str]) -> JSON:
        return paths.setdefault(
            path, {"parameters": [*(_path_param(n) for n in names), _PRETTY]}
        )

    coll_params = ["namespace"] if rt.namespaced else []
    item_params = ["name", *coll_params]
    if verbs & {"list", "create", "deletecollection"}:
        coll = entry(collection, coll_params)
        if "list" in verbs:
            coll["get"] = _operation(rt, "list", f"list{prefix}{ns_word}{rt.kind}",
                                     f"list or watch objects of kind {rt.kind}", list_ref)
        if "create" in verbs:
            coll["post"] = _operation(rt, "post", f"create{prefix}{ns_word}{rt.kind}",
                                      f"create a {rt.kind}", kind_ref, params=writes,
                                      body={"*/*": {"schema": kind_ref}}, created=True)
        if "deletecollection" in verbs:
            coll["delete"] = _operation(rt, "deletecollection",
                                        f"deleteCollection{prefix}{ns_word}{rt.kind}",
                                        f"delete collection of {rt.kind}",
                                        _ref(f"{_META}.Status"))
    if rt.namespaced and "list" in verbs:
        every = entry(f"{base}/{rt.plural}", [])
        every["get"] = _operation(rt, "list", f"list{prefix}{rt.kind}ForAllNamespaces",
                                  f"list or watch objects of kind {rt.kind}", list_ref)
    if verbs & {"get", "update", "patch", "delete"}:
        one = entry(item, item_params)
        if "get" in verbs:
            one["get"] = _operation(rt, "get", f"read{prefix}{ns_word}{rt.kind}",
                                    f"read the specified {rt.kind}", kind_ref)
        if "update" in verbs:
            one["put"] = _operation(rt, "put", f"replace{prefix}{ns_word}{rt.kind}",
                                    f"replace the specified {rt.kind}", kind_ref,
                                    params=writes, body={"*/*": {"schema": kind_ref}},
                                    created=True)
        if "patch" in verbs:
            one["patch"] = _operation(rt, "patch", f"patch{prefix}{ns_word}{rt.kind}",
                                      f"partially update the specified {rt.kind}", kind_ref,
                                      params=[*writes, _FORCE], body=patch_body, created=True)
        if "delete" in verbs:
            one["delete"] = _operation(rt, "delete", f"delete{prefix}{ns_word}{rt.kind}",
                                       f"delete a {rt.kind}", _ref(f"{_META}.Status"))
    if rt.has_status:
        status = entry(item + "/status", item_params)
        status["get"] = _operation(rt, "get", f"read{prefix}{ns_word}{rt.kind}Status",
                                   f"read status of the specified {rt.kind}", kind_ref)
        status["put"] = _operation(rt, "put", f"replace{prefix}{ns_word}{rt.kind}Status",
                                   f"replace status of the specified {rt.kind}", kind_ref,
                                   params=writes, body={"*/*": {"schema": kind_ref}},
                                   created=True)
        status["patch"] = _operation(rt, "patch", f"patch{prefix}{ns_word}{rt.kind}Status",
                                     f"partially update status of the specified {rt.kind}",
                                     kind_ref, params=[*writes, _FORCE], body=patch_body,
                                     created=True)
    return paths


# ---------------------------------------------------------------------------------------------
# Schemas


def _gvk_ext(group: str, version: str, kind: str) -> list[JSON]:
    return [{"group": group, "kind": kind, "version": version}]


_COMMON_PROPS: JSON = {
    "apiVersion": {"description": "Versioned schema of this representation.", "type": "string"},
    "kind": {"description": "The REST resource this object represents.", "type": "string"},
}


def _kind_schemas(rt: ResourceType) -> dict[str, JSON]:
    name = schema_name(rt.group, rt.version, rt.kind, rt.is_custom)
    list_name = schema_name(rt.group, rt.version, rt.list_kind, rt.is_custom)
    real = REAL_SCHEMAS.get(name)
    return {
        name: copy.deepcopy(real) if real is not None else {
            "description": f"{rt.kind} (schema kept minimal by the simulator: the server "
            "validates, unknown fields are accepted here).",
            "type": "object",
            "properties": {
                **_COMMON_PROPS,
                "metadata": {"default": {}, "allOf": [_ref(f"{_META}.ObjectMeta")]},
            },
            "x-kubernetes-preserve-unknown-fields": True,
            "x-kubernetes-group-version-kind": _gvk_ext(rt.group, rt.version, rt.kind),
        },
        list_name: {
            "description": f"A list of {rt.kind} objects.",
            "type": "object",
            "required": ["items"],
            "properties": {
                **_COMMON_PROPS,
                "items": {"type": "array", "items": _ref(name)},
                "metadata": {"default": {}, "allOf": [_ref(f"{_META}.ListMeta")]},
            },
            "x-kubernetes-group-version-kind": _gvk_ext(rt.group, rt.version, rt.list_kind),
        },
    }


def _meta_schemas() -> dict[str, JSON]:
    string_map = {"type": "object", "additionalProperties": {"type": "string", "default": ""}}
    return {
        f"{_META}.ObjectMeta": {
            "description": "Metadata every persisted resource has.",
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "generateName": {"type": "string"},
                "namespace": {"type": "string"},
                "uid": {"type": "string"},
                "resourceVersion": {"type": "string"},
                "generation": {"type": "integer", "format": "int64"},
                "creationTimestamp": {"type": "string", "format": "date-time"},
                "deletionTimestamp": {"type": "string", "format": "date-time"},
                "labels": string_map,
                "annotations": string_map,
                "finalizers": {"type": "array", "items": {"type": "string", "default": ""},
                               "x-kubernetes-patch-strategy": "merge"},
            },
            "x-kubernetes-preserve-unknown-fields": True,
        },
        f"{_META}.ListMeta": {
            "description": "Metadata of a list: resourceVersion and paging.",
            "type": "object",
            "properties": {
                "resourceVersion": {"type": "string"},
                "continue": {"type": "string"},
                "remainingItemCount": {"type": "integer", "format": "int64"},
            },
        },
        f"{_META}.Patch": {
            "description": "A patch body; its format is given by the Content-Type.",
            "type": "object",
        },
        f"{_META}.Status": {
            "description": "The result of an operation that returns no object.",
            "type": "object",
            "properties": {
                **_COMMON_PROPS,
                "status": {"type": "string"},
                "message": {"type": "string"},
                "reason": {"type": "string"},
                "code": {"type": "integer", "format": "int32"},
                "details": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        },
    }


# ---------------------------------------------------------------------------------------------
# Documents


def openapi_v3_document(
    types: Iterable[ResourceType], group: str, version: str
) -> JSON | None:
    """The OpenAPI v3 document of one served group/version, or None if it is not served."""
    selected = sorted(
        (rt for rt in types if rt.group == group and rt.version == version),
        key=lambda rt: rt.plural,
    )
    if not selected:
        return None
    paths: dict[str, JSON] = {}
    schemas: dict[str, JSON] = {}
    for rt in selected:
        for path, item in _paths_for(rt).items():
            paths.setdefault(path, {}).update(item)
        schemas.update(_kind_schemas(rt))
    schemas.update(_meta_schemas())
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": SERVER_VERSION},
        "paths": dict(sorted(paths.items())),
        "components": {
            "schemas": dict(sorted(schemas.items())),
            "securitySchemes": {
                "BearerToken": {
                    "type": "apiKey",
                    "description": "Bearer Token authentication",
                    "name": "authorization",
                    "in": "header",
                }
            },
        },
    }


def _hash(body: bytes) -> str:
    """Upper-case SHA-512 hex: the form of the real ``?hash=`` values and Etags (018, 019)."""
    return hashlib.sha512(body).hexdigest().upper()


def _encode(doc: Any) -> bytes:
    """json.Marshal: compact and, unlike the negotiated encoder, no trailing newline (018)."""
    return msgspec.json.encode(doc)


@lru_cache(maxsize=256)
def _encoded(types: tuple[ResourceType, ...], group: str,
             version: str) -> tuple[bytes, str] | None:
    """Body bytes and hash of one document; cached because kubectl fetches it per command."""
    doc = openapi_v3_document(types, group, version)
    if doc is None:
        return None
    body = _encode(doc)
    return body, _hash(body)


def openapi_v3_hash(types: Iterable[ResourceType], group: str, version: str) -> str | None:
    """The current hash of a group/version document (changes only when its types change)."""
    encoded = _encoded(tuple(types), group, version)
    return encoded[1] if encoded else None


def openapi_v3_index(types: Iterable[ResourceType]) -> JSON:
    """``GET /openapi/v3``: each served group/version -> its hashed serverRelativeURL (018)."""
    served = tuple(types)
    paths: JSON = {}
    for group, versions in group_versions(served).items():
        for version in versions:
            key = gv_path(group, version)
            paths[key] = {
                "serverRelativeURL": f"/openapi/v3/{key}?hash="
                f"{openapi_v3_hash(served, group, version)}"
            }
    return {"paths": dict(sorted(paths.items()))}


# The documents are written by http.ServeContent, which adds these two (018, 019, 021);
# Last-Modified is when the document was built: here, when the simulator module loaded.
_SERVED = {"Accept-Ranges": "bytes",
           "Last-Modified": datetime.now(UTC).strftime("%a, %d %b %Y %H:%M:%S GMT")}


def openapi_v3_index_response(types: Iterable[ResourceType]) -> Document:
    """The index answer: a JSON body served as ``text/plain; charset=utf-8`` like 018."""
    return Document(
        200,
        _encode(openapi_v3_index(types)),
        {**_SERVED, "Cache-Control": "no-cache, private",
         "Content-Type": "text/plain; charset=utf-8"},
    )


def _http_date(moment: datetime) -> str:
    """RFC 1123 with a literal ``UTC`` zone, the way Go formats the Expires header (019)."""
    return moment.astimezone(UTC).strftime("%a, %d %b %Y %H:%M:%S UTC")


def openapi_v3_response(
    types: Iterable[ResourceType],
    path: str,
    query_hash: str | None = None,
    accept: str | None = None,
    if_none_match: str | None = None,
    now: datetime | None = None,
) -> Document:
    """The answer to ``GET /openapi/v3/<path>[?hash=H]`` (019, 020).

    Matching hash: 200 with ``Cache-Control: public, immutable`` and a one-year Expires, so
    kubectl's disk cache keeps it; stale hash: 301 to the current URL; no hash: 200 uncached.
    A matching If-None-Match gives 304. Unknown path: plain-text 404; non-JSON Accept: 406.
    """
    gv = parse_gv_path(path)
    encoded = _encoded(tuple(types), *gv) if gv else None
    if gv is None or encoded is None:
        return openapi_not_found()
    body, digest = encoded
    if accept and not any(
        r.type in ("application", "*") and r.subtype in ("json", "*")
        for r in media_ranges(accept)
    ):
        return Document(406, b"", {"Cache-Control": "no-cache, private", "Vary": "Accept"})
    etag = f'"{digest}"'
    headers = {
        "Cache-Control": "no-cache, private",
        "Content-Type": "application/json",
        "Etag": etag,
        "Vary": "Accept",
    }
    if query_hash is not None and query_hash != digest:
        location = f"/openapi/v3/{gv_path(*gv)}?hash={digest}"
        return Document(301, b"", {**headers, "Location": location})
    if query_hash is not None:
        expires = (now or datetime.now(UTC)) + timedelta(days=365)
        headers["Cache-Control"] = "public, immutable"
        headers["Expires"] = _http_date(expires)
    if etag_matches(if_none_match, etag):
        return Document(304, b"", {k: v for k, v in headers.items() if k != "Content-Type"})
    return Document(200, body, {**_SERVED, **headers})


def _proto_field(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field (wire type 2): tag, varint length, payload."""
    out = bytearray([number << 3 | 2])
    n = len(payload)
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out) + payload


# gnostic openapi_v2.Document: swagger = 1, info = 2 (title = 1, version = 2), paths = 8.
# The same leading bytes as the real document (kubectl-logs/03), with no paths/definitions.
_V2_PROTOBUF = (
    _proto_field(1, b"2.0")
    + _proto_field(2, _proto_field(1, b"Kubernetes") + _proto_field(2, SERVER_VERSION.encode()))
    + _proto_field(8, b"")
)
_V2_JSON = {"swagger": "2.0", "info": {"title": "Kubernetes", "version": SERVER_VERSION},
            "paths": {}}
V2_PROTOBUF_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"


def openapi_v2_response(accept: str | None = None) -> Document:
    """``GET /openapi/v2``: an empty but valid OpenAPI v2 document (021).

    kubectl 1.27/1.28 load it (in protobuf) before every ``apply`` and abort on a 404, and
    gcloud's kubectl dispatcher runs kubectl.1.28 against a server whose /version says 1.28.
    An empty document is enough: without definitions kubectl
    computes strategic merge patches from its compiled-in types for built-ins and JSON merge
    patches for custom resources, and it validates through OpenAPI v3 (fieldValidation).
    Protobuf when the Accept names it (kubectl always does), JSON otherwise.
    """
    protobuf = any("protobuf" in r.subtype for r in media_ranges(accept))
    body = _V2_PROTOBUF if protobuf else _encode(_V2_JSON)
    return Document(
        200,
        body,
        {
            **_SERVED,
            "Cache-Control": "no-cache, private",
            "Content-Type": V2_PROTOBUF_TYPE if protobuf else "application/json",
            "Etag": f'"{_hash(body)}"',
            "Vary": "Accept",
        },
    )


def openapi_not_found() -> Document:
    """The plain-text 404 of unknown OpenAPI paths (the apiserver's "404 page not found")."""
    return Document(
        404,
        b"404 page not found\n",
        {
            "Cache-Control": "no-cache, private",
            "Content-Type": "text/plain; charset=utf-8",
            "X-Content-Type-Options": "nosniff",
        },
    )
