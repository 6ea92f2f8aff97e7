"""Credentials out of every text the client quotes from a server or a credential plugin.

A server may say anything, the request's own Authorization header included: an echo
service, a debug proxy at the wrong address, a login page showing the header it refused,
answering with any status, in a body, a watch line, an ERROR event or a ``Warning`` header.
So every text the client quotes from what it received (error messages and their Status,
watch lines, ``Warning`` headers, a credential plugin's stderr) is built through a
``Redactor``: the one object that knows the client's credentials as they are now and were
on the last few requests (a token an exec plugin or a token file hands out later is noted
when it is sent), and blanks them out in every encoding a text may carry them in.

Only error and log paths call it: nothing here runs per event of a watch that works.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import suppress
from typing import Any, AnyStr
from urllib.parse import quote, quote_plus

import msgspec

from watchkeeper.client.errors import ApiError, error_from_response, error_from_status

__all__ = ["REDACTED", "Redactor", "encodings", "redact_plugin_output"]

REDACTED = "<redacted>"
_REDACTED_B = REDACTED.encode()
_MIN = 6  # shorter values (a one-letter password) would blank out ordinary words
_HISTORY = 8  # credentials remembered: the current one and those of requests still open
_WIDENINGS = 8  # an excerpt's window doubles at most this often (a key cut off at its end)

# A PEM private key, with real newlines or JSON's "\n" escapes, or cut off before its END
# line (then up to the end): blanked out even when no credential of ours.
_KEY_PEM = r"-----BEGIN[ A-Z0-9]*PRIVATE KEY-----.*?(?:-----END[ A-Z0-9]*PRIVATE KEY-----|\Z)"
_PRIVATE_KEY = re.compile(_KEY_PEM, re.S)
_PRIVATE_KEY_B = re.compile(_KEY_PEM.encode(), re.S)


def encodings(secret: str) -> set[str]:
    """Every form in which a text may carry ``secret``: as is and stripped, JSON-escaped
    (once, and twice for JSON quoting JSON; with and without escaped non-ASCII),
    URL-encoded (path and form style), and for a PEM key each line of its body and the
    body joined. Forms shorter than 6 characters are left out."""
    forms = {secret, secret.strip()}
    for s in list(forms):
        for ascii_only in (True, False):
            escaped = json.dumps(s, ensure_ascii=ascii_only)[1:-1]
            forms |= {escaped, json.dumps(escaped)[1:-1]}
        forms |= {quote(s, safe=""), quote_plus(s, safe="")}
    body = [ln.strip() for ln in secret.splitlines() if ln.strip() and "-----" not in ln]
    if len(body) > 1:
        forms |= {"".join(body), *body}
    return {f for f in forms if len(f) >= _MIN}


def header_secrets(value: str) -> list[str]:
    """The secrets of a credential header's value: the value, its credential part (after
    a scheme such as ``Bearer``) and, for basic auth, the password."""
    scheme, _, credential = value.partition(" ")
    out = [value, credential]
    if scheme.lower() == "basic":
        with suppress(ValueError):  # binascii.Error and UnicodeDecodeError are ValueErrors
            out.append(base64.b64decode(credential).decode().partition(":")[2])
    return out


def _replace(text: AnyStr, forms: Sequence[AnyStr], marker: AnyStr,
             key: re.Pattern[AnyStr]) -> AnyStr:
    for form in forms:  # longest first: a fragment never breaks a longer match
        if form in text:
            text = text.replace(form, marker)
    return key.sub(marker, text)


def _cut(text: AnyStr, limit: int, marker: AnyStr) -> AnyStr:
    """The first ``limit`` characters, or a little more so as not to cut a marker in two."""
    at = text.find(marker, max(0, limit - len(marker) + 1), limit + len(marker) - 1)
    return text[:at + len(marker)] if at >= 0 else text[:limit]


class Redactor:
    """The credentials one client has used, and the one way it quotes what it received.

    ``note`` is given every request's headers (one dict lookup when the credential is
    unchanged); ``note_key`` a client key. ``scrub`` blanks them out of a whole text,
    ``excerpt`` out of the first bytes of one (scrubbed before it is cut: a cut could leave
    the start of a secret), ``error`` out of an ``ApiError``'s message, reason and Status."""

    __slots__ = ("_auth", "_bforms", "_forms", "_keys", "_margin")

    def __init__(self, key: bytes | None = None) -> None:
        self._auth: dict[str, None] = {}  # credential header values, oldest first
        self._keys: list[str] = []
        self._forms: tuple[str, ...] = ()
        self._bforms: tuple[bytes, ...] = ()
        self._margin = 0
        if key:
            self.note_key(key)

    def __repr__(self) -> str:
        return f"Redactor(<{len(self._auth) + len(self._keys)} credentials>)"

    def note(self, headers: Mapping[str, str]) -> None:
        """Remember the credential headers of a request about to be sent (every value an
        ``Auth`` returns is a credential, whatever the header's name)."""
        for value in headers.values():
            if value and value not in self._auth:
                self._auth[value] = None
                if len(self._auth) > _HISTORY:
                    del self._auth[next(iter(self._auth))]
                self._rebuild()

    def note_key(self, key: bytes) -> None:
        """Remember a client key (the config's, or one an exec plugin returned)."""
        text = key.decode("utf-8", "replace").strip()
        if text and text not in self._keys:
            self._keys = [*self._keys[1 - _HISTORY:], text]
            self._rebuild()

    def _rebuild(self) -> None:
        secrets = [s for v in self._auth for s in header_secrets(v)] + self._keys
        forms: set[str] = set()
        for secret in secrets:
            forms |= encodings(secret)
        self._forms = tuple(sorted(forms, key=len, reverse=True))
        self._bforms = tuple(f.encode("utf-8", "replace") for f in self._forms)
        self._margin = max(map(len, self._bforms), default=0)

    def scrub(self, text: str) -> str:
        """``text`` without any credential of this client, nor any PEM private key."""
        return _replace(text, self._forms, REDACTED, _PRIVATE_KEY)

    def scrub_bytes(self, data: bytes) -> bytes:
        return _replace(data, self._bforms, _REDACTED_B, _PRIVATE_KEY_B)

    def excerpt(self, data: AnyStr, limit: int) -> AnyStr:
        """The first ``limit`` characters (bytes) of ``data`` as a message quotes them,
        without credentials. A secret the scrubbed window cuts at its end is not blanked
        out, so the window is widened until that end lies past ``limit`` once the secrets
        before it are blanked (or, failing that, the cut is made before it)."""
        scrub: Callable[[Any], Any] = self.scrub if isinstance(data, str) else self.scrub_bytes
        marker: Any = REDACTED if isinstance(data, str) else _REDACTED_B
        want = limit + self._margin
        end = want
        for _ in range(_WIDENINGS):
            window: AnyStr = scrub(data[:end])
            if end >= len(data) or len(window) >= want:
                break
            end = max(2 * end, end + want - len(window))
        else:  # still short: cut before whatever secret its end may cut in two
            limit = min(limit, max(0, len(window) - self._margin))
        shown: AnyStr = _cut(window, limit, marker)
        return shown

    def error(self, error: ApiError) -> ApiError:
        """``error`` with its message, reason and Status (details) scrubbed, in place."""
        message = self.scrub(error.message)
        if message != error.message:
            error.message = message
            error.args = (message,)
        error.reason = self.scrub(error.reason)
        if error.status is not None:
            try:
                text = msgspec.json.encode(error.status).decode()
            except (RecursionError, TypeError, ValueError):
                error.status, error.details = None, {}
                return error
            scrubbed = self.scrub(text)
            if scrubbed != text:
                try:
                    error.status = msgspec.json.decode(scrubbed)
                except (msgspec.DecodeError, RecursionError):
                    error.status = None
                details = error.status.get("details") if isinstance(error.status, dict) else None
                error.details = details if isinstance(details, dict) else {}
        return error

    def response_error(self, code: int, body: bytes, **where: Any) -> ApiError:
        """The typed error of an HTTP error response, scrubbed (a text body is cut at 500
        characters after scrubbing)."""
        return self.error(error_from_response(code, body, excerpt=self.excerpt, **where))

    def status_error(self, status: dict[str, Any], **where: Any) -> ApiError:
        """The typed error of a Status (a watch ERROR event), scrubbed."""
        return self.error(error_from_status(status, **where))


# A credential plugin's stderr is treated more warily than a server's text: besides the
# known secrets, anything that looks like one goes. "token": "...", token=..., clientKeyData:
# ... (JSON, escaped JSON, YAML, logfmt, query).
_SECRET_FIELD = re.compile(
    r"""((?:client[-_]?key[-_]?data|(?:access|id|refresh|bearer|auth)?[-_]?token|password|"""
    r"""secret|client[-_]?secret|private[-_]?key)\\*["']?\s*[:=]\s*\\*["']?)"""
    r"""(?:\\.|[^\s"'\\,;&}\]])+""",
    re.I,
)
_BEARER = re.compile(r"(\b(?:Bearer|Basic)\s+)[A-Za-z0-9._~+/=-]+", re.I)


def redact_plugin_output(text: str, secrets: Iterable[str] = ()) -> str:
    """A credential plugin's output without credentials: the given ``secrets`` in every
    form of ``encodings``, any PEM private key, the values of fields named like
    credentials, and bearer/basic header values."""
    forms: set[str] = set()
    for secret in secrets:
        if secret:
            forms |= encodings(secret)
    text = _replace(text, sorted(forms, key=len, reverse=True), REDACTED, _PRIVATE_KEY)
    text = _SECRET_FIELD.sub(lambda m: m.group(1) + REDACTED, text)
    return _BEARER.sub(lambda m: m.group(1) + REDACTED, text)
