"""Descriptions for ``kubectl explain``: a class's docstring describes its object, and a
field's docstring, the string literal right below the field (an attribute docstring, as
Sphinx, pydantic and editors read it), describes the field.

Attribute docstrings are read from the class's source; a class whose source cannot be
found (defined in an interactive session) has none, and ``msgspec.Meta(description=...)``
still works there."""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap

__all__ = ["class_doc", "field_docs"]

_GENERIC = {"An enumeration."}  # enum.Enum's own docstring on Python before 3.11


def clean(doc: str) -> str:
    """A docstring as a description: dedented, and each paragraph's lines joined (the
    line breaks are the source's, not the reader's), except lines that start a list item
    or are indented."""
    out: list[str] = []
    for line in inspect.cleandoc(doc).splitlines():
        joins = (out and out[-1] and line.strip() and not line.startswith((" ", "-", "*"))
                 and not out[-1].startswith(" "))
        if joins:
            out[-1] = f"{out[-1]} {line.strip()}"
        else:
            out.append(line.rstrip())
    return "\n".join(out).strip()


def class_doc(cls: type) -> str | None:
    """The class's own docstring, cleaned (a base class's is not inherited)."""
    doc = cls.__dict__.get("__doc__")
    if not isinstance(doc, str) or not doc.strip() or doc in _GENERIC:
        return None
    return clean(doc)


def field_docs(cls: type) -> dict[str, str]:
    """Attribute docstrings of ``cls`` and its bases, by field name (a subclass's win)."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass.__module__ not in ("builtins", "msgspec"):
            out.update(_own_field_docs(klass))
    return out


@functools.cache
def _own_field_docs(cls: type) -> dict[str, str]:
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    node = tree.body[0] if tree.body else None
    if not isinstance(node, ast.ClassDef):
        return {}
    out: dict[str, str] = {}
    for prev, stmt in zip(node.body, node.body[1:], strict=False):
        if (isinstance(prev, ast.AnnAssign) and isinstance(prev.target, ast.Name)
                and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
                and isinstance(stmt.value.value, str)):
            out[prev.target.id] = clean(stmt.value.value)
    return out
