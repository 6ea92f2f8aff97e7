"""The error for an HTTP status that is no Kubernetes API answer at all: a redirect (a
proxy's login page, the wrong address), an informational or protocol-switching response, a
success the API never uses. Without it such an answer was read as a body: a 302's HTML
became "undecodable JSON", a ``101 Switching Protocols`` a watch stream.

Shared by the transport (aiohttp) and the watch stream's own HTTP/1.1 reader, which is why
it is a module of its own. Only our words, the status and a redirect's target without its
userinfo, query or fragment go into the message: never a header value as sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from http import HTTPStatus
from urllib.parse import urlsplit

from watchkeeper.client.errors import InvalidResponse

__all__ = ["API_SUCCESS", "unexpected_status"]

API_SUCCESS = range(200, 207)
"""The statuses a request answered by the API itself can have (client-go reads a body for
200-206 and turns every other status into an error); a watch must be a 200."""

_SHOWN = 120  # characters of a redirect target shown


def _reason(code: int) -> str:
    """The status' name as one word, the style of a Status reason: ``SwitchingProtocols``."""
    try:
        phrase = HTTPStatus(code).phrase
    except ValueError:
        return "UnexpectedStatus"
    return "".join(word[:1].upper() + word[1:] for word in phrase.replace("-", " ").split())


def _target(location: str) -> str:
    """Where a redirect points, without the parts that may carry a credential."""
    try:
        url = urlsplit(location.strip())
        host = url.hostname or ""
        port = f":{url.port}" if url.port else ""
    except ValueError:
        return ""
    shown = f"{url.scheme}://{host}{port}{url.path}" if host else url.path
    shown = "".join(c for c in shown if c.isascii() and c.isprintable())
    return shown[:_SHOWN] + ("..." if len(shown) > _SHOWN else "")


def unexpected_status(
    code: int,
    headers: Mapping[str, str] | None,
    *,
    method: str,
    path: str,
    expected: str = "a Kubernetes API answer",
) -> InvalidResponse:
    """The ``InvalidResponse`` for a status below 400 that no API answer has (outside
    ``API_SUCCESS``, or not a 200 for a watch); ``code`` and ``reason`` name the status.
    Retried by a watcher like any InvalidResponse: a proxy's hiccup may pass, and a wrong
    address keeps saying so in the watcher's log and health."""
    if 300 <= code < 400:
        target = _target((headers or {}).get("Location", ""))
        what = f"a redirect to {target}" if target else "a redirect"
        advice = ": check the server address; a proxy or a login page may be in the way"
    elif code < 200:
        what, advice = "an informational (1xx) response", ""
    else:
        what, advice = "a success status the Kubernetes API does not use", ""
    return InvalidResponse(
        f"the server answered with {what} where {expected} was expected{advice}",
        code=code, reason=_reason(code), method=method, path=path,
    )
