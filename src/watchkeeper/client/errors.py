"""Typed API errors, built from a response or a transport failure.

Every failure a caller can see is one of these classes, so a watcher can decide what to do
(``is_transient``) and a person can read what to do (``str(error)``) without parsing text.
Messages never include credentials: they are built only from the server's Status, the HTTP
method and the URL path (never headers, never the query string of auth plugins), and what
the server said is scrubbed of the client's credentials by its ``Redactor`` (client/redact).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, ClassVar

import msgspec

from watchkeeper.client._json import decode as decode_json
from watchkeeper.errors import WatchkeeperError

__all__ = [
    "MAX_RETRY_AFTER",
    "AlreadyExists",
    "ApiError",
    "BadRequest",
    "ConfigError",
    "Conflict",
    "ConnectionFailed",
    "Forbidden",
    "Gone",
    "Invalid",
    "InvalidResponse",
    "NotFound",
    "ServerError",
    "Timeout",
    "TooManyRequests",
    "Unauthorized",
    "WebhookFailed",
    "error_from_response",
    "error_from_status",
]


class ConfigError(WatchkeeperError):
    """The kubeconfig or in-cluster environment is unusable; the message says why and where.

    Here rather than in ``config`` so that ``exec_auth``, which ``config`` builds, raises it
    without importing ``config`` back (``watchkeeper.client.config.ConfigError`` still works).
    """


class ApiError(WatchkeeperError):
    """A failed request to the API server.

    ``code`` is the HTTP status (None when no response came back), ``reason`` the
    Kubernetes Status reason (``Forbidden``, ``NotFound``...), ``details`` the Status details,
    ``webhook`` the name of the admission webhook that denied the request or could not be
    called (None when no webhook was involved).
    """

    is_transient: ClassVar[bool] = False
    """True when retrying the same request later can succeed without anyone changing anything."""

    retriable: ClassVar[bool] = True
    """False when no one but the caller can fix it (a malformed selector: 400; options the
    server rejects: 422): retrying the same request can never succeed, so a watcher raises
    it at once instead of retrying. True for everything an administrator or time can fix
    (network, TLS, 5xx, 429, 401, 403, 404, 410), which a watcher keeps retrying."""

    def __init__(
        self,
        message: str,
        *,
        code: int | None = None,
        reason: str = "",
        details: dict[str, Any] | None = None,
        method: str = "",
        path: str = "",
        retry_after: float | None = None,
        status: dict[str, Any] | None = None,
        webhook: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.reason = reason
        self.details: dict[str, Any] = details or {}
        self.method = method
        self.path = path
        self.retry_after = retry_after
        self.status = status
        self.webhook = webhook

    def hint(self) -> str:
        """What a person should do about it; empty when there is nothing specific to say."""
        return ""

    def __str__(self) -> str:
        where = f"{self.method} {self.path}: " if self.method else ""
        code = f" ({self.code} {self.reason})" if self.code else (
            f" ({self.reason})" if self.reason else ""
        )
        hint = self.hint()
        return f"{where}{self.message}{code}" + (f". {hint}" if hint else "")

    def __repr__(self) -> str:
        name = type(self).__name__
        return f"{name}({self.message!r}, code={self.code!r}, reason={self.reason!r})"


class ConnectionFailed(ApiError):
    """The server could not be reached (refused, reset, DNS, TLS handshake)."""

    is_transient = True

    def hint(self) -> str:
        return (
            "Check that the API server address is right and reachable from here "
            "(firewall, load balancer, VPN), and that its certificate is trusted"
        )


class Timeout(ApiError):
    """No answer in time: a connect/read timeout here, or a 504 Timeout from the server."""

    is_transient = True


class ServerError(ApiError):
    """The server failed (5xx): retry later."""

    is_transient = True


class WebhookFailed(ServerError):
    """500: the API server could not call an admission webhook whose failurePolicy is Fail
    (down, unreachable, a bad certificate, too slow), so it refused the write; ``webhook``
    names it. Transient like any 5xx: the write succeeds once the webhook answers again."""

    def hint(self) -> str:
        return (
            f'The admission webhook "{self.webhook}" could not be called: is its server '
            "running and reachable from the API server, with a certificate the caBundle "
            "of its configuration trusts?"
        )


class TooManyRequests(ApiError):
    """429: the server asks us to slow down; ``retry_after`` is its wish in seconds."""

    is_transient = True

    def hint(self) -> str:
        after = f" after {self.retry_after:g} s" if self.retry_after is not None else ""
        return f"The server is overloaded or rate-limiting this client; retrying{after}"


class Gone(ApiError):
    """410: the resourceVersion or continue token is too old; a fresh list is needed."""

    is_transient = True


class Unauthorized(ApiError):
    """401: the credentials were not accepted (expired token, wrong certificate)."""

    def hint(self) -> str:
        return (
            "The credentials were rejected: refresh the token or kubeconfig "
            "(an expired exec-plugin or service-account token is re-read automatically)"
        )


_FORBIDDEN = re.compile(
    r'User "(?P<user>[^"]*)" cannot (?P<verb>\S+) resource "(?P<resource>[^"]*)"'
    r'(?: in API group "(?P<group>[^"]*)")?'
    r'(?: in the namespace "(?P<namespace>[^"]*)"| at the cluster scope)?'
)


class Forbidden(ApiError):
    """403: authenticated, but RBAC (or an admission rule) does not allow this request.

    ``needed_verbs``: every verb the caller needs on that resource (a watcher sets
    ``("list", "watch")``), so the hint names one rule that grants all of them instead of
    one verb per round of "grant, retry, next 403"."""

    needed_verbs: tuple[str, ...] = ()

    @property
    def user(self) -> str | None:
        m = _FORBIDDEN.search(self.message)
        return m["user"] if m else None

    def hint(self) -> str:
        m = _FORBIDDEN.search(self.message)
        if not m:
            return "Ask a cluster administrator for the permission this request needs"
        resource = m["resource"]
        base, _, sub = resource.partition("/")
        group = m["group"] or ""
        namespace = m["namespace"]
        kind, scope = ("Role", f' in namespace "{namespace}"') if namespace else (
            "ClusterRole", " (bound with a ClusterRoleBinding)"
        )
        rule_res = f"{base}/{sub}" if sub else base
        verbs = sorted({m["verb"], *self.needed_verbs})
        listed = ", ".join(f'"{v}"' for v in verbs)
        needs = ""
        if len(verbs) > 1:
            where = f'in namespace "{namespace}"' if namespace else "at the cluster scope"
            needs = f" (needed: {' and '.join(verbs)} on {rule_res} {where})"
        return (
            f'Grant user "{m["user"]}" a {kind} rule{scope}: '
            f'apiGroups: ["{group}"], resources: ["{rule_res}"], verbs: [{listed}]{needs}'
        )


class NotFound(ApiError):
    """404: the object, or the resource type itself (a missing CRD or API group), is absent."""

    def hint(self) -> str:
        if self.details.get("name"):
            return ""
        return (
            "The resource type is not served: is the CRD installed and established, "
            "and is the group/version right?"
        )


class Conflict(ApiError):
    """409: a write lost a race (stale resourceVersion) or conflicts with another manager."""


class AlreadyExists(Conflict):
    """409 AlreadyExists: create of a name that is taken."""


class Invalid(ApiError):
    """422: the server rejected the object or the options as invalid."""

    retriable = False


class BadRequest(ApiError):
    """400: the request was malformed (selector, body, parameters)."""

    retriable = False


class InvalidResponse(ApiError):
    """The server's answer could not be decoded (truncated or garbage data)."""

    is_transient = True


_BY_CODE: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
    504: Timeout,
}


def _class_for(code: int, reason: str) -> type[ApiError]:
    if code == 409 and reason == "AlreadyExists":
        return AlreadyExists
    if code == 410 or reason in ("Expired", "Gone"):
        return Gone
    if code in _BY_CODE:
        return _BY_CODE[code]
    if code >= 500:
        return ServerError
    return ApiError


MAX_RETRY_AFTER = 60.0
"""The longest ``Retry-After`` honoured, in seconds. kube-apiserver asks for 1 s (priority
and fairness, max-in-flight) and at most a few seconds elsewhere; a larger value is a broken
or hostile proxy, and obeying ``inf`` or a day would silence a watcher forever. 60 s is twice
the default backoff's longest step, the client's request timeout, and leaves a 300 s
``max_unhealthy`` room for several attempts."""


def _seconds(value: Any) -> float | None:
    """A Retry-After value as seconds in [0, MAX_RETRY_AFTER]; None when it is not a number.

    Never raises: ``inf`` and huge values are capped, negatives are 0, ``nan``, booleans,
    HTTP dates and garbage are None (the caller's own backoff then decides)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except (ValueError, OverflowError):
            return None  # an HTTP date is legal but unused by kube-apiserver
    if not isinstance(value, int | float):
        return None
    try:
        seconds = float(value)
    except OverflowError:  # an int too large for a float
        return MAX_RETRY_AFTER
    if seconds != seconds:  # nan
        return None
    return min(max(0.0, seconds), MAX_RETRY_AFTER)


def _retry_after(headers: Any, status: dict[str, Any] | None) -> float | None:
    raw = headers.get("Retry-After") if headers is not None else None
    if raw is not None:
        seconds = _seconds(raw)
        if seconds is not None:
            return seconds
    if status:
        details = status.get("details")
        if isinstance(details, dict):
            return _seconds(details.get("retryAfterSeconds"))
    return None


def _text(value: Any) -> str:
    """A Status string field; anything else (a map, a list: a broken server) counts as
    absent rather than being turned into text of unbounded size or depth."""
    return value if isinstance(value, str) else ""


def _status_code(value: Any, reason: str) -> int:
    """A Status' code. Absent or garbled (``410.0``, ``"410"``: a re-encoding proxy), it is
    the code its reason stands for, so a watch ERROR event ``Expired`` is a 410 ``Gone``,
    as client-go (which goes by the reason) takes it, not a 500; 500 when neither says."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer() and 100 <= value < 600:
        return int(value)
    return _REASON_CODES.get(reason, 500)


_WEBHOOK_FAILED = re.compile(r'failed calling webhook "(?P<name>[^"]+)"')
_WEBHOOK_DENIED = re.compile(r'admission webhook "(?P<name>[^"]+)" denied the request')


def _webhook(message: str) -> tuple[str | None, bool]:
    """The webhook a Status message names, and whether it could not be called (rather
    than denying): kube-apiserver's words, ``failed calling webhook "<name>": ...`` and
    ``admission webhook "<name>" denied the request: ...``."""
    if m := _WEBHOOK_FAILED.search(message):
        return m["name"], True
    if m := _WEBHOOK_DENIED.search(message):
        return m["name"], False
    return None, False


def error_from_status(
    status: dict[str, Any], *, method: str = "", path: str = "", headers: Any = None
) -> ApiError:
    """An error from a decoded ``Status`` object (a response body or a watch ERROR event)."""
    reason = _text(status.get("reason"))
    code = _status_code(status.get("code"), reason)
    message = _text(status.get("message")) or reason or f"HTTP {code}"
    cls = _class_for(code, reason)
    webhook, call_failed = _webhook(message)
    if call_failed and cls is ServerError:
        cls = WebhookFailed
    return cls(
        message,
        code=code,
        reason=reason,
        details=status.get("details") if isinstance(status.get("details"), dict) else None,
        method=method,
        path=path,
        retry_after=_retry_after(headers, status),
        status=status,
        webhook=webhook,
    )


_REASONS = {
    400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 405:
    "MethodNotAllowed", 406: "NotAcceptable", 409: "Conflict", 410: "Gone", 415:
    "UnsupportedMediaType", 422: "Invalid", 429: "TooManyRequests", 500: "InternalError",
    502: "BadGateway", 503: "ServiceUnavailable", 504: "Timeout",
}
_REASON_CODES = {reason: code for code, reason in _REASONS.items()} | {
    "Expired": 410, "AlreadyExists": 409, "ServerTimeout": 500,
}


def _head(text: str, limit: int) -> str:
    return text[:limit]


def error_from_response(
    code: int, body: bytes, *, method: str = "", path: str = "", headers: Any = None,
    excerpt: Callable[[str, int], str] = _head,
) -> ApiError:
    """An error from an HTTP response: a JSON Status when there is one, else the plain text
    (its first 500 characters as ``excerpt`` cuts them: the client's ``Redactor`` scrubs
    credentials before it cuts).

    A real apiserver answers an unknown group/version with a text/plain "404 page not found"
    and a 429 from priority-and-fairness with plain text too, so both shapes are normal.
    """
    status: dict[str, Any] | None = None
    try:
        decoded = decode_json(body) if body else None
        if isinstance(decoded, dict) and decoded.get("kind") == "Status":
            status = decoded
    except msgspec.DecodeError:  # not JSON, or nested beyond what the apiserver allows
        status = None
    if status is not None:
        if not isinstance(status.get("code"), int) or isinstance(status.get("code"), bool):
            status["code"] = code  # absent or garbled: the HTTP status says it
        return error_from_status(status, method=method, path=path, headers=headers)
    text = excerpt(body.decode("utf-8", "replace").strip(), 500)
    reason = _REASONS.get(code, "")
    message = text or f"HTTP {code}"
    if code == 404 and text == "404 page not found":
        message = "the server could not find the requested resource (unknown API group or version)"
    return _class_for(code, reason)(
        message,
        code=code,
        reason=reason,
        method=method,
        path=path,
        retry_after=_retry_after(headers, None),
    )
