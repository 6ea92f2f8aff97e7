"""Patch algorithms: JSON merge patch (RFC 7386) and JSON patch (RFC 6902).

Pure functions on JSON values; the registry turns PatchError into the apiserver's 422
(files 100, 101). Strategic merge patch, which needs the kinds' Go tags, is
``strategic.py``.
"""

from __future__ import annotations

from typing import Any

from watchkeeper_sim.storage.clone import clone


class PatchError(ValueError):
    """The patch cannot be applied (bad path, failed test, malformed operation)."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return clone(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# ---- RFC 6902 -------------------------------------------------------------------------------


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str):
        raise PatchError(f"invalid JSON pointer {path!r}")
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _index(container: list[Any], token: str, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token[0] == "0"):
        raise PatchError(f"invalid array index {token!r}")
    i = int(token)
    if i > len(container) or (i == len(container) and not allow_end):
        raise PatchError(f"array index {i} out of range")
    return i


def _parent(doc: Any, tokens: list[str]) -> Any:
    cur = doc
    for tok in tokens[:-1]:
        if isinstance(cur, dict):
            if tok not in cur:
                raise PatchError(f"path segment {tok!r} not found")
            cur = cur[tok]
        elif isinstance(cur, list):
            cur = cur[_index(cur, tok, False)]
        else:
            raise PatchError(f"cannot descend into {tok!r}")
    return cur


def _get(doc: Any, path: str) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return doc
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"path {path!r} not found")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, False)]
    raise PatchError(f"path {path!r} not found")


def _add(doc: Any, path: str, value: Any) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return value
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, True), value)
    else:
        raise PatchError(f"cannot add at {path!r}")
    return doc


def _remove(doc: Any, path: str) -> Any:
    tokens = _pointer(path)
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"path {path!r} not found")
        del parent[last]
    elif isinstance(parent, list):
        del parent[_index(parent, last, False)]
    else:
        raise PatchError(f"cannot remove {path!r}")
    return doc


def json_patch(doc: Any, ops: Any) -> Any:
    """Apply an RFC 6902 operation list to a copy of ``doc``."""
    if not isinstance(ops, list):
        raise PatchError("a JSON patch must be a list of operations")
    doc = clone(doc)
    for op in ops:
        if not isinstance(op, dict) or "path" not in op:
            raise PatchError("malformed operation")
        kind = op.get("op")
        path = op["path"]
        if kind == "add":
            doc = _add(doc, path, clone(op.get("value")))
        elif kind == "remove":
            doc = _remove(doc, path)
        elif kind == "replace":
            _get(doc, path)
            doc = _add(_remove(doc, path), path, clone(op.get("value")))
        elif kind == "move":
            value = _get(doc, op.get("from", ""))
            doc = _add(_remove(doc, op.get("from", "")), path, value)
        elif kind == "copy":
            doc = _add(doc, path, clone(_get(doc, op.get("from", ""))))
        elif kind == "test":
            if _get(doc, path) != op.get("value"):
                raise PatchError(f"test failed at {path!r}")
        else:
            raise PatchError(f"unknown operation {kind!r}")
    return doc
