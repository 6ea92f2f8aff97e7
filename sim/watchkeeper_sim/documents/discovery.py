"""Discovery documents (legacy and aggregated) the simulator serves, as pure functions.

kubectl and client-go decide what a cluster serves from these documents alone, so their shape
follows kube-apiserver 1.28 (tests/fixtures/apiserver-1.28, files 002-013 and 139) down to
key order and the headers that drive client caching. Nothing here does HTTP: each function takes
the served ``ResourceType``s and returns a dict, or a ``Document`` (status, body, headers) the
HTTP layer can send unchanged.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

import msgspec

from watchkeeper_sim.model import ResourceType

JSON = dict[str, Any]

DiscoveryFormat = Literal["aggregated-v2beta1", "legacy"]
Root = Literal["api", "apis"]

AGGREGATED_CONTENT_TYPE = (
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
)
# Legacy discovery (and most API responses) carry exactly these two headers (002-006).
LEGACY_HEADERS: dict[str, str] = {
    "Cache-Control": "no-cache, private",
    "Content-Type": "application/json",
}
# Verb order of a custom resource's discovery entry: apiextensions-apiserver lists them in
# this fixed order rather than sorted (139), and clients diff discovery documents verbatim.
_CRD_VERB_ORDER = ("delete", "deletecollection", "get", "list", "patch", "create", "update",
                   "watch")
_STATUS_VERBS = ["get", "patch", "update"]


@dataclass(frozen=True)
class Document:
    """A complete HTTP answer: the HTTP layer sends it as is (Date/Content-Length its own)."""

    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


def encode_json(obj: Any) -> bytes:
    """Compact JSON plus a newline, as kube-apiserver writes it for non-curl clients (127)."""
    return msgspec.json.encode(obj) + b"\n"


def legacy_document(obj: JSON) -> Document:
    """A legacy discovery answer: 200, JSON, ``Cache-Control: no-cache, private``."""
    return Document(200, encode_json(obj), dict(LEGACY_HEADERS))


# ---------------------------------------------------------------------------------------------
# Media ranges (shared with _table.py): a small Accept parser with goautoneg's ordering.


@dataclass(frozen=True)
class MediaRange:
    """One clause of an Accept header; ``params`` keys are lower-cased, ``q`` excluded."""

    type: str
    subtype: str
    params: dict[str, str]
    q: float


def media_ranges(accept: str | None) -> list[MediaRange]:
    """Parse Accept into clauses sorted like Go's goautoneg: by q, then specific before ``*``.

    The sort is stable, so clauses of equal rank keep the client's order, which is what decides
    between e.g. the v2beta1 aggregated clause and plain JSON in kubectl's header (007).
    """
    out: list[MediaRange] = []
    for clause in (accept or "").split(","):
        parts = [p.strip() for p in clause.split(";")]
        if not parts[0]:
            continue
        mtype, _, subtype = parts[0].lower().partition("/")
        params: dict[str, str] = {}
        q = 1.0
        for p in parts[1:]:
            key, _, value = p.partition("=")
            key, value = key.strip().lower(), value.strip().strip('"')
            if key == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
            elif key:
                params[key] = value
        out.append(MediaRange(mtype, subtype or "*", params, q))
    out.sort(key=lambda r: (-r.q, r.type == "*", r.subtype == "*"))
    return [r for r in out if r.q > 0]


def _is_json_like(r: MediaRange) -> bool:
    """True for ranges a plain JSON (or YAML) body satisfies: json, yaml, ``application/*``."""
    if r.type == "*":
        return True
    return r.type == "application" and r.subtype in ("json", "yaml", "*")


def negotiate_discovery(accept: str | None) -> DiscoveryFormat | None:
    """Which document ``/api`` or ``/apis`` answers for this Accept header; None means 406.

    kube-apiserver 1.28 serves aggregated discovery only as ``v2beta1``: a ``v=v2`` clause is
    skipped, so v2 alone is refused (010, 012), v2 + json falls back to legacy (011) and
    kubectl 1.30+'s v2, v2beta1, json list gets v2beta1 (013). Protobuf is never produced here,
    so a protobuf-only Accept is refused too.
    """
    if not (accept or "").strip():
        return "legacy"
    for r in media_ranges(accept):
        if "as" in r.params:
            if (
                r.params.get("as") == "APIGroupDiscoveryList"
                and r.params.get("g") == "apidiscovery.k8s.io"
                and r.params.get("v") == "v2beta1"
                and r.type == "application"
                and r.subtype == "json"
            ):
                return "aggregated-v2beta1"
            continue
        if _is_json_like(r):
            return "legacy"
    return None


def discovery_not_acceptable() -> JSON:
    """The 406 Status discovery sends (010, 012): no ``details``, unlike resource 406s."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "only the following media types are accepted: application/json, "
        "application/yaml, application/vnd.kubernetes.protobuf",
        "reason": "NotAcceptable",
        "code": 406,
    }


def discovery_etag(body: bytes) -> str:
    """Quoted upper-case SHA-512 of the body: the same form as the real Etag (007, 009)."""
    return '"' + hashlib.sha512(body).hexdigest().upper() + '"'


def etag_matches(if_none_match: str | None, etag: str) -> bool:
    """True when an If-None-Match header names ``etag`` (or ``*``), so 304 is the answer."""
    if not if_none_match:
        return False
    tags = [t.strip() for t in if_none_match.split(",")]
    bare = etag.strip('"')
    return any(t == "*" or t == etag or t.removeprefix("W/").strip('"') == bare for t in tags)


# ---------------------------------------------------------------------------------------------
# Ordering helpers


_KUBE_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Sort key for Kubernetes' version order: v2 > v1 > v1beta2 > v1beta1 > v1alpha1 > other.

    The first version of a group in this order is its preferredVersion, as in the apiserver.
    """
    m = _KUBE_VERSION.match(version)
    if not m:
        return (3, 0, 0, version)
    stage = {None: 0, "beta": 1, "alpha": 2}[m.group(2)]
    return (stage, -int(m.group(1)), -int(m.group(3) or 0), version)


def _unique(types: Iterable[ResourceType]) -> list[ResourceType]:
    """The types without duplicates (same group, version, plural), first one wins."""
    seen: set[tuple[str, str, str]] = set()
    out: list[ResourceType] = []
    for rt in types:
        key = (rt.group, rt.version, rt.plural)
        if key not in seen:
            seen.add(key)
            out.append(rt)
    return out


# The order kube-apiserver 1.28 lists its built-in groups in, by APIService priority (003,
# 008); groups it does not know (custom resources) follow in order of first appearance.
_GROUP_ORDER = (
    "", "apiregistration.k8s.io", "apps", "events.k8s.io", "authentication.k8s.io",
    "authorization.k8s.io", "autoscaling", "batch", "certificates.k8s.io", "networking.k8s.io",
    "policy", "rbac.authorization.k8s.io", "storage.k8s.io", "admissionregistration.k8s.io",
    "apiextensions.k8s.io", "scheduling.k8s.io", "coordination.k8s.io", "node.k8s.io",
    "discovery.k8s.io", "flowcontrol.apiserver.k8s.io",
)
_GROUP_RANK = {g: i for i, g in enumerate(_GROUP_ORDER)}

# Subresources the simulator serves besides status, as (group, plural) -> entries of
# (subresource, response group, response version, response kind or "" for the parent's kind,
# verbs); described as in 004 and 007.
_Sub = tuple[str, str, str, str, tuple[str, ...]]
_MORE_SUBRESOURCES: dict[tuple[str, str], tuple[_Sub, ...]] = {
    ("", "namespaces"): (("finalize", "", "", "", ("update",)),),
    ("", "serviceaccounts"): (
        ("token", "authentication.k8s.io", "v1", "TokenRequest", ("create",)),),
}


def group_versions(types: Iterable[ResourceType]) -> dict[str, list[str]]:
    """Group name -> its versions, preferred first; groups in order of first appearance.

    The core group is included under ``""``.
    """
    groups: dict[str, set[str]] = {}
    for rt in types:
        groups.setdefault(rt.group, set()).add(rt.version)
    ordered = sorted(groups, key=lambda g: _GROUP_RANK.get(g, len(_GROUP_RANK)))
    return {g: sorted(groups[g], key=version_priority) for g in ordered}


def _in_gv(types: Iterable[ResourceType], group: str, version: str) -> list[ResourceType]:
    """The types of one group/version, sorted by resource name like the apiserver lists them."""
    return sorted(
        (rt for rt in _unique(types) if rt.group == group and rt.version == version),
        key=lambda rt: rt.plural,
    )


# what discovery lists for a custom resource while its CRD is Terminating
_TERMINATING_VERBS = ("delete", "deletecollection", "get", "list", "watch")


def _verbs(rt: ResourceType) -> list[str]:
    """Verbs in the order the real server lists them: sorted, or the CRD order for CRs."""
    if rt.is_custom:
        rank = {v: i for i, v in enumerate(_CRD_VERB_ORDER)}
        verbs = [v for v in rt.verbs if v in _TERMINATING_VERBS] if rt.terminating else rt.verbs
        return sorted(verbs, key=lambda v: (rank.get(v, len(rank)), v))
    return list(rt.verbs)


def _singular(rt: ResourceType) -> str:
    return rt.singular or rt.kind.lower()


def storage_version_hash(rt: ResourceType) -> str:
    """The apiserver's storageVersionHash: base64 of the first 8 bytes of sha256("g/v/Kind").

    With the storage version equal to the served version this reproduces the reference values
    exactly (e.g. qFsyl6wFWjQ= for ConfigMap in 004, gIwvi5rymmg= for the Widget CRD in 139).
    """
    digest = hashlib.sha256(f"{rt.group}/{rt.version}/{rt.kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


# ---------------------------------------------------------------------------------------------
# Legacy discovery


def api_versions(server_address: str = "127.0.0.1:6443") -> JSON:
    """``GET /api``: APIVersions (002). Note: no apiVersion key, as on the wire."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _group_entry(group: str, versions: Sequence[str]) -> JSON:
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": entries, "preferredVersion": dict(entries[0])}


def api_group_list(types: Iterable[ResourceType]) -> JSON:
    """``GET /apis``: APIGroupList of every non-core group (003)."""
    groups = [
        _group_entry(g, vs) for g, vs in group_versions(types).items() if g
    ]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(types: Iterable[ResourceType], group: str) -> JSON | None:
    """``GET /apis/G``: APIGroup (006), or None when the group is not served (caller 404s)."""
    versions = group_versions(types).get(group)
    if not group or not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_entry(group, versions)}


def _resource_entry(rt: ResourceType) -> JSON:
    entry: JSON = {
        "name": rt.plural,
        "singularName": _singular(rt),
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": _verbs(rt),
    }
    if rt.short_names:
        entry["shortNames"] = list(rt.short_names)
    if rt.categories:
        entry["categories"] = list(rt.categories)
    if "watch" in rt.verbs:  # stored resources; virtual ones (reviews) have no hash
        entry["storageVersionHash"] = storage_version_hash(rt)
    return entry


def _status_entry(rt: ResourceType) -> JSON:
    return {
        "name": f"{rt.plural}/status",
        "singularName": "",
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": list(_STATUS_VERBS),
    }


def _subresources(rt: ResourceType) -> list[_Sub]:
    """Every served subresource of ``rt``, sorted by name as the apiserver lists them."""
    subs = list(_MORE_SUBRESOURCES.get((rt.group, rt.plural), ()))
    if rt.has_status:
        subs.append(("status", "", "", "", tuple(_STATUS_VERBS)))
    subs.sort()
    if rt.scale is not None:  # apiextensions lists it after status, unsorted
        subs.append(("scale", "autoscaling", "v1", "Scale", ("get", "patch", "update")))
    return subs


def _subresource_entries(rt: ResourceType) -> list[JSON]:
    out: list[JSON] = []
    for name, group, version, kind, verbs in _subresources(rt):
        if name == "status":
            out.append(_status_entry(rt))
            continue
        entry: JSON = {"name": f"{rt.plural}/{name}", "singularName": "",
                       "namespaced": rt.namespaced}
        if group:
            entry["group"], entry["version"] = group, version
        entry.update(kind=kind or rt.kind, verbs=list(verbs))
        out.append(entry)
    return out


def api_resource_list(types: Iterable[ResourceType], group: str, version: str) -> JSON | None:
    """``GET /api/v1`` or ``/apis/G/V``: APIResourceList (004, 005, 139); None if not served.

    Each resource with a status subresource is followed by its ``x/status`` entry. The core
    list has no apiVersion key while group lists do, exactly as kube-apiserver writes them.
    """
    selected = _in_gv(types, group, version)
    if not selected:
        return None
    resources: list[JSON] = []
    for rt in selected:
        resources.append(_resource_entry(rt))
        resources.extend(_subresource_entries(rt))
    body: JSON = {"kind": "APIResourceList"}
    if group:
        body["apiVersion"] = "v1"
    body["groupVersion"] = f"{group}/{version}" if group else version
    body["resources"] = resources
    return body


# ---------------------------------------------------------------------------------------------
# Aggregated discovery (apidiscovery.k8s.io/v2beta1)


def _response_kind(rt: ResourceType) -> JSON:
    # Built-ins leave group/version empty ("same as the enclosing group version", 007);
    # the CRD discovery controller fills them in for custom resources.
    if rt.is_custom:
        return {"group": rt.group, "version": rt.version, "kind": rt.kind}
    return {"group": "", "version": "", "kind": rt.kind}


def _aggregated_resource(rt: ResourceType) -> JSON:
    entry: JSON = {
        "resource": rt.plural,
        "responseKind": _response_kind(rt),
        "scope": "Namespaced" if rt.namespaced else "Cluster",
        "singularResource": _singular(rt),
        "verbs": _verbs(rt),
    }
    if rt.short_names:
        entry["shortNames"] = list(rt.short_names)
    if rt.categories:
        entry["categories"] = list(rt.categories)
    subs = _subresources(rt)
    if subs:
        entry["subresources"] = [
            {
                "subresource": name,
                "responseKind": {"group": group, "version": version, "kind": kind}
                if kind else _response_kind(rt),
                "verbs": list(verbs),
            }
            for name, group, version, kind, verbs in subs
        ]
    return entry


def _aggregated_versions(types: Sequence[ResourceType], group: str,
                         versions: Sequence[str]) -> list[JSON]:
    return [
        {
            "version": v,
            "resources": [_aggregated_resource(rt) for rt in _in_gv(types, group, v)],
            "freshness": "Current",
        }
        for v in versions
    ]


def aggregated_discovery(types: Iterable[ResourceType], root: Root) -> JSON:
    """APIGroupDiscoveryList v2beta1 for ``/api`` (core only, 007) or ``/apis`` (008).

    The core item's metadata has no name, only ``creationTimestamp: null``, as on the wire.
    """
    served = _unique(types)
    items: list[JSON] = []
    for group, versions in group_versions(served).items():
        if (root == "api") != (group == ""):
            continue
        metadata: JSON = {"name": group, "creationTimestamp": None} if group else {
            "creationTimestamp": None
        }
        items.append(
            {"metadata": metadata, "versions": _aggregated_versions(served, group, versions)}
        )
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2beta1",
        "metadata": {},
        "items": items,
    }


@lru_cache(maxsize=64)
def _aggregated_bytes(types: tuple[ResourceType, ...], root: Root) -> tuple[bytes, str]:
    """Encoded aggregated document and its Etag; every kubectl command fetches both roots."""
    body = encode_json(aggregated_discovery(types, root))
    return body, discovery_etag(body)


def discovery_response(
    types: Iterable[ResourceType],
    root: Root,
    accept: str | None,
    if_none_match: str | None = None,
    server_address: str = "127.0.0.1:6443",
) -> Document:
    """The complete answer to ``GET /api`` or ``GET /apis`` for this Accept / If-None-Match.

    Aggregated answers carry ``Cache-Control: public``, an Etag and ``Vary: Accept`` and turn
    into an empty 304 when If-None-Match names the current Etag (009); legacy answers are
    ``no-cache, private`` without Etag; an unusable Accept gets the discovery 406 (010).
    """
    fmt = negotiate_discovery(accept)
    if fmt is None:
        return Document(406, encode_json(discovery_not_acceptable()), dict(LEGACY_HEADERS))
    if fmt == "legacy":
        legacy = api_versions(server_address) if root == "api" else api_group_list(types)
        return legacy_document(legacy)
    body, etag = _aggregated_bytes(tuple(types), root)
    cache = {"Cache-Control": "public", "Etag": etag, "Vary": "Accept"}
    if etag_matches(if_none_match, etag):
        return Document(304, b"", cache)
    return Document(200, body, {**cache, "Content-Type": AGGREGATED_CONTENT_TYPE})
