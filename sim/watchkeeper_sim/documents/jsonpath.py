"""k8s.io/client-go/util/jsonpath, as the apiserver runs it for additionalPrinterColumns.

A port of its parser and evaluator over decoded JSON (dicts, lists, str, int, float, bool,
None): fields (``.a.b``, ``['key']``), recursive descent (``..name``), wildcards (``[*]``,
``.*``), indexes and slices (``[1]``, ``[-1:]``, ``[0:4:2]``), unions (``[0,2]``), filters
(``[?(@.type=="Ready")]`` with ==, !=, <, >, <=, >=, and existence ``[?(@.x)]``), quoted
text and the int, float and bool literals filters compare against. Its quirks are kept
(they are what ``kubectl get`` shows): ``['a.b']`` is read as the fields ``a`` and ``b``
(escape the dots instead: ``.a\\.b``), a filter comparing values of different kinds (a
string with a number, an integer with a float) is an error, not a mismatch, and an error
anywhere empties the whole cell. Go iterates maps in random order; here wildcards and
recursive descent visit keys in document order, one of the orders a real server may use.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, TypeAlias


class JSONPathError(ValueError):
    """A template that does not parse, or a step that cannot be evaluated."""


@dataclass
class _List:
    nodes: list[Node] = field(default_factory=list)


@dataclass
class _Text:
    text: str


@dataclass
class _Field:
    name: str


@dataclass
class _Identifier:
    name: str


@dataclass
class _Array:
    # (value, known, derived) for start, end, step, as the Go parser fills them
    params: list[tuple[int, bool, bool]]


@dataclass
class _Filter:
    left: _List
    right: _List
    operator: str


@dataclass
class _Number:
    value: int | float


@dataclass
class _Bool:
    value: bool


@dataclass
class _Wildcard:
    pass


@dataclass
class _Recursive:
    pass


@dataclass
class _Union:
    nodes: list[_List]


Node: TypeAlias = (
    "_List | _Text | _Field | _Identifier | _Array | _Filter | _Number | _Bool | _Wildcard"
    " | _Recursive | _Union"
)

_DICT_KEY = re.compile(r"^'([^']*)'$")
_SLICE = re.compile(r"^(-?\d*)(:-?\d*)?(:-?\d*)?$")
_FILTER = re.compile(r"^([^!<>=]+)([!<>=]+)(.+?)$", re.S)
_TERMINATORS = set(" \t\r\n.,[]$@{}")


class _Parser:
    """parser.go: a hand-written scanner over the template text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.start = 0
        self.root = _List()

    def parse(self) -> _List:
        self._text(self.root)
        return self.root

    def _next(self) -> str:
        if self.pos >= len(self.text):
            self.pos += 1  # so that a backup after EOF is harmless
            return ""
        ch = self.text[self.pos]
        self.pos += 1
        return ch

    def _backup(self) -> None:
        self.pos -= 1

    def _peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def _consume(self) -> str:
        self.pos = min(self.pos, len(self.text))
        value = self.text[self.start:self.pos]
        self.start = self.pos
        return value

    def _text(self, cur: _List) -> None:
        while True:
            if self.text.startswith("{", self.pos):
                if self.pos > self.start:
                    cur.nodes.append(_Text(self._consume()))
                self.pos += 1
                self._consume()
                inner = _List()
                cur.nodes.append(inner)
                self._inside(inner)
                return
            if self._next() == "":
                break
        self.pos = len(self.text)
        if self.pos > self.start:
            cur.nodes.append(_Text(self._consume()))

    def _inside(self, cur: _List) -> None:
        while True:
            rest = self.text[self.pos:]
            if rest.startswith("}"):
                self.pos += 1
                self._consume()
                self._text(self.root)
                return
            if rest.startswith("[?("):
                self._filter(cur)
                continue
            if rest.startswith(".."):
                self._recursive(cur)
                continue
            ch = self._next()
            if ch in ("", "\r", "\n"):
                raise JSONPathError("unclosed action")
            if ch == " " or ch in "@$":
                self._consume()
            elif ch == "[":
                self._array(cur)
            elif ch in "\"'":
                self._quote(cur, ch)
            elif ch == ".":
                self._field(cur)
            elif ch in "+-" or ch.isdigit():
                self._backup()
                self._number(cur)
            elif ch == "_" or ch.isalnum():
                self._backup()
                self._identifier(cur)
            else:
                raise JSONPathError(f"unrecognized character in action: {ch!r}")

    def _identifier(self, cur: _List) -> None:
        while True:
            ch = self._next()
            if ch == "" or ch in _TERMINATORS:
                self._backup()
                break
        value = self._consume()
        cur.nodes.append(_Bool(value == "true") if value in ("true", "false")
                         else _Identifier(value))

    def _recursive(self, cur: _List) -> None:
        if cur.nodes and isinstance(cur.nodes[-1], _Recursive):
            raise JSONPathError("invalid multiple recursive descent")
        self.pos += 2
        self._consume()
        cur.nodes.append(_Recursive())
        ch = self._peek()
        if ch == "_" or ch.isalnum():
            self._field(cur)

    def _number(self, cur: _List) -> None:
        if self._peek() in ("+", "-"):
            self._next()
        while True:
            ch = self._next()
            if ch != "." and not ch.isdigit():
                self._backup()
                break
        value = self._consume()
        try:
            cur.nodes.append(_Number(int(value)))
            return
        except ValueError:
            pass
        try:
            cur.nodes.append(_Number(float(value)))
        except ValueError:
            raise JSONPathError(f"cannot parse number {value}") from None

    def _array(self, cur: _List) -> None:
        while True:
            ch = self._next()
            if ch in ("", "\n"):
                raise JSONPathError("unterminated array")
            if ch == "]":
                break
        text = self._consume()[1:-1]
        if text == "*":
            text = ":"
        parts = text.split(",")
        if len(parts) > 1:
            cur.nodes.append(_Union([_action(f"[{p.strip(' ')}]") for p in parts]))
            return
        key = _DICT_KEY.match(text)
        if key is not None:
            cur.nodes.extend(_action(f".{key.group(1)}").nodes)
            return
        m = _SLICE.match(text)
        if m is None:
            raise JSONPathError(f"invalid array index {text}")
        groups = list(m.groups())
        params: list[tuple[int, bool, bool]] = []
        for i in range(3):
            raw = groups[i] or ""
            if raw:
                if i > 0:
                    raw = raw[1:]
                if i > 0 and raw == "":
                    params.append((0, False, False))
                else:
                    params.append((int(raw), True, False))
            elif i == 1:
                params.append((params[0][0] + 1, True, True))
            else:
                params.append((0, False, False))
        cur.nodes.append(_Array(params))

    def _filter(self, cur: _List) -> None:
        self.pos += 3
        self._consume()
        begin = end = False
        pair = ""
        while True:
            ch = self._next()
            if ch in ("", "\n"):
                raise JSONPathError("unterminated filter")
            if ch in "\"'":
                if not begin:
                    begin, pair = True, ch
                    continue
                if self.text[self.pos - 2] != "\\" and ch == pair:
                    end = True
            elif ch == ")" and begin == end:
                break
        if self._next() != "]":
            raise JSONPathError("unclosed array expect ]")
        text = self._consume()[:-2]
        m = _FILTER.match(text)
        if m is None:
            cur.nodes.append(_Filter(_action(text), _List(), "exists"))
        else:
            cur.nodes.append(_Filter(_action(m.group(1)), _action(m.group(3)), m.group(2)))

    def _quote(self, cur: _List, end: str) -> None:
        while True:
            ch = self._next()
            if ch in ("", "\n"):
                raise JSONPathError("unterminated quoted string")
            if ch == end and self.text[self.pos - 2] != "\\":
                break
        cur.nodes.append(_Text(_unquote(self._consume())))

    def _field(self, cur: _List) -> None:
        self._consume()
        while True:
            ch = self._next()
            if ch == "\\":
                self._next()
            elif ch == "" or ch in _TERMINATORS:
                self._backup()
                break
        value = self._consume()
        cur.nodes.append(_Wildcard() if value == "*" else _Field(value.replace("\\", "")))


def _unquote(quoted: str) -> str:
    """UnquoteExtend: Go's strconv.Unquote for "..." and '...' alike."""
    body = quoted[1:-1]
    if "\\" not in body:
        return body
    try:
        return str(json.loads('"' + body.replace('"', '\\"').replace("\\'", "'") + '"'))
    except ValueError:
        raise JSONPathError(f"unquote string {quoted} error invalid syntax") from None


def _action(text: str) -> _List:
    """parseAction: ``text`` parsed as the inside of one ``{...}``."""
    root = _Parser("{" + text + "}").parse()
    inner = root.nodes[0]
    assert isinstance(inner, _List)
    return inner


Template = _List  # a parsed template (never changed by evaluating it: cache it freely)


def parse(template: str) -> Template:
    """The parse tree of a template such as ``{.status.phase}``; JSONPathError if invalid."""
    return _Parser(template).parse()


# ---- evaluation -----------------------------------------------------------------------------

def _kind(value: Any) -> str:
    """text/template's basicKind over decoded JSON: int64, float64, string, bool."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    raise JSONPathError("invalid type for comparison")


def _compare(op: str, left: Any, right: Any) -> bool:
    """template.Equal / Less / ... : same kinds only (bools only for == and !=)."""
    lk, rk = _kind(left), _kind(right)
    if lk != rk:
        raise JSONPathError("incompatible types for comparison")
    if op == "==":
        return bool(left == right)
    if op == "!=":
        return bool(left != right)
    if lk == "bool":
        raise JSONPathError("invalid type for comparison")
    if op == "<":
        return bool(left < right)
    if op == ">":
        return bool(left > right)
    if op == "<=":
        return bool(left <= right)
    if op == ">=":
        return bool(left >= right)
    raise JSONPathError(f"unrecognized filter operator {op}")


def _children(value: Any) -> list[Any]:
    """What a wildcard yields: map values, list items, a string's bytes (Go indexes them)."""
    if isinstance(value, dict):
        return list(value.values())
    if isinstance(value, list):
        return list(value)
    if isinstance(value, str):
        return list(value.encode())
    return []


class _Evaluator:
    def __init__(self, allow_missing_keys: bool) -> None:
        self.allow_missing = allow_missing_keys

    def walk(self, values: list[Any], node: Node) -> list[Any]:
        if isinstance(node, _List):
            for child in node.nodes:
                values = self.walk(values, child)
            return values
        if isinstance(node, _Text):
            return [node.text]
        if isinstance(node, _Field):
            return self._field(values, node.name)
        if isinstance(node, _Array):
            return self._array(values, node)
        if isinstance(node, _Filter):
            return self._filter(values, node)
        if isinstance(node, (_Number, _Bool)):
            return [node.value for _ in values]
        if isinstance(node, _Wildcard):
            return [c for v in values if v is not None for c in _children(v)]
        if isinstance(node, _Recursive):
            return self._recursive(values)
        if isinstance(node, _Union):
            return [r for part in node.nodes for r in self.walk(values, part)]
        if isinstance(node, _Identifier):  # range / end: not meaningful in a column
            raise JSONPathError(f"unrecognized identifier {node.name}")
        raise JSONPathError(f"unexpected Node {node!r}")

    def _field(self, values: list[Any], name: str) -> list[Any]:
        results = [v[name] for v in values if isinstance(v, dict) and name in v]
        if not results and values and not self.allow_missing:
            raise JSONPathError(f"{name} is not found")
        return results

    @staticmethod
    def _array(values: list[Any], node: _Array) -> list[Any]:
        out: list[Any] = []
        for value in values:
            if value is None:
                continue
            if not isinstance(value, list):
                raise JSONPathError(f"{type(value).__name__} is not array or slice")
            length = len(value)
            (start, start_known, _), (end, end_known, derived), (step, step_known, _) = (
                node.params)
            start = start if start_known else 0
            if start < 0:
                start += length
            end = end if end_known else length
            if end < 0 or (end == 0 and derived):
                end += length
            if end == start:
                return out
            if start >= length or start < 0:
                raise JSONPathError(f"array index out of bounds: index {start}, length {length}")
            if end > length or end < 0:
                raise JSONPathError(
                    f"array index out of bounds: index {end - 1}, length {length}")
            if start > end:
                raise JSONPathError(f"starting index {start} is greater than ending index {end}")
            if step_known and step <= 0:
                raise JSONPathError("step must be > 0")
            out.extend(value[start:end:step if step_known else 1])
        return out

    def _filter(self, values: list[Any], node: _Filter) -> list[Any]:
        out: list[Any] = []
        for value in values:
            if not isinstance(value, list):
                raise JSONPathError(f"{value!r} is not array or slice and cannot be filtered")
            for item in value:
                try:
                    lefts = self.walk([item], node.left)
                except JSONPathError:
                    if node.operator == "exists":
                        continue
                    raise
                if node.operator == "exists":
                    if lefts:
                        out.append(item)
                    continue
                if not lefts:
                    continue
                if len(lefts) > 1:
                    raise JSONPathError("can only compare one element at a time")
                rights = self.walk([item], node.right)
                if not rights:
                    continue
                if len(rights) > 1:
                    raise JSONPathError("can only compare one element at a time")
                if _compare(node.operator, lefts[0], rights[0]):
                    out.append(item)
        return out

    def _recursive(self, values: list[Any]) -> list[Any]:
        out: list[Any] = []
        for value in values:
            if value is None:
                continue
            children = _children(value)
            if children:
                out.append(value)
                out.extend(self._recursive(children))
        return out


def find_results(tree: Template, data: Any, allow_missing_keys: bool = True
                 ) -> list[list[Any]]:
    """FindResults: one list of values per top-level node of the template."""
    ev = _Evaluator(allow_missing_keys)
    return [ev.walk([data], node) for node in tree.nodes]


def print_value(value: Any) -> str:
    """PrintResults of one value: maps and lists as compact JSON (Go's json.Marshal: sorted
    keys, <, > and & escaped), null as "<no value>", anything else as fmt.Fprint does."""
    if isinstance(value, (dict, list)):
        text = json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
        return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    if value is None:
        return "<no value>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return go_float(value)
    return str(value)


def go_float(value: float) -> str:
    """%v of a float64 (strconv's shortest 'g'): plain for exponents -4 to 5, else like
    1.0000005e+06 or 1e-05."""
    if value != value or value in (float("inf"), float("-inf")):
        return "NaN" if value != value else ("+Inf" if value > 0 else "-Inf")
    exact = Decimal(repr(value))
    exponent = exact.adjusted()
    if -4 <= exponent < 6:
        text = format(exact, "f")
        return text.rstrip("0").rstrip(".") if "." in text else text
    digits = exact.scaleb(-exponent).normalize()
    mantissa = format(digits, "f")
    return f"{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
