"""``Warning: 299`` headers for deprecated API versions (135).

kube-apiserver adds one to every authorized request on a deprecated version: for built-in
versions from the API's lifecycle (introduced/deprecated/removed releases and a replacement),
for CustomResourceDefinition versions marked ``deprecated: true`` (their
``deprecationWarning``, or "<group>/<version> <Kind> is deprecated"). Clients such as kubectl
print these, so a client under test meets them as it would on a 1.28 cluster.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from watchkeeper_sim.model import ResourceType
from watchkeeper_sim.storage.resources import CRD_GROUP, FLOWCONTROL_GROUP
from watchkeeper_sim.storage.store import ObjectStore

DEPRECATION = web.RequestKey("wk_deprecation", str)  # the Warning value for this request

# (group, version) -> (deprecated in, removed in, replacement version) for 1.28's built-ins
BUILTIN: dict[tuple[str, str], tuple[str, str, str]] = {
    (FLOWCONTROL_GROUP, "v1beta2"): ("1.26", "1.29", "v1beta3"),
}


def warning_text(message: str) -> str:
    """A Warning header value: code 299, unknown agent, the quoted message (RFC 7234)."""
    escaped = message.replace("\\", "\\\\").replace('"', '\\"')
    return f'299 - "{escaped}"'


def _crd_warning(store: ObjectStore, rt: ResourceType) -> str | None:
    crds = store.lookup(CRD_GROUP, "v1", "customresourcedefinitions")
    crd = store.peek(crds, "", f"{rt.plural}.{rt.group}") if crds is not None else None
    versions: Any = ((crd or {}).get("spec") or {}).get("versions") or []
    for v in versions:
        if isinstance(v, dict) and v.get("name") == rt.version and v.get("deprecated"):
            custom = v.get("deprecationWarning")
            if isinstance(custom, str) and custom:
                return custom
            return f"{rt.group_version} {rt.kind} is deprecated"
    return None


def deprecation_warning(store: ObjectStore, rt: ResourceType) -> str | None:
    """The Warning header value for a request on ``rt``'s version, None when not deprecated."""
    if rt.is_custom:
        message = _crd_warning(store, rt)
        return warning_text(message) if message else None
    lifecycle = BUILTIN.get((rt.group, rt.version))
    if lifecycle is None:
        return None
    deprecated, removed, replacement = lifecycle
    return warning_text(
        f"{rt.group_version} {rt.kind} is deprecated in v{deprecated}+, unavailable in "
        f"v{removed}+; use {rt.group}/{replacement} {rt.kind}")


async def add_warning(request: web.Request, response: web.StreamResponse) -> None:
    """aiohttp on_response_prepare hook: headers of streams (watches) too, before they go."""
    value = request.get(DEPRECATION)
    if value:
        response.headers.add("Warning", value)
