"""RFC 6902 JSON patches from two documents: what a mutating webhook sends back.

The API server applies the patch to the object it sent, so the patch must take exactly that
object to the handler's result. Maps are diffed key by key (``add``/``remove``/``replace``
with RFC 6901 escapes); a list that changed is replaced whole: a smaller patch by index
would be wrong as soon as two elements move, and the API server's objects are small.
"""

from __future__ import annotations

from typing import Any

__all__ = ["diff", "pointer"]


def pointer(path: list[str]) -> str:
    """An RFC 6901 pointer: ``~`` and ``/`` in a key escaped as ``~0`` and ``~1``."""
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in path)


def diff(old: Any, new: Any) -> list[dict[str, Any]]:
    """The operations that turn ``old`` into ``new`` (empty when they are equal)."""
    ops: list[dict[str, Any]] = []
    _diff(old, new, [], ops)
    return ops


def _diff(old: Any, new: Any, at: list[str], ops: list[dict[str, Any]]) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in old:
            if key not in new:
                ops.append({"op": "remove", "path": pointer([*at, key])})
        for key, value in new.items():
            if key not in old:
                ops.append({"op": "add", "path": pointer([*at, key]), "value": value})
            else:
                _diff(old[key], value, [*at, key], ops)
    elif type(old) is not type(new) or old != new:  # (1 == 1.0 == True: JSON tells them apart)
        ops.append({"op": "replace", "path": pointer(at), "value": new})
