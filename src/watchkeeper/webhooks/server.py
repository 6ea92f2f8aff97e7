"""``WebhookServer``: the HTTPS server of admission and conversion webhooks.

Handlers are registered on paths::

    hooks = wk.webhooks.WebhookServer(tls, port=9443)

    @hooks.validating("/validate-widgets", model=Widget)
    async def check(req: AdmissionRequest[Widget]) -> None: ...

    hooks.conversion("/convert-widgets", WidgetV1alpha1, WidgetV1)

``wk.run(..., webhooks=hooks)`` serves it on every replica (no leader election, no
sharding: the API server calls any of them) under the run's supervisor, and on SIGTERM
stops accepting connections, then lets the reviews in flight finish (``drain_timeout``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import ssl
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from aiohttp import web

from watchkeeper.errors import WatchkeeperError
from watchkeeper.typed.models import CustomResource
from watchkeeper.webhooks.admission import AdmissionHandler, Handler, review_admission
from watchkeeper.webhooks.certs import CertificateManager
from watchkeeper.webhooks.conversion import ConversionHandler, review_conversion
from watchkeeper.webhooks.rules import Rules, rules
from watchkeeper.webhooks.tls import ServingTLS

__all__ = ["WebhookServer", "WebhookServerDown"]

log = logging.getLogger("watchkeeper.webhooks")

#: The largest review body accepted. An object may be 1.5 MiB in etcd and an UPDATE's review
#: carries it twice (object, oldObject), JSON-escaped: aiohttp's default (1 MiB) would refuse
#: the reviews of large objects with 413.
MAX_REVIEW_BYTES = 16 * 1024 * 1024


class WebhookServerDown(WatchkeeperError):
    """The webhook server's socket stopped serving (its supervisor restarts it)."""


class WebhookServer:
    """Admission and conversion handlers on one HTTPS port.

    ``tls``: a ``CertificateManager`` (``wk.run`` then runs its loop too: certificates
    kept valid, rotated without a restart, the caBundle published), its ``ServingTLS``, or
    a fixed ``ssl.SSLContext``. Binds 127.0.0.1 by default; in a pod pass
    ``host="0.0.0.0"``.
    """

    def __init__(self, tls: CertificateManager | ServingTLS | ssl.SSLContext,
                 host: str = "127.0.0.1",
                 port: int = 9443, *, drain_timeout: float = 10.0) -> None:
        self.tls, self.host, self.port = tls, host, port
        self.drain_timeout = drain_timeout
        self.admission: dict[str, AdmissionHandler] = {}
        self.conversions: dict[str, ConversionHandler] = {}
        self.in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._runner: web.AppRunner | None = None
        self._site: web.SockSite | None = None
        self._sock: socket.socket | None = None

    # -- registration ---------------------------------------------------------------------

    def _add_path(self, path: str) -> None:
        if not path.startswith("/"):
            raise ValueError(f"a webhook path starts with '/': {path!r}")
        if path in self.admission or path in self.conversions:
            raise ValueError(f"webhook path {path} is registered twice")
        if self._runner is not None:
            raise RuntimeError("register webhooks before the server starts")

    def _admission(self, path: str, mutating: bool, model: type | None, timeout: float,
                   failure_policy: Literal["Fail", "Ignore"], rules: Rules,
                   ) -> Callable[[Handler], Handler]:
        self._add_path(path)

        def register(fn: Handler) -> Handler:
            self.admission[path] = AdmissionHandler(path, fn, mutating, model, timeout,
                                                    failure_policy, rules)
            return fn

        return register

    def validating(self, path: str, *, model: type | None = None, timeout: float = 10.0,
                   failure_policy: Literal["Fail", "Ignore"] = "Fail",
                   name: str | None = None,
                   operations: Sequence[str] | str = ("CREATE", "UPDATE"),
                   resources: Sequence[str] | str = (),
                   api_groups: Sequence[str] | str | None = None,
                   api_versions: Sequence[str] | str | None = None,
                   scope: Literal["*", "Namespaced", "Cluster"] = "*",
                   object_selector: Mapping[str, Any] | None = None,
                   namespace_selector: Mapping[str, Any] | None = None,
                   side_effects: Literal["None", "NoneOnDryRun"] = "None",
                   match_policy: Literal["Equivalent", "Exact"] = "Equivalent",
                   ) -> Callable[[Handler], Handler]:
        """Decorate ``fn(request) -> None`` (raise ``Denied`` to refuse). The keywords after
        ``failure_policy`` are its registration (``Rules``; ``watchkeeper webhooks`` prints
        it): ``resources`` default to ``model``'s."""
        return self._admission(path, False, model, timeout, failure_policy, rules(
            name=name, operations=operations, resources=resources, api_groups=api_groups,
            api_versions=api_versions, scope=scope, object_selector=object_selector,
            namespace_selector=namespace_selector, side_effects=side_effects,
            match_policy=match_policy))

    def mutating(self, path: str, *, model: type | None = None, timeout: float = 10.0,
                 failure_policy: Literal["Fail", "Ignore"] = "Fail",
                 name: str | None = None,
                 operations: Sequence[str] | str = ("CREATE", "UPDATE"),
                 resources: Sequence[str] | str = (),
                 api_groups: Sequence[str] | str | None = None,
                 api_versions: Sequence[str] | str | None = None,
                 scope: Literal["*", "Namespaced", "Cluster"] = "*",
                 object_selector: Mapping[str, Any] | None = None,
                 namespace_selector: Mapping[str, Any] | None = None,
                 side_effects: Literal["None", "NoneOnDryRun"] = "None",
                 match_policy: Literal["Equivalent", "Exact"] = "Equivalent",
                 reinvocation_policy: Literal["Never", "IfNeeded"] = "Never",
                 ) -> Callable[[Handler], Handler]:
        """Decorate ``fn(request) -> object | None`` (the changed object; None: unchanged);
        its registration as for ``validating``, and ``reinvocation_policy``."""
        return self._admission(path, True, model, timeout, failure_policy, rules(
            name=name, operations=operations, resources=resources, api_groups=api_groups,
            api_versions=api_versions, scope=scope, object_selector=object_selector,
            namespace_selector=namespace_selector, side_effects=side_effects,
            match_policy=match_policy, reinvocation_policy=reinvocation_policy))

    def conversion(self, path: str, *versions: type[CustomResource]) -> ConversionHandler:
        """Convert between ``versions`` (classes of one resource) with ``wk.convert``."""
        self._add_path(path)
        handler = self.conversions[path] = ConversionHandler(path, list(versions))
        return handler

    # -- HTTP -----------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.Response:
        self.in_flight += 1
        self._idle.clear()
        try:
            response = await self._review(request)
        finally:
            self.in_flight -= 1
            if self.in_flight == 0:
                self._idle.set()
        if self._stale(request):
            response.force_close()
        return response

    async def _review(self, request: web.Request) -> web.Response:
        path = request.path
        try:
            review = json.loads(await request.read())
            if not isinstance(review, dict):
                raise ValueError("the body is not a JSON object")
            if path in self.admission:
                out = await review_admission(self.admission[path], review)
            else:
                out = review_conversion(self.conversions[path], review)
        except ValueError as exc:  # (json.JSONDecodeError is one)
            log.warning("webhook %s: bad review: %s", path, exc)
            return web.json_response({"error": str(exc)}, status=400)
        return web.json_response(out)

    def _stale(self, request: web.Request) -> bool:
        """Whether the request came over a connection opened under an older serving
        certificate. Such a connection is closed after this answer (``Connection: close``):
        kube-apiserver keeps one keep-alive connection open for good, so without this it would
        never see a rotated certificate; with it, its next review opens a connection that
        gets the new one, and none is refused (a client reads the answer before the close)."""
        serving = self.tls.tls if isinstance(self.tls, CertificateManager) else self.tls
        if not isinstance(serving, ServingTLS) or request.transport is None:
            return False
        ssl_object = request.transport.get_extra_info("ssl_object")
        return ssl_object is not None and ssl_object.context is not serving.current

    @property
    def paths(self) -> Sequence[str]:
        return [*self.admission, *self.conversions]

    @property
    def certificates(self) -> CertificateManager | None:
        """The manager whose certificates this server serves, if it was given one."""
        return self.tls if isinstance(self.tls, CertificateManager) else None

    def _context(self) -> ssl.SSLContext:
        if isinstance(self.tls, CertificateManager):
            return self.tls.tls.server_context()
        return self.tls.server_context() if isinstance(self.tls, ServingTLS) else self.tls

    async def start(self) -> None:
        """Listen (a busy port raises ``OSError`` here); with a ``CertificateManager``,
        its certificates are read (or made) first."""
        if isinstance(self.tls, CertificateManager) and not self.tls.tls.cert_pem:
            await self.tls.ensure()
        app = web.Application(client_max_size=MAX_REVIEW_BYTES)
        for path in self.paths:
            app.router.add_post(path, self._handle)
        family = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.create_server((self.host, self.port), family=family)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        try:
            await runner.setup()
            site = web.SockSite(runner, sock, ssl_context=self._context())
            await site.start()
        except BaseException:
            sock.close()
            await runner.cleanup()
            raise
        self._runner, self._site, self._sock = runner, site, sock
        if self.port == 0:
            self.port = int(sock.getsockname()[1])
        log.info("webhook server on %s: %s", self.url, ", ".join(self.paths))

    @property
    def serving(self) -> bool:
        return self._sock is not None and self._sock.fileno() >= 0

    async def serve(self, stop: asyncio.Event | None = None, check_interval: float = 5.0
                    ) -> None:
        """Start if needed and serve until ``stop`` is set (then drain) or cancelled;
        raise ``WebhookServerDown`` if the socket stops serving."""
        if self._runner is None:
            await self.start()
        stop = stop or asyncio.Event()
        try:
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), check_interval)
                if not self.serving:
                    raise WebhookServerDown(f"the webhook server on {self.url} stopped "
                                            "listening")
        finally:
            await self.stop()

    async def stop(self) -> None:
        """Stop accepting connections, wait up to ``drain_timeout`` for the reviews in
        flight, then close."""
        site, self._site = self._site, None
        if site is not None:
            await site.stop()
        if self.in_flight:
            log.info("webhook server: draining %d review(s) in flight", self.in_flight)
            try:
                await asyncio.wait_for(self._idle.wait(), self.drain_timeout)
            except TimeoutError:
                log.warning("webhook server: %d review(s) still running after %gs",
                            self.in_flight, self.drain_timeout)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    def status(self) -> dict[str, Any]:
        """For /readyz: serving or not, and each handler's counts."""
        handlers: dict[str, Any] = {**self.admission, **self.conversions}
        return {
            "resource": f"webhook server {self.url}",
            "ready": self.serving,
            "state": "healthy" if self.serving else "stopped",
            "in_flight": self.in_flight,
            "handlers": {p: {"requests": h.stats.requests, "denials": h.stats.denials,
                             "errors": h.stats.errors} for p, h in handlers.items()},
        }
