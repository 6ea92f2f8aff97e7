"""One HTTPS POST to a webhook, as kube-apiserver makes it.

Admission and conversion share it: the client config (``url`` or ``service``), the caBundle
as the only trust for the webhook's certificate, the ``?timeout=Ns`` query the API server
adds, and failures phrased as Go's ``net/http`` phrases them (``Post "<url>": <cause>``), since
the API server quotes that text in the errors its clients see.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import ssl
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import aiohttp

JSON = dict[str, Any]

#: maps a ``service`` client config to a base URL (``https://host:port``) or None: the
#: simulator has no cluster network, so by default a service reference is unreachable
ServiceResolver = Callable[[JSON], "str | None"]


class WebhookCallError(Exception):
    """The webhook could not be called or answered with something unusable; ``str()`` is
    the cause as kube-apiserver words it (quoted after ``failed to call webhook: ``)."""


def _format_timeout(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole}s" if whole == seconds else f"{seconds:g}s"


def target_url(config: JSON, timeout: float, resolve_service: ServiceResolver) -> str:
    """The URL the API server posts to, with the ``timeout`` query it appends."""
    if "url" in config:
        base = str(config["url"])
    else:
        service = config.get("service") or {}
        resolved = resolve_service(service)
        name = f"{service.get('name')}.{service.get('namespace')}.svc"
        if resolved is None:
            raise WebhookCallError(
                f'Post "https://{name}:{service.get("port", 443)}'
                f'{service.get("path") or ""}?timeout={_format_timeout(timeout)}": '
                f"service {service.get('namespace')}/{service.get('name')} is not reachable "
                "from the simulator (it has no cluster network; use a url: client config)")
        base = resolved.rstrip("/") + str(service.get("path") or "")
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}timeout={_format_timeout(timeout)}"


def _tls_context(config: JSON) -> ssl.SSLContext:
    bundle = config.get("caBundle")
    context = ssl.create_default_context()
    if bundle:
        try:
            pem = base64.b64decode(bundle, validate=True).decode("ascii")
        except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
            raise WebhookCallError(f"invalid caBundle: {exc}") from exc
        context = ssl.create_default_context(cadata=pem)
    return context


def _cause(exc: BaseException, host: str) -> str:
    """Go's words for the common failures, so errors read as a real cluster's do."""
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        return "context deadline exceeded"
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return ("tls: failed to verify certificate: x509: certificate signed by unknown "
                "authority")
    if isinstance(exc, aiohttp.ClientSSLError):
        return f"tls: {exc}"
    if isinstance(exc, aiohttp.ClientConnectorError):
        if isinstance(exc.os_error, ConnectionRefusedError):
            return f"dial tcp {host}: connect: connection refused"
        return f"dial tcp {host}: {exc.os_error}"
    return str(exc) or type(exc).__name__


# client-go's words for an answer outside 2xx that is no Status (NewGenericServerResponse)
_GENERIC = {
    400: "the server rejected our request for an unknown reason",
    401: "the server has asked for the client to provide credentials",
    404: "the server could not find the requested resource",
    405: "the server does not allow this method on the requested resource",
    409: "the server reported a conflict",
    422: "the server rejected our request due to an error in our request",
    429: "the server has received too many requests and has asked us to try again later",
    503: "the server is currently unable to handle the request",
    504: "the server was unable to return a response in the time allotted, but may still be "
         "processing the request",
}


def _go_quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def unexpected_status(code: int, content_type: str, raw: bytes) -> str:
    """What client-go makes of an answer outside 2xx: a Status body's message, else its
    generic text for the code (recorded, issue 24 file 034: a 500 with a text body)."""
    try:
        body: Any = json.loads(raw)
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("kind") == "Status":
        return str(body.get("message") or "")
    media = content_type.split(";")[0].strip().lower()
    text = "unknown"
    if not media or media.startswith("text/"):
        text = raw[:2048].decode(errors="replace").strip()
    if code in (403, 415):
        return text
    if code == 406:
        return text if text and text != "unknown" else (
            "the server was unable to respond with a content type that the client supports")
    if code in _GENERIC:
        return _GENERIC[code]
    if code >= 500:
        return (f"an error on the server ({_go_quote(text)}) has prevented the request from "
                "succeeding")
    return (f"the server responded with the status code {code} but did not return more "
            "information")


_GO_TYPE_META = ('struct { APIVersion string "json:\\"apiVersion,omitempty\\""; '
                 'Kind string "json:\\"kind,omitempty\\"" }')


def json_type(value: Any) -> str:
    """The JSON type's name as Go's decoder names it in errors."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", type(None): "null"}.get(type(value), "object")


def decode(raw: bytes) -> JSON:
    """The answer as JSON, refused as the client's decoder refuses what is no object; a
    plain-text body too (recorded, issue 24 file 024: ``cannot unmarshal string``)."""
    try:
        answer: Any = json.loads(raw)
    except ValueError:
        answer = raw.decode(errors="replace")
    if not isinstance(answer, dict):
        raise WebhookCallError(
            "couldn't get version/kind; json parse error: json: cannot unmarshal "
            f"{json_type(answer)} into Go value of type {_GO_TYPE_META}")
    return answer


class WebhookCaller:
    """Posts JSON reviews; one session per simulator, closed with it."""

    def __init__(self, resolve_service: ServiceResolver | None = None) -> None:
        self._resolve_service: ServiceResolver = resolve_service or (lambda _service: None)
        self._session: aiohttp.ClientSession | None = None
        # one TLS context per caBundle: aiohttp pools connections per context, so a new
        # context per call would make every review a new TLS handshake (kube-apiserver keeps
        # its connection to a webhook alive)
        self._contexts: dict[str, ssl.SSLContext] = {}

    async def post(self, config: JSON, review: JSON, timeout: float) -> JSON:
        """The webhook's answer as JSON, or :class:`WebhookCallError` (its text as the API
        server's). ``timeout`` bounds the whole call, as the webhook's timeoutSeconds does."""
        url = target_url(config, timeout, self._resolve_service)
        parts = urlsplit(url)
        if parts.scheme != "https":
            raise WebhookCallError(f'Post "{url}": webhook URL must use https, not {parts.scheme}')
        host = parts.netloc
        bundle = str(config.get("caBundle") or "")
        context = self._contexts.get(bundle)
        if context is None:
            context = self._contexts[bundle] = _tls_context(config)
        if self._session is None:
            self._session = aiohttp.ClientSession()
        body = json.dumps(review).encode()
        try:
            async with asyncio.timeout(timeout):
                async with self._session.post(
                    url, data=body, ssl=context,
                    headers={"Content-Type": "application/json",
                             "Accept": "application/json, */*",
                             "User-Agent": "kube-apiserver-admission"},
                ) as response:
                    raw = await response.read()
                    status = response.status
                    content_type = response.headers.get("Content-Type", "")
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise WebhookCallError(f'Post "{url}": {_cause(exc, host)}') from exc
        if not 200 <= status <= 206:
            raise WebhookCallError(unexpected_status(status, content_type, raw))
        return decode(raw)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
