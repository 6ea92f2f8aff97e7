"""Minimal legacy discovery (/api, /apis, /api/v1, /apis/G, /apis/G/V).

A stop-gap so clients can discover resources until ``_discovery.py`` (full legacy and
aggregated discovery, written separately) takes over; ``apiserver.py`` calls only
``legacy_document`` and can be pointed at the replacement in one place.
"""

from __future__ import annotations

from collections.abc import Iterable

from watchkeeper.testing._store import JSON, ResourceType


def _group_versions(types: Iterable[ResourceType]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for rt in types:
        versions = out.setdefault(rt.group, [])
        if rt.version not in versions:
            versions.append(rt.version)
    return out


def _group_entry(group: str, versions: list[str]) -> JSON:
    gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": gvs, "preferredVersion": gvs[0]}


def _resources(types: list[ResourceType]) -> list[JSON]:
    out: list[JSON] = []
    for rt in sorted(types, key=lambda t: t.plural):
        entry: JSON = {
            "name": rt.plural,
            "singularName": rt.singular or rt.kind.lower(),
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": list(rt.verbs),
        }
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        if rt.categories:
            entry["categories"] = list(rt.categories)
        out.append(entry)
        if rt.has_status:
            out.append({"name": f"{rt.plural}/status", "singularName": "",
                        "namespaced": rt.namespaced, "kind": rt.kind,
                        "verbs": ["get", "patch", "update"]})
    return out


def legacy_document(path: str, types: list[ResourceType], server_address: str) -> JSON | None:
    """The discovery document for ``path``, or None when the path is not a discovery path."""
    parts = [p for p in path.split("/") if p]
    groups = _group_versions(types)
    if parts == ["api"]:
        return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}
    if parts == ["apis"]:
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
            _group_entry(g, vs) for g, vs in sorted(groups.items()) if g]}
    if parts == ["api", "v1"]:
        return {"kind": "APIResourceList", "groupVersion": "v1",
                "resources": _resources([t for t in types if t.group == ""])}
    if len(parts) == 2 and parts[0] == "apis" and parts[1] in groups:
        return {"kind": "APIGroup", "apiVersion": "v1", **_group_entry(parts[1], groups[parts[1]])}
    if len(parts) == 3 and parts[0] == "apis" and parts[2] in groups.get(parts[1], []):
        return {"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": f"{parts[1]}/{parts[2]}",
                "resources": _resources([t for t in types
                                         if (t.group, t.version) == (parts[1], parts[2])])}
    return None
