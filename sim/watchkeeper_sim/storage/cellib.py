"""Kubernetes' CEL library functions that cel-rust lacks, for celrules.py: cel-go's extended
strings (``charAt``, ``indexOf``, ``lastIndexOf``, ``lowerAscii``, ``upperAscii``,
``replace``, ``split``, ``substring``, ``trim``, ``join``), Kubernetes' lists library
(``isSorted``, ``sum``, ``min``, ``max``, ``indexOf``, ``lastIndexOf``) and regex library
(``find``, ``findAll``), as kube-apiserver 1.28 evaluates them (tests/sim/unit/test_crd_cel.py
checks each against its answers). Not here: ``url``, ``quantity``, ``ip``, ``cidr`` (types of
their own) and the optional syntax ``self.?x``.

cel-rust passes a method's receiver first; a raised exception is the rule's evaluation error.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from typing import Any


class CelError(ValueError):
    """An evaluation error of a library function (cel-go's text)."""


def _code_point(text: str, index: int) -> int:
    if not 0 <= index <= len(text):
        raise CelError(f"index out of range: {index}")
    return index


def _char_at(text: str, index: int) -> str:
    _code_point(text, index)
    return text[index:index + 1]


def _index_of(receiver: Any, item: Any, offset: int = 0) -> int:
    if isinstance(receiver, str):
        _code_point(receiver, offset)
        return receiver.find(item, offset)
    return next((i for i, x in enumerate(receiver) if x == item), -1)


def _last_index_of(receiver: Any, item: Any, offset: int | None = None) -> int:
    if isinstance(receiver, str):
        if offset is None:
            return receiver.rfind(item)
        _code_point(receiver, offset)
        return receiver.rfind(item, 0, offset + len(item))
    return next((i for i in range(len(receiver) - 1, -1, -1) if receiver[i] == item), -1)


def _ascii(text: str, upper: bool) -> str:
    table = str.maketrans(*(("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
                            if upper else
                            ("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")))
    return text.translate(table)


def _replace(text: str, old: str, new: str, count: int = -1) -> str:
    return text.replace(old, new, count)


def _split(text: str, sep: str, count: int = -1) -> list[str]:
    """Go's strings.SplitN: 0 parts for n == 0, all for n < 0, "" splits into characters."""
    if count == 0:
        return []
    if sep == "":
        chars = list(text)
        if 0 < count < len(chars):
            chars = [*chars[:count - 1], "".join(chars[count - 1:])]
        return chars
    return text.split(sep, count - 1 if count > 0 else -1)


def _substring(text: str, start: int, end: int | None = None) -> str:
    end = len(text) if end is None else end
    if start > end:
        raise CelError(f"invalid substring range. start: {start}, end: {end}")
    _code_point(text, start)
    _code_point(text, end)
    return text[start:end]


def _join(items: list[Any], sep: str = "") -> str:
    return sep.join(items)


def _is_sorted(items: list[Any]) -> bool:
    return all(a <= b for a, b in itertools.pairwise(items))


def _sum(items: list[Any]) -> Any:
    return sum(items[1:], items[0]) if items else 0


def _extreme(name: str, pick: Callable[[list[Any]], Any]) -> Callable[[list[Any]], Any]:
    def call(items: list[Any]) -> Any:
        if not items:
            raise CelError(f"{name} called on empty list")
        return pick(items)
    return call


def _find(text: str, pattern: str) -> str:
    match = re.search(pattern, text)
    return "" if match is None else match.group(0)


def _find_all(text: str, pattern: str, count: int = -1) -> list[str]:
    found = [m.group(0) for m in re.finditer(pattern, text)]
    return found if count < 0 else found[:count]


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "charAt": _char_at, "indexOf": _index_of, "lastIndexOf": _last_index_of,
    "lowerAscii": lambda text: _ascii(text, upper=False),
    "upperAscii": lambda text: _ascii(text, upper=True),
    "replace": _replace, "split": _split, "substring": _substring, "trim": str.strip,
    "join": _join, "isSorted": _is_sorted, "sum": _sum,
    "min": _extreme("min", min), "max": _extreme("max", max),
    "find": _find, "findAll": _find_all,
}
