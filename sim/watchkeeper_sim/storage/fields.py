"""managedFields bookkeeping and a simple server-side-apply ownership model.

The model (documented simplification of structured-merge-diff):
- A field path is a tuple of map keys down to a leaf; lists are atomic leaves, system
  metadata (uid, resourceVersion, ...) is never owned. Only when encoding are the elements
  of finalizers, ownerReferences and status.conditions named (``v:``/``k:`` keys).
- An Update by manager M takes ownership of every leaf it changed and removes it from the
  other managers; every manager loses the leaves the write removed (a path owned but never
  present, like the label a custom resource's /status ignores in 142, stays listed).
- An Apply by M owns exactly the leaves in its configuration. A leaf whose current value
  differs from the applied one and is owned by another manager is a conflict (409
  FieldManagerConflict) unless ``force``; then ownership moves to M. Leaves M applied before
  and no longer applies are removed from the object unless another manager owns them.
- managedFields sent by clients are ignored; the server's own record is kept.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from watchkeeper_sim.storage.clone import clone

JSON = dict[str, Any]
Path = tuple[str, ...]

_SYSTEM_META = {
    "name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
    "managedFields", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink",
}
_MISSING = object()
# struct (not pointer) fields below spec/status: always present, so never owned as a whole
# ("." absent), like CRD spec.names and status.acceptedNames (136, 137)
_VALUE_STRUCTS = {("spec", "names"), ("status", "acceptedNames")}


def leaves(obj: Any, prefix: Path = ()) -> set[Path]:
    """Every owned leaf path of an object (system metadata, kind and apiVersion excluded)."""
    out: set[Path] = set()
    if not isinstance(obj, dict):
        return out
    for key, value in obj.items():
        path = (*prefix, key)
        if not prefix and key in ("kind", "apiVersion"):
            continue
        if prefix == ("metadata",) and key in _SYSTEM_META:
            continue
        if isinstance(value, dict) and value:
            out |= leaves(value, path)
        else:
            out.add(path)
    return out


def value_at(obj: Any, path: Path) -> Any:
    cur = obj
    for key in path:
        if not isinstance(cur, dict) or key not in cur:
            return _MISSING
        cur = cur[key]
    return cur


def _delete_path(obj: JSON, path: Path) -> None:
    parents: list[tuple[JSON, str]] = []
    cur: Any = obj
    for key in path[:-1]:
        if not isinstance(cur, dict) or key not in cur:
            return
        parents.append((cur, key))
        cur = cur[key]
    if isinstance(cur, dict):
        cur.pop(path[-1], None)
    for parent, key in reversed(parents):  # prune maps left empty by the removal
        if parent[key] == {}:
            del parent[key]


def _merge(target: Any, config: Any) -> Any:
    if not isinstance(config, dict) or not isinstance(target, dict):
        return clone(config)
    out = dict(target)
    for key, value in config.items():
        out[key] = _merge(out.get(key), value)
    return out


@dataclass
class Entry:
    manager: str
    operation: str  # "Update" or "Apply"
    api_version: str
    time: str
    subresource: str = ""
    fields: set[Path] = field(default_factory=set)

    def to_json(self, custom: bool) -> JSON:
        out: JSON = {
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": encode(self.fields, dots=self.operation == "Update", custom=custom),
        }
        if self.subresource:
            out["subresource"] = self.subresource
        return out


def encode(paths: set[Path], *, dots: bool, custom: bool) -> JSON:
    """FieldsV1 JSON; Update entries mark owned maps with "." like the apiserver does."""
    root: JSON = {}
    for path in sorted(paths):
        node = root
        for depth, key in enumerate(path):
            child = node.setdefault(f"f:{key}", {})
            last = depth == len(path) - 1
            top_struct = depth == 0 and (key == "metadata" or (key in ("spec", "status")
                                                                  and not custom))
            top_struct = top_struct or (not custom and path[:depth + 1] in _VALUE_STRUCTS)
            if dots and not last and not top_struct:
                child.setdefault(".", {})
            node = child
    return _sorted(root)


def _sorted(node: JSON) -> JSON:
    return {k: _sorted(v) for k, v in sorted(node.items())}


def decode(fields: Any, prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    if not isinstance(fields, dict):
        return out
    for key, value in fields.items():
        if not key.startswith("f:"):
            continue
        path = (*prefix, key[2:])
        children = {k: v for k, v in (value or {}).items() if k.startswith("f:")}
        if children:
            out |= decode(children, path)
        else:
            out.add(path)
    return out


def entries_of(obj: JSON | None) -> list[Entry]:
    if not obj:
        return []
    out = []
    for raw in (obj.get("metadata") or {}).get("managedFields") or []:
        if not isinstance(raw, dict):
            continue
        out.append(Entry(
            manager=str(raw.get("manager", "")),
            operation=str(raw.get("operation", "Update")),
            api_version=str(raw.get("apiVersion", "")),
            time=str(raw.get("time", "")),
            subresource=str(raw.get("subresource", "")),
            fields=decode(raw.get("fieldsV1")),
        ))
    return out


def _element_keys(fields: JSON, obj: JSON, dots: bool) -> JSON:
    """Name the elements of metadata's associative lists as the apiserver does: finalizers
    are a set ("v:" keys, file 156), ownerReferences a list keyed by uid ("k:", file 172)."""
    _condition_keys(fields, obj, dots)
    meta_fields = fields.get("f:metadata")
    meta = obj.get("metadata") or {}
    if not isinstance(meta_fields, dict):
        return fields
    elements = {
        "f:finalizers": [f"v:{json.dumps(f)}" for f in meta.get("finalizers") or []],
        "f:ownerReferences": [
            "k:" + json.dumps({"uid": r.get("uid")}, separators=(",", ":"))
            for r in meta.get("ownerReferences") or [] if isinstance(r, dict)],
    }
    for name, keys in elements.items():
        if meta_fields.get(name) == {} and keys:
            meta_fields[name] = _sorted({**({".": {}} if dots else {}),
                                         **{k: {} for k in keys}})
    return fields


def _condition_keys(fields: JSON, obj: JSON, dots: bool) -> None:
    """status.conditions is a list keyed by type: one "k:" element per condition, naming
    the fields it holds (the CRD controller's entry in 137)."""
    status_fields = fields.get("f:status")
    conditions = (obj.get("status") or {}).get("conditions")
    if not isinstance(status_fields, dict) or status_fields.get("f:conditions") != {}:
        return
    if not isinstance(conditions, list) or not all(
            isinstance(c, dict) and "type" in c for c in conditions) or not conditions:
        return
    status_fields["f:conditions"] = _sorted({
        "k:" + json.dumps({"type": c["type"]}, separators=(",", ":")):
            {**({".": {}} if dots else {}), **{f"f:{k}": {} for k in c}}
        for c in conditions})


def _store_entries(obj: JSON, entries: list[Entry], custom: bool,
                   removed: set[Path] | None = None) -> None:
    """Store the entries; owners lose the ``removed`` paths (default: every absent path)."""
    present = leaves(obj)
    kept = []
    for e in entries:
        if removed is None:
            e.fields &= present
        else:
            e.fields -= removed
        if e.fields:
            entry = e.to_json(custom)
            _element_keys(entry["fieldsV1"], obj, e.operation == "Update")
            kept.append(entry)
    meta = obj.setdefault("metadata", {})
    if kept:
        meta["managedFields"] = kept
    else:
        meta.pop("managedFields", None)


def record_update(
    old: JSON | None,
    new: JSON,
    *,
    manager: str,
    api_version: str,
    now: str,
    subresource: str = "",
    custom: bool = False,
    seen: JSON | None = None,
) -> None:
    """Set ``new``'s managedFields after an Update (create, PUT or non-apply PATCH) by manager.

    ``seen`` is the object as field tracking saw it when the strategy then changes more than
    the reset fields (a custom resource's /status keeps the old labels, yet the request's
    label changes are recorded: 142). Owners lose only the paths the write removed, so an
    owned path the object never held stays listed (142's label, still there in 143-146).
    """
    entries = entries_of(old)
    tracked = new if seen is None else seen
    changed = {p for p in leaves(tracked) if value_at(old or {}, p) != value_at(tracked, p)}
    for e in entries:
        if not (e.manager == manager and e.operation == "Update" and e.subresource == subresource):
            e.fields -= changed
    mine = next((e for e in entries if e.manager == manager and e.operation == "Update"
                 and e.subresource == subresource), None)
    if mine is None and changed:
        mine = Entry(manager, "Update", api_version, now, subresource)
        entries.append(mine)
    if mine is not None and changed:
        mine.fields |= changed
        mine.time = now
        mine.api_version = api_version
    removed = leaves(old or {}) - leaves(tracked)
    _store_entries(new, entries, custom, removed)


class ApplyConflict(Exception):
    """Fields owned by other managers would change; ``conflicts`` = [(manager label, path)]."""

    def __init__(self, conflicts: list[tuple[str, str]]) -> None:
        self.conflicts = conflicts
        super().__init__(self.message)

    @property
    def message(self) -> str:
        n = len(self.conflicts)
        if n == 1:
            who, path = self.conflicts[0]
            body = f"conflict with {who}: {path}"
        else:
            lines: list[str] = []
            # by manager, as the apiserver sorts them (conformance ssa-after-update)
            for who in sorted(dict.fromkeys(w for w, _ in self.conflicts)):
                lines.append(f"conflicts with {who}:")
                lines += [f"- {p}" for w, p in self.conflicts if w == who]
            body = "\n".join(lines)
        return f"Apply failed with {n} conflict{'s' if n != 1 else ''}: {body}"

    def causes(self) -> list[JSON]:
        return [{"reason": "FieldManagerConflict", "message": f"conflict with {who}",
                 "field": path} for who, path in self.conflicts]


def _label(e: Entry) -> str:
    return f'"{e.manager}"' if e.operation == "Apply" else f'"{e.manager}" using {e.api_version}'


def apply(
    current: JSON | None,
    config: JSON,
    *,
    manager: str,
    force: bool,
    api_version: str,
    now: str,
    subresource: str = "",
    custom: bool = False,
) -> JSON:
    """The object after ``manager`` applies ``config``; raises ApplyConflict."""
    entries = entries_of(current)
    wanted = leaves(config) - {("metadata", "name"), ("metadata", "namespace")}
    conflicts: list[tuple[str, str]] = []
    losers: list[tuple[Entry, Path]] = []
    for path in sorted(wanted):
        if current is not None and value_at(current, path) == value_at(config, path):
            continue
        for e in entries:
            if e.manager == manager and e.operation == "Apply":
                continue
            if path in e.fields:
                conflicts.append((_label(e), "." + ".".join(path)))
                losers.append((e, path))
    if conflicts and not force:
        raise ApplyConflict(conflicts)
    for e, path in losers:
        e.fields.discard(path)
    result: JSON = _merge(clone(current) if current else {}, config)
    mine = next((e for e in entries if e.manager == manager and e.operation == "Apply"
                 and e.subresource == subresource), None)
    if mine is None:
        mine = Entry(manager, "Apply", api_version, now, subresource)
        entries.append(mine)
    others = set().union(*(e.fields for e in entries if e is not mine))
    for path in mine.fields - wanted - others:
        _delete_path(result, path)
    mine.fields = set(wanted)
    mine.time = now
    mine.api_version = api_version
    _store_entries(result, entries, custom)
    return result
