"""JSON from the server, decoded as deep as kube-apiserver lets objects nest, and no deeper.

msgspec (the fast path) recurses on the C stack and stops with ``RecursionError`` at the
interpreter's recursion limit (about 1,000 levels, less the caller's own stack). The
apiserver decodes every request body with sigs.k8s.io/json, a fork of Go's encoding/json,
whose scanner allows ``maxNestingDepth = 10000`` levels, so a custom resource with
``x-kubernetes-preserve-unknown-fields`` can legally be stored, listed and watched with up
to 10,000 levels. Raising the recursion limit instead would trade the exception for a
segmentation fault (measured: msgspec at 20,000 levels crashes a thread with an 8 MiB
stack), so documents deeper than msgspec manages are decoded again by a small iterative
parser that keeps its own stack. Anything deeper than ``MAX_DEPTH`` is refused with
``msgspec.DecodeError``, which callers already turn into ``InvalidResponse``.
"""

from __future__ import annotations

import json.decoder
import re
from collections.abc import Callable
from typing import Any

import msgspec

__all__ = ["MAX_DEPTH", "REPR_DEPTH", "bounded_repr", "decode", "decode_deep", "encode"]

APISERVER_MAX_DEPTH = 10_000
"""Go encoding/json's (and so kube-apiserver's) nesting limit for one object."""

MAX_DEPTH = APISERVER_MAX_DEPTH + 8
"""Our limit for one document: an object at the apiserver's limit inside its envelope
(a watch event adds one level, a list two: the list and its ``items``), with a little room."""

_plain_decode = msgspec.json.decode
_plain_encode = msgspec.json.encode
# The C string scanner behind json.loads (not in typeshed): iterative, strict on controls.
scanstring: Callable[[str, int, bool], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]

_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_LITERALS = {"t": ("true", True), "f": ("false", False), "n": ("null", None)}


def decode(data: bytes) -> Any:
    """Any JSON document up to ``MAX_DEPTH`` levels; ``msgspec.DecodeError`` otherwise."""
    try:
        return _plain_decode(data)
    except RecursionError:
        return decode_deep(data)


def decode_deep(data: bytes, max_depth: int = MAX_DEPTH) -> Any:
    """The slow, stack-free decoder, for the rare document msgspec cannot nest into."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise msgspec.DecodeError(f"invalid UTF-8 at byte {exc.start}") from None
    try:
        return _parse(text, max_depth)
    except (IndexError, ValueError) as exc:  # json's scanstring raises JSONDecodeError
        if isinstance(exc, msgspec.DecodeError):
            raise
        raise msgspec.DecodeError(f"malformed JSON ({exc})") from None


def _fail(what: str, pos: int) -> msgspec.DecodeError:
    return msgspec.DecodeError(f"malformed JSON: {what} at character {pos}")


def _key(s: str, i: int) -> tuple[str, int]:
    """An object key and its colon, from ``i`` (already past whitespace); returns the index
    of the value after them."""
    if s[i : i + 1] != '"':
        raise _fail("expected a string key", i)
    key, i = scanstring(s, i + 1, True)
    i = _WS.match(s, i).end()  # type: ignore[union-attr]  # always matches
    if s[i : i + 1] != ":":
        raise _fail("expected ':'", i)
    return key, _WS.match(s, i + 1).end()  # type: ignore[union-attr]


def _parse(s: str, max_depth: int) -> Any:
    ws = _WS.match
    n = len(s)
    # One entry per open container: the container and, for an object, the pending key.
    stack: list[tuple[dict[str, Any] | list[Any], str]] = []
    i = ws(s, 0).end()  # type: ignore[union-attr]
    while True:
        value: Any
        c = s[i : i + 1]
        if c == "{" or c == "[":
            if len(stack) >= max_depth:
                raise msgspec.DecodeError(
                    f"JSON nested deeper than {max_depth} levels (the API server's limit is "
                    f"{APISERVER_MAX_DEPTH})"
                )
            i = ws(s, i + 1).end()  # type: ignore[union-attr]
            if c == "{":
                if s[i : i + 1] == "}":
                    value, i = {}, i + 1
                else:
                    key, i = _key(s, i)
                    stack.append(({}, key))
                    continue
            elif s[i : i + 1] == "]":
                value, i = [], i + 1
            else:
                stack.append(([], ""))
                continue
        elif c == '"':
            value, i = scanstring(s, i + 1, True)
        elif c in _LITERALS:
            word, value = _LITERALS[c]
            if not s.startswith(word, i):
                raise _fail("invalid literal", i)
            i += len(word)
        else:
            m = _NUMBER.match(s, i)
            if m is None or m.end() == i:
                raise _fail("expected a value", i)
            token = m.group()
            value = float(token) if m.group(1) or m.group(2) else int(token)
            i = m.end()
        # A value is complete: hand it to its container, closing containers as they end.
        while True:
            if not stack:
                i = ws(s, i).end()  # type: ignore[union-attr]
                if i != n:
                    raise _fail("trailing characters", i)
                return value
            container, key = stack[-1]
            if isinstance(container, dict):
                container[key] = value
            else:
                container.append(value)
            i = ws(s, i).end()  # type: ignore[union-attr]
            ch = s[i : i + 1]
            if ch == ",":
                i = ws(s, i + 1).end()  # type: ignore[union-attr]
                if isinstance(container, dict):
                    key, i = _key(s, i)
                    stack[-1] = (container, key)
                break
            if ch == ("}" if isinstance(container, dict) else "]"):
                stack.pop()
                value, i = container, i + 1
                continue
            raise _fail("expected ',' or a closing bracket", i)


def encode(value: Any) -> bytes:
    """JSON for a request body; an object as deep as the apiserver stores (one read from it,
    to be written back) is encoded iteratively when msgspec's recursion gives up."""
    try:
        return _plain_encode(value)
    except RecursionError:
        return _encode_deep(value).encode()


def _encode_deep(value: Any) -> str:
    """Plain JSON values only (what ``decode`` returns): dicts, lists, str, int, float,
    bool and None; anything else is a TypeError, as with msgspec."""
    out: list[str] = []
    # A stack of pending work: a value to encode, or a literal piece of text to emit.
    todo: list[tuple[bool, Any]] = [(True, value)]
    while todo:
        is_value, item = todo.pop()
        if not is_value:
            out.append(item)
        elif isinstance(item, dict):
            pieces: list[tuple[bool, Any]] = [(False, "{")]
            for i, (k, v) in enumerate(item.items()):
                if not isinstance(k, str):
                    raise TypeError("only string keys can be encoded as JSON")
                pieces += [(False, ("," if i else "") + _scalar(k) + ":"), (True, v)]
            pieces.append((False, "}"))
            todo.extend(reversed(pieces))
        elif isinstance(item, list | tuple):
            pieces = [(False, "[")]
            for i, v in enumerate(item):
                if i:
                    pieces.append((False, ","))
                pieces.append((True, v))
            pieces.append((False, "]"))
            todo.extend(reversed(pieces))
        else:
            out.append(_scalar(item))
    return "".join(out)


def _scalar(value: Any) -> str:
    if value is None or isinstance(value, bool | int | float | str):
        return _plain_encode(value).decode()
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


REPR_DEPTH = 100
"""Levels of a decoded object that ``bounded_repr`` shows; deeper containers read ``...``."""


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests containers more than ``limit`` levels (iterative: no stack)."""
    todo: list[tuple[Any, int]] = [(value, 1)]
    while todo:
        item, depth = todo.pop()
        children = item.values() if isinstance(item, dict) else item
        if depth > limit:
            return True
        todo.extend((c, depth + 1) for c in children if isinstance(c, dict | list | tuple))
    return False


def bounded_repr(value: Any, limit: int = REPR_DEPTH) -> str:
    """``repr(value)``, except that containers nested deeper than ``limit`` levels are shown
    as ``{...}``/``[...]``/``(...)``.

    Python's ``repr`` of a dict recurses on the C stack and raises ``RecursionError`` at
    about 1,000 levels, and objects as deep as the apiserver stores (10,000) do come in: an
    event's repr, and so a log line or a test failure that shows one, must not raise. Objects
    within the limit (all real ones) get exactly the builtin repr."""
    if not isinstance(value, dict | list | tuple) or not _deeper_than(value, limit):
        return repr(value)
    out: list[str] = []
    _repr_into(value, limit, out, set())
    return "".join(out)


def _repr_into(value: Any, levels: int, out: list[str], path: set[int]) -> None:
    """Append the repr of ``value`` showing ``levels`` levels of containers; ``path`` holds
    the containers being written (a container inside itself is ``...``, as in ``repr``).
    Recurses at most ``levels`` deep (REPR_DEPTH: far below the recursion limit)."""
    if isinstance(value, dict):
        opening, closing = "{", "}"
    elif isinstance(value, list):
        opening, closing = "[", "]"
    elif isinstance(value, tuple):
        opening, closing = "(", ")"
    else:
        out.append(repr(value))
        return
    if levels <= 0 or id(value) in path:
        out.append(f"{opening}...{closing}")
        return
    path.add(id(value))
    out.append(opening)
    if isinstance(value, dict):
        for i, (k, v) in enumerate(value.items()):
            out.append(", " if i else "")
            _repr_into(k, levels - 1, out, path)
            out.append(": ")
            _repr_into(v, levels - 1, out, path)
    else:
        for i, v in enumerate(value):
            out.append(", " if i else "")
            _repr_into(v, levels - 1, out, path)
        if isinstance(value, tuple) and len(value) == 1:
            out.append(",")
    out.append(closing)
    path.discard(id(value))
