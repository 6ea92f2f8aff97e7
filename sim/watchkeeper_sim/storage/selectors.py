"""Label and field selectors: parse like apimachinery does, then match objects.

The parser follows apimachinery's grammar and error wording (file 034) so a client's
error handling sees the same text it would see from a real cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

JSON = dict[str, Any]


class SelectorError(ValueError):
    """The selector does not parse; the message is the apiserver's."""


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!"
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        has = self.key in labels
        val = labels.get(self.key)
        if self.op == "exists":
            return has
        if self.op == "!":
            return not has
        if self.op in ("=", "in"):
            return has and val in self.values
        # "!=" and "notin" match objects without the label too (apimachinery semantics)
        return not has or val not in self.values


_SPECIAL = "!(),=<> \t\n"


def _lex(text: str) -> list[str]:
    """Tokens: identifiers and operators; '' marks the end of the string."""
    tokens: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c.isspace():
            i += 1
            continue
        if c in "!=" and i + 1 < len(text) and text[i + 1] == "=":
            tokens.append(c + "=")
            i += 2
            continue
        if c in _SPECIAL:
            tokens.append(c)
            i += 1
            continue
        j = i
        while j < len(text) and text[j] not in _SPECIAL:
            j += 1
        tokens.append(text[i:j])
        i = j
    tokens.append("")
    return tokens


def _is_ident(tok: str) -> bool:
    return tok != "" and tok[0] not in _SPECIAL and tok not in ("!=", "==")


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _lex(text)
        self.pos = 0

    def peek(self) -> str:
        return self.toks[self.pos]

    def take(self) -> str:
        tok = self.toks[self.pos]
        if self.pos < len(self.toks) - 1:
            self.pos += 1
        return tok

    def parse(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        while True:
            tok = self.peek()
            if tok == "":
                return reqs
            if not (_is_ident(tok) or tok == "!"):
                raise SelectorError(f"found '{tok}', expected: !, identifier, or 'end of string'")
            try:
                reqs.append(self.requirement())
            except SelectorError as exc:
                raise SelectorError(f"unable to parse requirement: {exc}") from None
            tok = self.take()
            if tok == "":
                return reqs
            if tok != ",":
                raise SelectorError(f"found '{tok}', expected: ',' or 'end of string'")
            nxt = self.peek()
            if nxt in ("", ","):
                raise SelectorError(f"found '{nxt}', expected: identifier after ','")

    def requirement(self) -> Requirement:
        negate = False
        if self.peek() == "!":
            self.take()
            negate = True
        key = self.take()
        if not _is_ident(key):
            raise SelectorError(f"found '{key}', expected: identifier")
        nxt = self.peek()
        if nxt in ("", ","):
            return Requirement(key, "!" if negate else "exists")
        if negate:
            raise SelectorError(f"found '{nxt}', expected: ',' or 'end of string'")
        op = self.take()
        if op in ("=", "=="):
            return Requirement(key, "=", (self.exact_value(),))
        if op == "!=":
            return Requirement(key, "!=", (self.exact_value(),))
        if op in ("in", "notin"):
            return Requirement(key, op, self.values())
        raise SelectorError(f"found '{op}', expected: =, !=, ==, in, notin, gt, lt")

    def exact_value(self) -> str:
        tok = self.peek()
        if tok in ("", ","):
            return ""
        if not _is_ident(tok):
            raise SelectorError(f"found '{tok}', expected: identifier")
        return self.take()

    def values(self) -> tuple[str, ...]:
        tok = self.take()
        if tok != "(":
            raise SelectorError(f"found '{tok}', expected: '('")
        vals: list[str] = []
        if self.peek() == ")":
            self.take()
            return ("",)
        while True:
            tok = self.take()
            if tok in (",", ")"):
                vals.append("")
            elif _is_ident(tok):
                vals.append(tok)
                tok = self.take()
            else:
                raise SelectorError(f"found '{tok}', expected: ',', ')' or identifier")
            if tok == ")":
                return tuple(vals)
            if tok != ",":
                raise SelectorError(f"found '{tok}', expected: ',' or ')'")


def parse_labels(text: str) -> list[Requirement]:
    """Parse a label selector; raises SelectorError with apimachinery's message."""
    return _Parser(text).parse() if text.strip() else []


def labels_match(reqs: list[Requirement], obj: JSON) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if not isinstance(labels, dict):
        labels = {}
    return all(r.matches(labels) for r in reqs)


GENERIC_FIELDS = ("metadata.name", "metadata.namespace")

# Extra field labels a few built-in resources support, as the real registry strategies do.
EXTRA_FIELDS: dict[str, tuple[str, ...]] = {
    "pods": ("spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
             "spec.serviceAccountName", "status.phase", "status.podIP"),
    "secrets": ("type",),
    "namespaces": ("status.phase",),
    "events": ("involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
               "involvedObject.uid", "involvedObject.apiVersion", "reason", "type", "source"),
    "jobs": ("status.successful",),
}


@dataclass(frozen=True)
class FieldTerm:
    field: str
    op: str  # "=" or "!="
    value: str


def _lookup(obj: JSON, dotted: str) -> str:
    cur: Any = obj
    for part in dotted.split("."):
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    return cur if isinstance(cur, str) else str(cur)


def parse_fields(text: str, plural: str) -> list[FieldTerm]:
    """Parse a field selector and check the fields are ones this resource supports."""
    terms: list[FieldTerm] = []
    if not text.strip():
        return terms
    allowed = GENERIC_FIELDS + EXTRA_FIELDS.get(plural, ())
    for part in text.split(","):
        for op in ("!=", "==", "="):
            if op in part:
                key, _, value = part.partition(op)
                break
        else:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        key = key.strip()
        if key not in allowed:
            only = ", ".join(f'"{f}"' for f in allowed)
            raise SelectorError(f'"{key}" is not a known field selector: only {only}')
        terms.append(FieldTerm(key, "!=" if op == "!=" else "=", value.strip()))
    return terms


def fields_match(terms: list[FieldTerm], obj: JSON) -> bool:
    for t in terms:
        actual = _lookup(obj, t.field)
        if (actual == t.value) != (t.op == "="):
            return False
    return True


def matcher(label_selector: str, field_selector: str, plural: str) -> Callable[[JSON], bool]:
    """One predicate for both selectors; raises SelectorError when either does not parse."""
    reqs = parse_labels(label_selector)
    terms = parse_fields(field_selector, plural)
    if not reqs and not terms:
        return match_all
    return lambda obj: labels_match(reqs, obj) and fields_match(terms, obj)


def match_all(obj: JSON) -> bool:
    """The predicate of a request without selectors (watch replay skips calling it)."""
    return True
