"""Kubernetes ``Status`` bodies with the real kube-apiserver 1.28 wording.

Every error the simulator returns is built here, so the wording lives in one place and can be
compared with tests/fixtures/apiserver-1.28 in the contract tests.
"""

from __future__ import annotations

from typing import Any

JSON = dict[str, Any]


def status(
    code: int,
    reason: str | None,
    message: str | None,
    details: JSON | None = None,
    *,
    success: bool = False,
    metadata: JSON | None = None,
) -> JSON:
    """A Status dict; keys in the apiserver's order so dumps compare easily."""
    body: JSON = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": metadata or {},
        "status": "Success" if success else "Failure",
    }
    if message is not None:
        body["message"] = message
    if reason:
        body["reason"] = reason
    if details is not None:
        body["details"] = details
    if not success:
        body["code"] = code
    return body


def qualified(plural: str, group: str) -> str:
    """``configmaps`` or ``deployments.apps``: how the apiserver names a resource in errors."""
    return f"{plural}.{group}" if group else plural


def _details(name: str, group: str, kind: str, **extra: Any) -> JSON:
    d: JSON = {}
    if name:
        d["name"] = name
    if group:
        d["group"] = group
    d["kind"] = kind
    d.update(extra)
    return d


def not_found(plural: str, group: str, name: str) -> JSON:
    return status(
        404,
        "NotFound",
        f'{qualified(plural, group)} "{name}" not found',
        _details(name, group, plural),
    )


def already_exists(plural: str, group: str, name: str) -> JSON:
    return status(
        409,
        "AlreadyExists",
        f'{qualified(plural, group)} "{name}" already exists',
        _details(name, group, plural),
    )


def conflict(plural: str, group: str, name: str, why: str) -> JSON:
    return status(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(plural, group)} "{name}": {why}',
        _details(name, group, plural),
    )


STALE = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def precondition_conflict(kind: str, group: str, name: str, why: str) -> JSON:
    """Delete preconditions name the Kind, not the resource (files 121, 122)."""
    return status(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {kind} "{name}": {why}',
        _details(name, group, kind),
    )


def cause(reason: str, message: str, field: str) -> JSON:
    return {"reason": reason, "message": message, "field": field}


def invalid(kind: str, group: str, name: str, causes: list[JSON]) -> JSON:
    """422 Invalid; ``causes`` carry ``field`` and a message starting with the error type."""
    # one line per distinct cause: the apiserver's aggregate error drops repeats (file 159)
    parts = list(dict.fromkeys(f"{c['field']}: {c['message']}" for c in causes))
    joined = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    qkind = f"{kind}.{group}" if group else kind
    return status(
        422,
        "Invalid",
        f'{qkind} "{name}" is invalid: {joined}',
        _details(name, group, kind, causes=causes),
    )


def invalid_options(kind: str, causes: list[JSON]) -> JSON:
    """422 for ListOptions/PatchOptions mistakes (files 039, 040, 057, 068, 096)."""
    return invalid(kind, "meta.k8s.io", "", causes) | {
        "details": {"group": "meta.k8s.io", "kind": kind, "causes": causes}
    }


def bad_request(message: str) -> JSON:
    return status(400, "BadRequest", message)


def expired(message: str, continue_token: str | None = None) -> JSON:
    meta = {"continue": continue_token} if continue_token else None
    return status(410, "Expired", message, metadata=meta)


def forbidden(message: str, details: JSON) -> JSON:
    return status(403, "Forbidden", message, details)


def unauthorized() -> JSON:
    return status(401, "Unauthorized", "Unauthorized")


def method_not_allowed() -> JSON:
    return status(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
        {},
    )


def resource_not_found() -> JSON:
    """Unknown resource or version inside a known group (files 082, 084, 085)."""
    return status(404, "NotFound", "the server could not find the requested resource", {})


def unsupported_media_type(accepted: list[str] | None = None) -> JSON:
    if accepted is None:
        return status(415, "UnsupportedMediaType", "415: Unsupported Media Type", {})
    return status(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        + ", ".join(accepted),
    )


def too_large_rv(requested: int, current: int) -> JSON:
    return status(
        504,
        "Timeout",
        f"Timeout: Too large resource version: {requested}, current: {current}",
        {
            "causes": [
                {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
            ],
            "retryAfterSeconds": 1,
        },
    )


def internal(message: str, reason: str | None = None, code: int = 500) -> JSON:
    return status(code, reason, message)


def entity_too_large(limit: int) -> JSON:
    return status(
        413, "RequestEntityTooLarge", f"Request entity too large: limit is {limit}"
    )


def success(name: str, group: str, plural: str, uid: str) -> JSON:
    """A plain DELETE's answer (file 119)."""
    return status(200, None, None, _details(name, group, plural, uid=uid), success=True)


def go_quote(text: str) -> str:
    """Go's %q of a string: how apiserver messages print a value (field errors, RBAC
    names)."""
    out = []
    for c in text:
        if c in '"\\':
            out.append("\\" + c)
        elif c.isprintable():
            out.append(c)
        elif c in "\n\t\r":
            out.append({"\n": "\\n", "\t": "\\t", "\r": "\\r"}[c])
        elif ord(c) < 0x80:
            out.append(f"\\x{ord(c):02x}")
        elif ord(c) < 0x10000:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(f"\\U{ord(c):08x}")
    return '"' + "".join(out) + '"'
