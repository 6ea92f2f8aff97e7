"""A CRD schema's ``x-kubernetes-validations``: CEL rules, run as kube-apiserver 1.28 runs them.

Each rule is evaluated with ``self`` bound to the value of the node it is declared on, after
the schema checks (validation.py): a transition rule (one that names ``oldSelf``) only on
updates, and only where the old object has a value; a node with no value runs none. A rule
that is not true gives a cause at the node's path (or its ``fieldPath``): the rule's
``message``, the result of its ``messageExpression`` (the message when that fails or is blank),
or ``failed rule: <rule>``; its type follows ``reason``. A schema error of the kinds the
apiserver counts as blocking stops the rules, with one cause saying so (tests/conformance:
crd-cel-rules; tests/e2e/website_cases.py).

The interpreter is cel-rust (the ``common-expression-language`` package; docs/decisions.md
says why). It has CEL's standard library; Kubernetes' strings, lists and regex functions
come from cellib.py, and the rest (``url``, ``quantity``, ``ip``, ``cidr``) is missing: a
rule that calls one fails the write with a cause naming the function. A CRD whose rule does
not parse is refused as the apiserver refuses it (``crd_causes``), but rules are not
type-checked against the schema (the apiserver also refuses a rule that names an undefined
field or costs too much; the simulator accepts it, and the rule fails when evaluated), and
``format: date-time`` or ``duration`` strings stay strings in rules.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any

from watchkeeper_sim import status as _status
from watchkeeper_sim.model import JSON
from watchkeeper_sim.storage import cellib as _cellib

if TYPE_CHECKING:
    import cel

# schema errors after which the apiserver does not run the rules (hasBlockingErr, 1.28): an
# enum's NotSupported or a pattern's Invalid let them run
_BLOCKING = frozenset({"FieldValueRequired", "FieldValueTooLong", "FieldValueTooMany",
                       "FieldValueTypeInvalid"})
_SKIPPED = ('Invalid value: "null": some validation rules were not checked because the object '
            "was invalid; correct the existing errors to complete validation")
# field.Path(nil).String(): the root's causes name no field
_ROOT = "<nil>"

_RESERVED = frozenset({
    "true", "false", "null", "in", "as", "break", "const", "continue", "else", "for",
    "function", "if", "import", "let", "loop", "package", "namespace", "return", "var",
    "void", "while"})
_EXPAND = re.compile(r"__|[^a-zA-Z0-9_]")
_ESCAPES = {"__": "__underscores__", ".": "__dot__", "-": "__dash__", "/": "__slash__"}
_FIELD_PATH = re.compile(r"\.([A-Za-z_][A-Za-z0-9_-]*)|\['((?:[^'\\]|\\.)*)'\]|\[(\d+)\]")
_LIBRARY_ERROR = re.compile(r"CelError: (.*?)\. Check function arguments")
_UNDEFINED = re.compile(r"Undefined variable or function: '([^']+)'")
# the apiserver trims an evaluated message and refuses one longer than this (bytes)
_MAX_MESSAGE = 5 * 1024


def has_rules(schema: JSON | None) -> bool:
    """Whether any node of ``schema`` declares rules (the apiserver builds no validator if
    none does, so schema errors then add no "not checked" cause)."""
    if not isinstance(schema, dict):
        return False
    if schema.get("x-kubernetes-validations"):
        return True
    props = schema.get("properties")
    subs = list(props.values()) if isinstance(props, dict) else []
    subs += [schema.get("items"), schema.get("additionalProperties")]
    return any(has_rules(s) for s in subs if isinstance(s, dict))


def causes(schema: JSON | None, obj: JSON, old: JSON | None, earlier: list[JSON]) -> list[JSON]:
    """The causes the rules of ``schema`` give for ``obj`` (``old``: the stored object, on
    updates), after the ``earlier`` causes of the same write."""
    if not has_rules(schema):
        return []
    assert schema is not None
    if any(c.get("reason") in _BLOCKING for c in earlier):
        return [_status.cause("FieldValueInvalid", _SKIPPED, _ROOT)]
    out: list[JSON] = []
    _walk("", schema, obj, old, out, root=True)
    return out


def crd_causes(crd: JSON) -> list[JSON]:
    """422 causes for a CRD whose rules or messageExpressions do not parse, worded as
    kube-apiserver 1.28 words them (cel-rust shares cel-go's grammar and its error text).
    Only syntax is checked: an undefined field, a non-boolean rule or a costly one, which
    the apiserver refuses too, is accepted here (docs/simulator.md)."""
    versions = ((crd.get("spec") or {}).get("versions")) or []
    schemas = [((v.get("schema") or {}).get("openAPIV3Schema") if isinstance(v, dict) else None)
               for v in versions]
    out: list[JSON] = []
    if schemas and all(s == schemas[0] for s in schemas):
        # identical schemas are checked once, where the internal version keeps them
        first = schemas[0]
        if isinstance(first, dict):
            _check_schema("spec.validation.openAPIV3Schema", first, out)
        return out
    for i, schema in enumerate(schemas):
        if isinstance(schema, dict):
            _check_schema(f"spec.versions[{i}].schema.openAPIV3Schema", schema, out)
    return out


def _check_schema(path: str, schema: JSON, out: list[JSON]) -> None:
    """The nested schemas' rules first, then the node's own (the apiserver's order)."""
    props = schema.get("properties")
    props = props if isinstance(props, dict) else {}
    for key in sorted(props):
        if isinstance(props[key], dict):
            _check_schema(f"{path}.properties[{key}]", props[key], out)
    for key in ("additionalProperties", "items"):
        if isinstance(schema.get(key), dict):
            _check_schema(f"{path}.{key}", schema[key], out)
    rules = schema.get("x-kubernetes-validations")
    for i, rule in enumerate(rules if isinstance(rules, list) else ()):
        if not isinstance(rule, dict):
            continue
        for key, prefix in (("rule", "compilation failed"),
                            ("messageExpression", "messageExpression compilation failed")):
            source = rule.get(key)
            if not isinstance(source, str) or not source:
                continue
            try:
                _compile(source)
            except ValueError as exc:
                out.append(_status.cause(
                    "FieldValueInvalid",
                    f"Invalid value: {_go_rule(rule)}: {prefix}: {_go_syntax_error(exc)}",
                    f"{path}.x-kubernetes-validations[{i}].{key}"))


def _go_rule(rule: JSON) -> str:
    """%#v of an apiextensions.ValidationRule (a set reason is a pointer: its address is
    the apiserver's, so any stands in)."""
    reason = ("(*apiextensions.FieldValueErrorReason)(nil)" if not rule.get("reason")
              else "(*apiextensions.FieldValueErrorReason)(0xc000000000)")
    fields = [f"{name}:{_status.go_quote(str(rule.get(key) or ''))}"
              for name, key in (("Rule", "rule"), ("Message", "message"),
                                ("MessageExpression", "messageExpression"))]
    return ("apiextensions.ValidationRule{" + ", ".join(fields) + f", Reason:{reason}, "
            f"FieldPath:{_status.go_quote(str(rule.get('fieldPath') or ''))}" + "}")


def _go_syntax_error(exc: ValueError) -> str:
    """cel-rust's parse error as cel-go prints it: from ``ERROR:``, snippet lines indented."""
    text = str(exc)
    start = text.find("ERROR:")
    text = text[start:] if start >= 0 else text
    return "\n".join(f" {line}" if line.startswith("|") else line for line in text.split("\n"))


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _walk(path: str, schema: JSON, value: Any, old: Any, out: list[JSON],
          root: bool = False) -> None:
    """Rules of this node, then of its children, old values correlated as the apiserver
    does: by property, by map key, by a map-list's keys (never by a list's index)."""
    if value is None:
        return
    _node(path, schema, value, old, out, root)
    if isinstance(value, dict):
        props = schema.get("properties")
        props = props if isinstance(props, dict) else {}
        extra = schema.get("additionalProperties")
        old_map = old if isinstance(old, dict) else {}
        for key, item in value.items():
            if key in props and isinstance(props[key], dict):
                _walk(_child(path, key), props[key], item, old_map.get(key), out)
            elif key not in props and isinstance(extra, dict):
                _walk(f"{path}[{key}]", extra, item, old_map.get(key), out)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        keys = schema.get("x-kubernetes-list-map-keys") or []
        mapped = schema.get("x-kubernetes-list-type") == "map" and isinstance(old, list)
        for i, item in enumerate(value):
            before = _same_keys(item, old, keys) if mapped else None
            _walk(f"{path}[{i}]", schema["items"], item, before, out)


def _same_keys(item: Any, old: list[Any], keys: list[str]) -> Any:
    if not isinstance(item, dict):
        return None
    want = [item.get(k) for k in keys]
    return next((o for o in old if isinstance(o, dict) and [o.get(k) for k in keys] == want),
                None)


def _node(path: str, schema: JSON, value: Any, old: Any, out: list[JSON], root: bool) -> None:
    rules = schema.get("x-kubernetes-validations")
    if not isinstance(rules, list) or not rules:
        return
    kind = str(schema.get("type") or "")
    this = _cel_value(value, schema, root)
    before = None if old is None else _cel_value(old, schema, root)
    for rule in rules:
        if not isinstance(rule, dict) or not isinstance(rule.get("rule"), str):
            continue
        cause = _evaluate(rule, this, before, old is not None)
        if cause is None:
            continue
        reason, message, failed = cause
        if failed:
            # a false rule's fieldPath extends the path of the node's later causes too:
            # kube-apiserver 1.28 reassigns the node's path (tests/sim/unit/test_crd_cel.py)
            path = _field_path(path, rule.get("fieldPath"))
        out.append(_cause(reason, message, path or _ROOT, kind))


def _cause(reason: str, message: str, field: str, kind: str) -> JSON:
    """field.Invalid (the node's type as the value), Forbidden, Required or Duplicate."""
    if reason == "FieldValueForbidden":
        return _status.cause(reason, f"Forbidden: {message}", field)
    if reason == "FieldValueRequired":
        return _status.cause(reason, f"Required value: {message}", field)
    if reason == "FieldValueDuplicate":
        return _status.cause(reason, f'Duplicate value: "{kind}"', field)
    return _status.cause("FieldValueInvalid", f'Invalid value: "{kind}": {message}', field)


def _field_path(path: str, field_path: Any) -> str:
    """The node's path, extended by a rule's ``fieldPath`` (``.a.b``, ``['a.b']``, ``[0]``)."""
    if not isinstance(field_path, str) or not field_path:
        return path
    for match in _FIELD_PATH.finditer(field_path):
        name, quoted, index = match.groups()
        if index is not None:
            path = f"{path}[{index}]"
        else:
            path = _child(path, name if name is not None else quoted)
    return path


def _rule_text(rule: JSON) -> str:
    """ruleErrorString: the message, else the rule."""
    message = str(rule.get("message") or "").strip()
    return message or str(rule["rule"]).strip()


def _default_message(rule: JSON) -> str:
    message = str(rule.get("message") or "").strip()
    return message or f"failed rule: {str(rule['rule']).strip()}"


def _evaluate(rule: JSON, this: Any, before: Any,
              has_old: bool) -> tuple[str, str, bool] | None:
    """None if the rule holds (or is a transition rule without an old value); else the
    cause's reason, message, and whether the rule was false (rather than not evaluated)."""
    reason = str(rule.get("reason") or "FieldValueInvalid")
    try:
        program = _compile(str(rule["rule"]))
    except ValueError as exc:  # crd_causes refuses such a CRD: stored before that check
        return "FieldValueInvalid", f"compilation failed: {exc}", False
    names = {"self": this}
    if "oldSelf" in program.variables():
        if not has_old:
            return None
        names["oldSelf"] = before
    try:
        result = program.execute(_context(names))
    except Exception as exc:  # cel raises builtin types (KeyError, ...) for CEL's errors
        return "FieldValueInvalid", _error_message(exc, rule), False
    if result is True:
        return None
    message = _default_message(rule)
    expression = rule.get("messageExpression")
    if isinstance(expression, str) and expression:
        message = _message_expression(expression, names) or message
    return reason, message, True


def _message_expression(expression: str, names: dict[str, Any]) -> str | None:
    """The evaluated message, or None (the apiserver then uses the rule's message) when it
    fails, is not a string, is blank, too long or spans lines."""
    try:
        text = _compile(expression).execute(_context(names))
    except Exception:  # any failure falls back, as on the apiserver
        return None
    if not isinstance(text, str):
        return None
    text = text.strip()
    if not text or "\n" in text or "\r" in text or len(text.encode()) > _MAX_MESSAGE:
        return None
    return text


def _error_message(exc: Exception, rule: JSON) -> str:
    """cel-go's wording of a runtime error, where cel-rust's differs."""
    text = _rule_text(rule)
    if isinstance(exc, KeyError):
        return f"no such key: {exc.args[0] if exc.args else ''} evaluating rule: {text}"
    if isinstance(exc, ZeroDivisionError):
        return f"division by zero evaluating rule: {text}"
    if isinstance(exc, OverflowError):
        return f"integer overflow evaluating rule: {text}"
    if isinstance(exc, TypeError) and "no such overload" in str(exc).lower():
        return ("'no such overload': call arguments did not match a supported operator, "
                f"function or macro signature for rule: {text}")
    library = _LIBRARY_ERROR.search(str(exc))
    if library is not None:
        return f"{library.group(1)} evaluating rule: {text}"
    undefined = _UNDEFINED.search(str(exc))
    if undefined is not None:
        return (f"the simulator cannot evaluate {undefined.group(1)}: not in its CEL library "
                f"(docs/simulator.md) evaluating rule: {text}")
    return f"{exc} evaluating rule: {text}"


def _context(names: dict[str, Any]) -> cel.Context:
    """The variables, and Kubernetes' library functions cel-rust lacks (cellib.py)."""
    import cel  # see _compile

    return cel.Context(names, _cellib.FUNCTIONS)


@functools.lru_cache(maxsize=1024)
def _compile(source: str) -> cel.Program:
    """A compiled rule, kept: the same CRD's rules run on every write."""
    import cel  # its import costs ~0.1 s: paid by CRDs with rules only

    return cel.compile(source)


def escape(name: str) -> str | None:
    """A property's name as rules spell it (``x-y`` is ``x__dash__y``, ``in`` is
    ``__in__``), None if rules cannot name it (apiserver's cel Escape)."""
    if not name or name[0].isdigit():
        return None
    if name in _RESERVED:
        return f"__{name}__"
    parts: list[str] = []
    last = 0
    for match in _EXPAND.finditer(name):
        sub = _ESCAPES.get(match.group())
        if sub is None:
            return None
        parts += [name[last:match.start()], sub]
        last = match.end()
    return "".join(parts) + name[last:]


def _cel_value(value: Any, schema: JSON, root: bool = False) -> Any:
    """``value`` as rules see it: a ``number`` is a double even when whole, an object has its
    declared properties (escaped names), the root's metadata only its name and
    generateName."""
    if value is None:
        return None
    if schema.get("type") == "number" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        if (isinstance(props, dict) and props) or root:
            out: dict[str, Any] = {}
            for key, item in value.items():
                if root and key in ("apiVersion", "kind"):
                    out[key] = item
                elif root and key == "metadata" and isinstance(item, dict):
                    out[key] = {k: item[k] for k in ("name", "generateName") if k in item}
                elif isinstance(props, dict) and isinstance(props.get(key), dict):
                    name = escape(key)
                    if name is not None:
                        out[name] = _cel_value(item, props[key])
                elif not props:  # a root that preserves unknown fields
                    out[key] = item
            return out
        if isinstance(extra, dict):
            return {key: _cel_value(item, extra) for key, item in value.items()}
        return value
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_cel_value(item, schema["items"]) for item in value]
    return value
