"""The namespace controller's status conditions on a terminating namespace (file 171).

Before it removes a namespace, kube-controller-manager writes five deletion conditions to
its status (a MODIFIED event with a ``kube-controller-manager`` managedFields entry on the
status subresource), then finalizes it (DELETED). While content with finalizers remains,
``NamespaceContentRemaining`` and ``NamespaceFinalizersRemaining`` are True with the
controller's messages (pkg/controller/namespace/deletion/status_condition_utils.go).
"""

from __future__ import annotations

import json
from typing import Any

from watchkeeper_sim.storage.clone import clone

JSON = dict[str, Any]

_OK = (  # (type, reason, message) when nothing is left, in the controller's order
    ("NamespaceDeletionDiscoveryFailure", "ResourcesDiscovered",
     "All resources successfully discovered"),
    ("NamespaceDeletionGroupVersionParsingFailure", "ParsedGroupVersions",
     "All legacy kube types successfully parsed"),
    ("NamespaceDeletionContentFailure", "ContentDeleted",
     "All content successfully deleted, may be waiting on finalization"),
    ("NamespaceContentRemaining", "ContentRemoved", "All content successfully removed"),
    ("NamespaceFinalizersRemaining", "ContentHasNoFinalizers",
     "All content-preserving finalizers finished"),
)
_CONDITION_FIELDS = ("f:lastTransitionTime", "f:message", "f:reason", "f:status", "f:type")


def deletion_conditions(
    now: str,
    remaining: dict[str, int],
    finalizers: dict[str, int],
    previous: list[Any] | None = None,
) -> list[JSON]:
    """The five conditions; ``remaining`` counts objects per "plural.group", ``finalizers``
    per finalizer. A condition whose status is unchanged keeps its lastTransitionTime."""
    before = {c.get("type"): c for c in previous or [] if isinstance(c, dict)}
    out: list[JSON] = []
    for type_, reason, message in _OK:
        status = "False"
        if type_ == "NamespaceContentRemaining" and remaining:
            status, reason = "True", "SomeResourcesRemain"
            message = "Some resources are remaining: " + ", ".join(sorted(
                f"{res} has {n} resource instances" for res, n in remaining.items()))
        elif type_ == "NamespaceFinalizersRemaining" and finalizers:
            status, reason = "True", "SomeFinalizersRemain"
            message = "Some content in the namespace has finalizers remaining: " + ", ".join(
                sorted(f"{f} in {n} resource instances" for f, n in finalizers.items()))
        old = before.get(type_)
        since = old.get("lastTransitionTime", now) if old and old.get("status") == status else now
        out.append({"type": type_, "status": status, "lastTransitionTime": since,
                    "reason": reason, "message": message})
    return out


def same_conditions(a: list[Any] | None, b: list[Any] | None) -> bool:
    """Equal apart from lastTransitionTime (the controller writes only real changes)."""
    def strip(cs: list[Any] | None) -> list[Any]:
        return [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in cs or []]
    return strip(a) == strip(b)


def managed_entry(conditions: list[JSON], now: str) -> JSON:
    """kube-controller-manager's managedFields entry for the conditions it wrote."""
    items: JSON = {".": {}}
    for c in sorted(conditions, key=lambda c: str(c["type"])):
        key = "k:" + json.dumps({"type": c["type"]}, separators=(",", ":"))
        items[key] = {".": {}, **{f: {} for f in _CONDITION_FIELDS}}
    return {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
            "time": now, "fieldsType": "FieldsV1",
            "fieldsV1": {"f:status": {"f:conditions": items}}, "subresource": "status"}


def with_conditions(ns: JSON, conditions: list[JSON], now: str) -> JSON:
    """``ns`` (a copy) with these conditions and the controller's managedFields entry."""
    out = clone(ns)
    status = out.setdefault("status", {})
    status["conditions"] = conditions
    meta = out.setdefault("metadata", {})
    entries = [e for e in meta.get("managedFields") or []
               if not (e.get("manager") == "kube-controller-manager"
                       and e.get("subresource") == "status")]
    entries.append(managed_entry(conditions, now))
    meta["managedFields"] = entries
    return out
