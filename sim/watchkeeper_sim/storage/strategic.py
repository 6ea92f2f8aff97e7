"""Strategic merge patch (k8s.io/apimachinery/pkg/util/strategicpatch), server side.

A port of ``StrategicMergeMapPatch`` with the options kube-apiserver uses (parallel
deletion lists merged, unmatched nulls ignored): maps merge recursively and ``null``
deletes; a list merges only where its Go type is tagged ``patchStrategy: merge``
(``patchmeta.py``), lists of maps by their merge key and lists of scalars as a set, every
other list is replaced. Merged lists come out in the order the Go code makes: the patch's
items in patch order, the server's other items kept in their relative order, a new item
ahead of the server items that follow it (``normalizeElementOrder``). The directives
clients send are honoured: ``$patch: replace|delete`` (map and list items),
``$retainKeys``, ``$setElementOrder/<list>`` and ``$deleteFromPrimitiveList/<list>``.
"""

from __future__ import annotations

from typing import Any

from watchkeeper_sim.storage.clone import clone
from watchkeeper_sim.storage.gotypes import go_value
from watchkeeper_sim.storage.patchmeta import Meta, Path

DIRECTIVE = "$patch"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"
_SET_ORDER = "$setElementOrder/"
_RETAIN = "$retainKeys"


class StrategicError(ValueError):
    """The patch cannot be applied; ``code`` is the HTTP status the apiserver answers."""

    def __init__(self, message: str, code: int = 500) -> None:
        super().__init__(message)
        self.code = code


def strategic_merge(target: Any, patch: Any, meta: Meta) -> Any:
    """Apply ``patch`` to a copy of ``target`` (an object as JSON) with ``meta``'s tags."""
    if not isinstance(patch, dict):
        return clone(patch)
    return _Merger(meta).map(clone(target) if isinstance(target, dict) else {},
                             clone(patch), ())


def _no_merge_key(item: Any, key: str) -> StrategicError:
    return StrategicError(f"map: {go_value(item)} does not contain declared merge key: {key}")


def _remove_directives(value: Any) -> tuple[Any, bool]:
    """removeDirectives: (value without directives, whether to keep it at all)."""
    if isinstance(value, dict):
        if DIRECTIVE in value:
            return None, False
        out = {}
        for k, v in value.items():
            v, keep = _remove_directives(v)
            if keep:
                out[k] = v
        return out, True
    if isinstance(value, list):
        return [v for v, keep in map(_remove_directives, value) if keep], True
    return value, True


def _discard_nulls(value: Any) -> None:
    if isinstance(value, dict):
        for k in [k for k, v in value.items() if v is None]:
            del value[k]
        for v in value.values():
            _discard_nulls(v)
    elif isinstance(value, list):
        for v in value:
            _discard_nulls(v)


def _index(items: list[Any], value: Any, key: str) -> int:
    """index(): position of ``value`` (by its merge key for maps) in ``items``, or -1."""
    want = value.get(key) if key and isinstance(value, dict) else value
    for i, item in enumerate(items):
        got = item.get(key) if key and isinstance(item, dict) else item
        if got == want:
            return i
    return -1


def _normalize_order(items: list[Any], order: list[Any], key: str) -> list[Any]:
    """normalizeSliceOrder: stable sort by position in ``order``; $patch: delete items last."""
    keep = [i for i in items if not (key and isinstance(i, dict) and i.get(DIRECTIVE))]
    deleted = [i for i in items if key and isinstance(i, dict) and i.get(DIRECTIVE)]
    for i in range(1, len(keep)):  # Go's insertion sort with its (possibly partial) order
        j = i
        while j > 0:
            a, b = _index(order, keep[j], key), _index(order, keep[j - 1], key)
            if a >= 0 and b >= 0 and not a < b:
                break
            keep[j], keep[j - 1] = keep[j - 1], keep[j]
            j -= 1
    return keep + deleted


def _merge_sorted(left: list[Any], right: list[Any], order: list[Any], key: str) -> list[Any]:
    """mergeSortedSlice: server-only items (left) into the patch's items (right)."""
    out: list[Any] = []
    i = j = 0
    while i < len(left) or j < len(right):
        if i >= len(left):
            out.append(right[j])
            j += 1
        elif j >= len(right):
            out.append(left[i])
            i += 1
        else:
            li, ri = _index(order, left[i], key), _index(order, right[j], key)
            if li >= 0 and ri >= 0 and li < ri:
                out.append(left[i])
                i += 1
            else:
                out.append(right[j])
                j += 1
    return out


def _partition(merged: list[Any], by: list[Any], key: str) -> tuple[list[Any], list[Any]]:
    """Items of ``merged`` present in ``by`` (patch items) and the others (server only)."""
    present: list[Any] = []
    rest: list[Any] = []
    for item in merged:
        if key:
            if not isinstance(item, dict):
                raise StrategicError(f"expected a map, got {go_value(item)}")
            if key not in item:
                raise _no_merge_key(item, key)
        (present if _index(by, item, key) >= 0 else rest).append(item)
    return present, rest


class _Merger:
    def __init__(self, meta: Meta) -> None:
        self.meta = meta

    def _key(self, path: Path) -> str | None:
        """The merge key of the list at ``path`` ("" for scalars), None when not merged."""
        return self.meta.get(path)

    def map(self, original: dict[str, Any], patch: dict[str, Any], path: Path) -> Any:
        """mergeMap."""
        if DIRECTIVE in patch:
            directive = patch.pop(DIRECTIVE)
            if directive == "replace":
                return patch
            if directive == "delete":
                return {}
            raise StrategicError(f"unknown patch type: {directive} in map: {go_value(patch)}")
        retain = patch.pop(_RETAIN, None)
        if retain is not None:
            if not isinstance(retain, list):
                raise StrategicError("doesn't match the retainKeys format", 400)
            for k in list(original):
                if k not in retain:
                    del original[k]
        self._set_orders(original, patch, path)
        for key, value in list(patch.items()):
            delete_list = key.startswith(_DELETE_PRIMITIVE)
            if delete_list:
                key = key[len(_DELETE_PRIMITIVE):]
            if value is None:
                original.pop(key, None)
                continue
            if key not in original:
                if not delete_list:
                    _discard_nulls(value)
                    value, keep = _remove_directives(value)
                    if keep:
                        original[key] = value
                continue
            current = original[key]
            sub = (*path, key)
            if isinstance(current, dict) and isinstance(value, dict):
                original[key] = self.map(current, value, sub)
            elif isinstance(current, list) and isinstance(value, list):
                merge_key = self._key(sub)
                if merge_key is None and not delete_list:
                    original[key] = value  # not merged: the patch's list as sent
                else:
                    original[key] = self.slice(current, value, sub, merge_key or "",
                                               delete_list)
            elif not delete_list:
                _discard_nulls(value)
                value, keep = _remove_directives(value)
                if keep:
                    original[key] = value
                else:
                    del original[key]
        return original

    def slice(self, original: list[Any], patch: list[Any], path: Path, key: str,
              delete_list: bool) -> list[Any]:
        """mergeSlice for a list tagged merge (or a $deleteFromPrimitiveList)."""
        if not original and not patch:
            return original
        kinds = {isinstance(v, dict) for v in original + patch}
        if any(isinstance(v, list) for v in original + patch):
            raise StrategicError("lists of lists are not supported", 422)
        if len(kinds) > 1:
            raise StrategicError("lists must have elements of the same type")
        maps = kinds == {True}
        if not maps:
            if delete_list:
                return [v for v in original if v not in patch]
            merged = list(dict.fromkeys(original + patch))  # deduplicateScalars
            key = ""
        else:
            if not key:
                raise StrategicError(f"cannot merge lists without merge key for {path[-1]}")
            original, patch = self._special(original, patch, key)
            merged = self._merge_items(original, patch, path, key)
        present, rest = _partition(merged, patch, key)
        present = _normalize_order(present, patch, key)
        rest = _normalize_order(rest, original, key)
        return _merge_sorted(rest, present, original, key)

    @staticmethod
    def _special(original: list[Any], patch: list[Any], key: str
                 ) -> tuple[list[Any], list[Any]]:
        """mergeSliceWithSpecialElements: $patch delete / replace items."""
        plain: list[Any] = []
        replace = False
        for item in patch:
            directive = item.get(DIRECTIVE)
            if directive is None:
                plain.append(item)
            elif directive == "delete":
                if key not in item:
                    raise _no_merge_key(item, key)
                original = [o for o in original if o.get(key) != item[key]]
            elif directive == "replace":
                replace = True
            elif directive == "merge":
                raise StrategicError("merging lists cannot yet be specified in the patch")
            else:
                raise StrategicError(f"unknown patch type: {directive} in map: {go_value(item)}")
        if replace:
            return plain, []
        return original, plain

    def _merge_items(self, original: list[Any], patch: list[Any], path: Path,
                     key: str) -> list[Any]:
        """mergeSliceWithoutSpecialElements: merge by key, append the new ones."""
        out = list(original)
        for item in patch:
            if key not in item:
                raise _no_merge_key(item, key)
            at = next((i for i, o in enumerate(out) if o.get(key) == item[key]), None)
            if at is None:
                out.append(item)
            else:
                out[at] = self.map(out[at], item, path)
        return out

    def _set_orders(self, original: dict[str, Any], patch: dict[str, Any], path: Path) -> None:
        """mergePatchIntoOriginal: lists with a $setElementOrder directive, merged and put in
        the order it gives (then removed from the patch)."""
        for directive in [k for k in patch if k.startswith(_SET_ORDER)]:
            order = patch.pop(directive)
            name = directive[len(_SET_ORDER):]
            if not isinstance(order, list):
                raise StrategicError("invalid $setElementOrder list", 400)
            sub = (*path, name)
            tagged = self._key(sub)
            key = tagged or ""
            in_original, in_patch = name in original, name in patch
            if in_original and in_patch and tagged is None:
                merged = patch.pop(name)
            elif in_original and in_patch:
                merged = self.slice(list(original[name]), patch.pop(name), sub, key, False)
            elif in_patch:
                merged, _ = _remove_directives(patch.pop(name))
            elif in_original:
                merged = original[name]
            else:
                continue
            present, rest = _partition(merged, order, key)
            present = _normalize_order(present, order, key)
            rest = _normalize_order(rest, original.get(name) or [], key)
            original[name] = _merge_sorted(rest, present, original.get(name) or [], key)

