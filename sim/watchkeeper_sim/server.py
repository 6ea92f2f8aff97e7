"""``ApiServer``: an embedded, real-HTTP(S) kube-apiserver 1.28 simulator with fault injection.

Usage::

    async with ApiServer() as srv:            # 127.0.0.1, random port
        client = srv.client()                 # watchkeeper.client.Client as "admin"
        srv.faults.error(503, watch=True)     # every watch now gets a 503
        srv.faults.clear()
        assert srv.count(is_watch=True) == 1

Admin endpoint (same port, no authentication, never faulted, not in the request log):

- ``GET /_sim/faults``                list the active faults
- ``POST /_sim/faults``               add one: JSON ``{"kind": "error", "code": 503,
  "count": 2, "duration": 5, "method": "GET", "path_prefix": "/api/v1", "user": "limited",
  "watch": true, "retry_after": 1, "delay": 0.5, "data": "...", "after_events": 3,
  "count_refused": false, "plain": false}`` (only ``kind`` is required) -> 201
  ``{"id": N, ...}``
- ``DELETE /_sim/faults`` / ``DELETE /_sim/faults/{id}``   clear all / remove one
- ``POST /_sim/compact``, ``POST /_sim/stop-watches``, ``POST /_sim/reset-watches``
  (the last two take an optional ``?path_prefix=/api/v1/...`` to pick watches)
- ``GET /_sim/requests``              the request log as JSON

While ``refuse`` is active the admin endpoint is unreachable too: give the fault a
``duration`` or clear it from Python. Connection attempts are counted when accepted, so they
are NOT counted while the listener is closed; ``refuse(count_refused=True)`` accepts and
resets each connection instead, so attempts stay countable.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import logging
import os
import socket
import ssl
import struct
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import yaml
from aiohttp import web

from watchkeeper.client.auth import StaticToken
from watchkeeper.client.config import ClientConfig
from watchkeeper.supervisor import start_task
from watchkeeper_sim import status as _status
from watchkeeper_sim.api.deprecation import DEPRECATION, add_warning, deprecation_warning
from watchkeeper_sim.api.handlers import HandlerOptions, Handlers
from watchkeeper_sim.api.health import HEALTH_PATHS, health_text
from watchkeeper_sim.api.nonresource import serve_document
from watchkeeper_sim.auth.escalation import REQUEST_USER, EscalationCheck
from watchkeeper_sim.auth.impersonation import ImpersonationError, impersonation, requested
from watchkeeper_sim.auth.rbac import Attributes, PolicyObjects, Rbac, User
from watchkeeper_sim.auth.reviews import USER_INFO, Reviews, user_info
from watchkeeper_sim.auth.tls import ServerTLS, peer_identity
from watchkeeper_sim.auth.tokens import ServiceAccountTokens
from watchkeeper_sim.faults import KINDS, Faults, RequestInfo
from watchkeeper_sim.model import JSON, ResourceType
from watchkeeper_sim.storage import services as _services
from watchkeeper_sim.storage.bootstrap import bootstrap_objects
from watchkeeper_sim.storage.gc import GarbageCollector
from watchkeeper_sim.storage.registry import Registry, present
from watchkeeper_sim.storage.resources import BUILTIN_TYPES
from watchkeeper_sim.storage.store import ObjectStore, StoreError
from watchkeeper_sim.webhooks.admission import Admission
from watchkeeper_sim.webhooks.call import WebhookCaller
from watchkeeper_sim.webhooks.conversion import Converter
from watchkeeper_sim.wire import body as _wire
from watchkeeper_sim.wire import http as _http
from watchkeeper_sim.wire.http import Route, parse_path, verb_of
from watchkeeper_sim.wire.reqlog import RequestRecord, count

if TYPE_CHECKING:
    from watchkeeper.client import Client

log = logging.getLogger("watchkeeper_sim")

VERSION_INFO = {
    "major": "1",
    "minor": "28",
    "gitVersion": "v1.28.7",
    "gitCommit": "9258ab62ed50ee9f1715cbb078b1e760e823bfcb",
    "gitTreeState": "clean",
    "buildDate": "2026-12-02T13:08:25Z",
    "goVersion": "go1.21.13",
    "compiler": "gc",
    "platform": "linux/amd64",
}
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public")
ROOT_CA_DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal "
    "endpoints such as the internal service IP or kubernetes.default.svc. No other usage is "
    "guaranteed across distributions of Kubernetes clusters."
)
ROOT_CA_PLACEHOLDER = "(plain-HTTP simulator: no CA)\n"
_ERROR_TEXT = {
    500: ("InternalError", "Internal error occurred: injected fault"),
    502: (None, "bad gateway (injected fault)"),
    503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
    504: ("Timeout", "the server was unable to return a response in the time allotted"),
}
# APF names the flow schema and priority level of every request it classifies (174, 175);
# fixed values stand for the simulator's one imaginary "workload-low" level.
APF_HEADERS = {
    "X-Kubernetes-Pf-Flowschema-Uid": "5e7d4c3b-2a19-4f08-9e6d-7c5b4a392817",
    "X-Kubernetes-Pf-Prioritylevel-Uid": "0f1e2d3c-4b5a-4697-8887-a6b5c4d3e2f1",
}


class _ResetProtocol(asyncio.Protocol):
    """Accepts a connection and resets it at once (the countable form of 'refuse')."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        if isinstance(transport, asyncio.Transport):
            transport.abort()
        else:
            transport.close()


class ApiServer:
    """A kube-apiserver look-alike on 127.0.0.1 for tests, demos and kubectl."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        tls: bool = False,
        watch_list: bool = True,
        bookmark_interval: float = 60.0,
        bookmark_lead: float = 2.0,
        initial_events_end_delay: float = 0.0,
        history_size: int = 10_000,
        history_age: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        too_large_rv_wait: float = 0.5,
        default_watch_timeout: float | None = None,
        max_body_bytes: int = 3 * 1024 * 1024,
        namespaces: Iterable[str] = DEFAULT_NAMESPACES,
        request_log_limit: int | None = None,
        root_ca_configmaps: bool = False,
        garbage_collector: bool = True,
        namespace_cleanup_delay: float = 0.05,
        crd_watch_close_delay: float = 1.0,
        crd_cleanup_delay: float = 0.05,
        service_cidr: str = "10.0.0.0/24",
        node_port_range: tuple[int, int] = (30000, 32767),
    ) -> None:
        """
        ``watch_list``: the WatchList feature gate (sendInitialEvents). ``bookmark_interval``:
        seconds between BOOKMARKs on watches that allow them; one more is sent
        ``bookmark_lead`` seconds before a ``timeoutSeconds`` deadline (none when the timeout
        is not longer). ``initial_events_end_delay``: how long after the initial events of a
        streaming list its ``k8s.io/initial-events-end`` bookmark comes (the apiserver sends
        it on its next ~1 s bookmark tick, after any live events in between, file 065; 0 =
        at once, which keeps tests fast). ``history_size`` /
        ``history_age`` bound the change history (older resourceVersions are 410 Gone);
        ``clock`` measures that age. ``too_large_rv_wait``: how long a request for a future
        resourceVersion waits before its 504. ``default_watch_timeout``: server-side watch
        timeout when the client sends no timeoutSeconds (None = unlimited).
        ``request_log_limit``: keep only about this many of the newest ``requests`` (None =
        all, for tests that count every request; ``watchkeeper sim`` keeps 100,000 so a
        client stuck in a retry loop cannot grow it without bound).
        ``root_ca_configmaps``: like a cluster's controller manager, put a ``kube-root-ca.crt``
        ConfigMap in every namespace (``watchkeeper sim`` does; off by default so tests see
        only the objects they made).
        ``garbage_collector``: run kube-controller-manager's garbage collector (dependents of
        deleted owners go; Foreground/Orphan deletions finish); False is a cluster without
        one, where those finalizers stay (reference run 1). ``namespace_cleanup_delay``:
        seconds before the namespace controller empties and removes a deleted namespace
        (a real one took ~5 s; tests want it prompt). ``crd_watch_close_delay``: seconds
        between a CRD going away (its objects' last DELETED lines, 404 for the resource) and
        the server ending the watches on that resource (~1 s on a real one, file 154).
        ``crd_cleanup_delay``: how often a deleted CRD whose custom resources still have
        finalizers checks whether they are gone (the real finalizer polls every 5 s).
        ``service_cidr`` / ``node_port_range``: where Services get their cluster IPs and
        node ports (kube-apiserver's --service-cluster-ip-range default, and its
        --service-node-port-range).
        """
        if request_log_limit is not None and request_log_limit < 1:
            raise ValueError(f"request_log_limit must be >= 1 or None, got {request_log_limit}")
        self.request_log_limit = request_log_limit
        self.host = host
        self._requested_port = port
        self.port = port
        self.tls = tls
        self.store = ObjectStore(history_size=history_size, history_age=history_age, clock=clock)
        self.registry = Registry(self.store, wall_clock=wall_clock,
                                 namespace_cleanup_delay=namespace_cleanup_delay,
                                 crd_watch_close_delay=crd_watch_close_delay,
                                 crd_cleanup_delay=crd_cleanup_delay,
                                 service_network=_services.Network(service_cidr,
                                                                   node_port_range))
        if garbage_collector:
            self.registry.gc = GarbageCollector(self.registry)
        if root_ca_configmaps:
            self.registry.on_namespace_created = self._publish_root_ca
        self.rbac = Rbac(PolicyObjects(self.store))
        self.registry.admit = EscalationCheck(self.rbac)
        self.tokens = ServiceAccountTokens(self.store, wall_clock)
        self.faults = Faults()
        self.faults.on_change = self._faults_changed
        self.faults.on_compact = self.compact
        self.requests: list[RequestRecord] = []
        self.connection_attempts = 0
        self._stopping = asyncio.Event()
        self.handlers = Handlers(
            self.store,
            self.registry,
            self.faults,
            HandlerOptions(
                watch_list=watch_list,
                bookmark_interval=bookmark_interval,
                bookmark_lead=bookmark_lead,
                initial_events_end_delay=initial_events_end_delay,
                too_large_rv_wait=too_large_rv_wait,
                default_watch_timeout=default_watch_timeout,
                max_body_bytes=max_body_bytes,
            ),
            self._stopping,
        )
        self.webhook_caller = WebhookCaller()
        self.handlers.writes.admission = Admission(
            self._webhook_configurations, self._namespace_labels, self.webhook_caller)
        self.handlers.writes.user_info = lambda request: user_info(request[USER_INFO])
        self.handlers.subresources[("", "serviceaccounts", "token")] = self._token_request
        # CRD conversion webhooks, called over HTTPS as kube-apiserver calls them
        self.conversion = Converter(self.webhook_caller)
        self.handlers.converter = self.conversion
        # matchPolicy Equivalent: a webhook shown another version of a custom resource
        self.handlers.writes.admission.versions = self.handlers.versions
        self.handlers.writes.admission.convert = self.handlers.convert_to
        Reviews(self.rbac, self.handlers.read_body, self.registry.now).register(
            self.handlers.subresources)
        self._tls = ServerTLS() if tls else None
        self._ssl_ctx: ssl.SSLContext | None = self._tls.context() if self._tls else None
        self._runner: web.AppRunner | None = None
        self._server: asyncio.Server | None = None
        self._opening: asyncio.Task[None] | None = None
        self._hung: set[asyncio.Future[None]] = set()
        self._refusing = False
        self._admin_transport: asyncio.BaseTransport | None = None  # spared by aborts
        for rt in BUILTIN_TYPES:
            self.store.register(rt)
        self._namespaces = tuple(namespaces)  # what a data-losing restart starts with again
        for ns in self._namespaces:
            self.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        self.reconcile_policy()

    # ---- lifecycle -------------------------------------------------------------------------

    @property
    def url(self) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{self.host}:{self.port}"

    async def start(self) -> None:
        """Start serving (the port is chosen now when it was 0, and kept across restarts)."""
        if self._runner is not None:
            return
        self._stopping = asyncio.Event()
        self.handlers.stopping = self._stopping
        app = web.Application(client_max_size=self.handlers.opts.max_body_bytes + 1)
        app.on_response_prepare.append(add_warning)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        if not self.faults.refusing or (self.faults.refusing.count_refused):
            await self._serve(self._bind())

    async def stop(self) -> None:
        """Stop serving: end watches, drop connections, close the listener."""
        self.handlers.stop_all()
        pending = [start_task(w.done.wait(), name="simulator: watch end", awaited=True)
                   for w in self.handlers.watches]
        if pending:  # let ended watches send their final chunk, as a graceful shutdown does
            _, late = await asyncio.wait(pending, timeout=1.0)
            for waiter in late:
                waiter.cancel()
        self._stopping.set()
        for fut in list(self._hung):
            if not fut.done():
                fut.set_result(None)
        self._close_listener()
        if self._opening is not None:
            self._opening.cancel()
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await self._opening
            self._opening = None
            self._close_listener()
        self.registry.cancel_background()
        await self.webhook_caller.close()
        if self._runner is not None:
            self._abort_connections()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._runner.cleanup(), 2.0)
            self._runner = None

    async def restart(self, keep_data: bool = True) -> None:
        """Stop and start again on the same port; ``keep_data=False`` empties the store
        (the resourceVersion keeps counting up and the history is dropped, like a new
        apiserver on a fresh etcd that happens to be ahead)."""
        await self.stop()
        if not keep_data:
            self.store.clear()
            for ns in self._namespaces:
                self.create_object({"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": ns}})
        self.reconcile_policy()
        await self.start()

    async def __aenter__(self) -> ApiServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ---- the listening socket --------------------------------------------------------------

    def _bind(self) -> socket.socket:
        """Bind and listen synchronously, so connections queue even before accept starts."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        sock.listen(128)
        sock.setblocking(False)
        self.port = sock.getsockname()[1]
        return sock

    async def _serve(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._protocol, sock=sock, ssl=self._ssl_ctx, backlog=128
        )

    def _protocol(self) -> asyncio.BaseProtocol:
        self.connection_attempts += 1
        refusing = self.faults.refusing
        if refusing is not None and refusing.count_refused:
            self.faults.take("refuse")
            return _ResetProtocol()
        assert self._runner is not None and self._runner.server is not None
        proto: asyncio.BaseProtocol = self._runner.server()
        return proto

    def _close_listener(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    def _abort_connections(self) -> None:
        server = self._runner.server if self._runner is not None else None
        for handler in list(getattr(server, "connections", []) or []):
            transport = getattr(handler, "transport", None)
            if transport is not None and transport is not self._admin_transport:
                transport.abort()

    def _faults_changed(self) -> None:
        """React to refuse being switched on or off: close or reopen the listener."""
        if self._runner is None or self._stopping.is_set():
            return
        refusing = self.faults.refusing
        if refusing is not None and not self._refusing:
            # going down: established connections die too, like a crashed apiserver's
            self._refusing = True
            self.handlers.reset_all()
            self._abort_connections()
        elif refusing is None:
            self._refusing = False
        if refusing is not None and not refusing.count_refused:
            if self._server is not None or self._opening is not None:
                if self._opening is not None:
                    self._opening.cancel()
                    self._opening = None
                self._close_listener()
                self.handlers.reset_all()
                self._abort_connections()
        elif self._server is None and self._opening is None:
            try:
                sock = self._bind()
            except OSError:
                log.exception("cannot reopen port %s", self.port)
                return
            self._opening = start_task(self._reopen(sock), name="simulator: reopen listener")

    async def _reopen(self, sock: socket.socket) -> None:
        try:
            await self._serve(sock)
        except BaseException:
            sock.close()
            raise
        finally:
            self._opening = None

    # ---- control ---------------------------------------------------------------------------

    def reconcile_policy(self) -> None:
        """Create the default ClusterRoles/ClusterRoleBindings and APF objects that are
        missing (done at construction and on every restart, as kube-apiserver's bootstrap
        controllers do; see _bootstrap.py). Ones present are left as they are."""
        for obj, manager in bootstrap_objects():
            rt = self.resource(obj["apiVersion"], obj["kind"])
            if self.store.peek(rt, "", obj["metadata"]["name"]) is None:
                self.registry.create(rt, "", copy.deepcopy(obj), manager=manager)

    def compact(self) -> None:
        """Drop the change history now: every older resourceVersion becomes 410 Gone."""
        self.store.compact()

    def stop_all_watches(self, path_prefix: str | None = None) -> None:
        """End every open watch cleanly (as at a server-side timeout); with ``path_prefix``
        only watches whose URL path starts with it (e.g. ``/api/v1/namespaces/x/configmaps``)."""
        self.handlers.stop_all(path_prefix)

    def reset_watches(self, path_prefix: str | None = None) -> None:
        """Abort the connection of every open watch (as a crash or a proxy reset would); with
        ``path_prefix`` only watches whose URL path starts with it."""
        self.handlers.reset_all(path_prefix)

    def count(self, method: str | None = None, is_watch: bool | None = None,
              is_list: bool | None = None, since: float | None = None, **more: Any) -> int:
        """Requests in the log matching all criteria; ``since`` is a time.monotonic() value.
        Also accepts ``path_prefix``, ``status`` and ``user``."""
        return count(self.requests, method=method, is_watch=is_watch, is_list=is_list,
                     since=since, **more)

    @property
    def open_watches(self) -> int:
        return len(self.handlers.watches)

    # ---- users and clients -----------------------------------------------------------------

    def _publish_root_ca(self, namespace: str) -> None:
        """kube-controller-manager's root-ca-cert-publisher: every namespace gets the CA that
        verifies this server (a placeholder without TLS), so a client that counts all
        ConfigMaps of a namespace meets it here as it would on a cluster."""
        ca = self._tls.ca_pem.decode() if self._tls is not None else ROOT_CA_PLACEHOLDER
        self.registry.create(self.resource("v1", "configmaps"), namespace, {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "kube-root-ca.crt", "annotations": {
                "kubernetes.io/description": ROOT_CA_DESCRIPTION}},
            "data": {"ca.crt": ca},
        }, manager="kube-controller-manager")

    def add_user(self, name: str, token: str | None = None, groups: Iterable[str] = ()) -> str:
        """Create a user with a bearer token (returned); grant it rights with ``rbac.grant`` or
        with Role/RoleBinding objects (service-account tokens come from TokenRequest instead)."""
        return self.rbac.add_user(name, token, groups)

    def token(self, user: str = "admin") -> str:
        return self.rbac.token(user)

    @property
    def ca_pem(self) -> bytes | None:
        return self._tls.ca_pem if self._tls else None

    def client_cert(self, user: str, groups: Iterable[str] = ()) -> tuple[bytes, bytes]:
        """(cert PEM, key PEM) for an mTLS user: CN = user, one O per group (tls=True only)."""
        if self._tls is None:
            raise RuntimeError("client certificates need ApiServer(tls=True)")
        return self._tls.client_ca.issue(user, tuple(groups))

    def client_config(self, user: str = "admin", *, cert_groups: Iterable[str] | None = None
                      ) -> ClientConfig:
        """A ClientConfig for ``user``: its bearer token, or with ``cert_groups`` given, a
        client certificate for that user and those groups instead."""
        if cert_groups is not None:
            cert, key = self.client_cert(user, cert_groups)
            return ClientConfig(server=self.url, ca_data=self.ca_pem, client_cert_data=cert,
                                client_key_data=key)
        return ClientConfig(server=self.url, ca_data=self.ca_pem,
                            auth=StaticToken(self.rbac.token(user)))

    def client(self, user: str = "admin") -> Client:
        """A watchkeeper Client talking to this server as ``user``."""
        from watchkeeper.client import Client

        return Client(self.client_config(user))

    def kubeconfig(self, path: str | os.PathLike[str], user: str = "admin") -> str:
        """Write a kubeconfig (for kubectl or Client.from_env) and return its path."""
        cluster: JSON = {"server": self.url}
        if self.ca_pem:
            cluster["certificate-authority-data"] = base64.b64encode(self.ca_pem).decode()
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "watchkeeper-sim", "cluster": cluster}],
            "users": [{"name": user, "user": {"token": self.rbac.token(user)}}],
            "contexts": [{"name": "watchkeeper-sim",
                          "context": {"cluster": "watchkeeper-sim", "user": user,
                                      "namespace": "default"}}],
            "current-context": "watchkeeper-sim",
            "preferences": {},
        }
        fd = os.open(os.fspath(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            yaml.safe_dump(doc, fh, sort_keys=False)
        return os.fspath(path)

    # ---- direct object access (no HTTP, no RBAC) -------------------------------------------

    def resource(self, api_version: str, kind_or_plural: str) -> ResourceType:
        """The ResourceType for ``("apps/v1", "Deployment")`` or ``("v1", "configmaps")``."""
        group, _, version = api_version.rpartition("/")
        for rt in self.store.types.values():
            if (rt.group, rt.version) == (group, version) and kind_or_plural in (rt.kind,
                                                                                 rt.plural):
                return rt
        raise KeyError(f"no resource {kind_or_plural!r} in {api_version!r}")

    def create_object(self, obj: JSON, manager: str = "watchkeeper-sim") -> JSON:
        """Create an object as if POSTed (namespace from metadata, 'default' if unset)."""
        rt = self.resource(obj["apiVersion"], obj["kind"])
        ns = (obj.get("metadata") or {}).get("namespace") or "default"
        return self.registry.create(rt, ns if rt.namespaced else "", obj, manager=manager)

    def get_object(self, api_version: str, kind: str, name: str, *, namespace: str = "default"
                   ) -> JSON:
        rt = self.resource(api_version, kind)
        return present(self.store.get(rt, namespace if rt.namespaced else "", name), rt)

    def update_object(self, obj: JSON, manager: str = "watchkeeper-sim",
                      subresource: str = "") -> JSON:
        rt = self.resource(obj["apiVersion"], obj["kind"])
        meta = obj["metadata"]
        ns = meta.get("namespace", "default") if rt.namespaced else ""
        return self.registry.update(rt, ns, meta["name"], obj, manager=manager,
                                    subresource=subresource)

    def delete_object(self, api_version: str, kind: str, name: str, *, namespace: str = "default"
                      ) -> JSON:
        rt = self.resource(api_version, kind)
        return self.registry.delete(rt, namespace if rt.namespaced else "", name)

    # ---- request handling ------------------------------------------------------------------

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        if request.path.startswith("/_sim/"):
            return await self._admin(request)
        route = parse_path(request.path)
        verb = verb_of(request.method, route, request.query) if route else request.method.lower()
        rec = RequestRecord(
            time=time.monotonic(),
            wall_time=time.time(),
            method=request.method,
            path=request.path,
            query=dict(request.query),
            is_watch=verb == "watch",
            is_list=verb == "list",
            verb=verb,
        )
        self.requests.append(rec)
        limit = self.request_log_limit
        if limit is not None and len(self.requests) >= 2 * limit:
            del self.requests[:-limit]  # amortized: one trim per ``limit`` requests
        request[_http.RECORD] = rec
        try:
            resp = await self._serve_request(request, rec, route, verb)
        except StoreError as exc:
            resp = _http.error_response(exc)
        except Exception as exc:  # a simulator bug must still answer like a server
            log.exception("simulator error on %s %s", request.method, request.path)
            resp = _http.status_response(_status.internal(
                f"Internal error occurred: {type(exc).__name__}: {exc}", "InternalError"))
        _wire.prettify(request, resp)
        if not request.path.startswith("/openapi/"):
            _http.compress(request, resp)
        _wire.chunk(request, resp)
        if rec.status is None:
            rec.status = resp.status
        return resp

    def _authenticate(self, request: web.Request) -> User | None:
        """The caller: client certificate, else bearer token, else anonymous; None = 401."""
        transport = request.transport
        if self._tls is not None and transport is not None:
            ident = peer_identity(transport.get_extra_info("peercert"))
            if ident is not None:
                return User(ident[0], (*ident[1], "system:authenticated"))
        header = request.headers.get("Authorization", "")
        if header:
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "bearer":
                return None
            token = token.strip()
            return self.rbac.authenticate(token) or self.tokens.authenticate(token)
        return self.rbac.anonymous()

    async def _serve_request(
        self, request: web.Request, rec: RequestRecord, route: Route | None, verb: str
    ) -> web.StreamResponse:
        user = self._authenticate(request)
        if user is None:
            return _http.status_response(_status.unauthorized())
        if requested(request.headers):
            try:
                acting = impersonation(request.headers, user)
            except ImpersonationError as exc:
                return _http.status_response(_status.bad_request(str(exc)))
            for check in acting.checks:
                decision = self.rbac.authorize(check)
                if not decision.allowed:
                    return _http.forbidden_response(self.rbac.forbidden(check, decision.reason))
            user = acting.user
        request[USER_INFO] = user
        rec.user = user.name
        request[_http.USER] = user.name
        info = RequestInfo(request.method, request.path, user.name, rec.is_watch)
        faulted = await self._apply_faults(request, rec, info)
        if faulted is not None:
            return faulted
        if route is None:
            return self._non_resource(request, user)
        attrs = Attributes(user=user, verb=verb, api_group=route.group, resource=route.resource,
                           subresource=route.subresource, namespace=route.namespace,
                           name=route.name)
        decision = self.rbac.authorize(attrs)
        if not decision.allowed:
            return _http.forbidden_response(self.rbac.forbidden(attrs, decision.reason))
        rt = self.store.lookup(route.group, route.version, route.resource)
        warning = deprecation_warning(self.store, rt) if rt is not None else None
        if warning is not None:
            request[DEPRECATION] = warning
        ua = request.headers.get("User-Agent", "")
        request[_http.MANAGER] = request.query.get("fieldManager") or ua.split("/")[0] or "unknown"
        token = REQUEST_USER.set(user)  # who writes, for RBAC escalation prevention
        try:
            return await self.handlers.serve(request, route, verb, request[_http.MANAGER], info)
        finally:
            REQUEST_USER.reset(token)

    async def _apply_faults(
        self, request: web.Request, rec: RequestRecord, info: RequestInfo
    ) -> web.StreamResponse | None:
        hang = self.faults.take("hang", info)
        if hang is not None:
            rec.fault = "hang"
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._hung.add(fut)
            self.faults.hold(hang)
            try:
                # this fault's own state, not "is some hang fault still active": with
                # count=N the fault leaves the active list at the Nth request, and the N
                # requests it caught must go on hanging (issue 10, item 14)
                while not fut.done() and hang.holding:
                    await asyncio.wait({fut}, timeout=0.1)
            finally:
                self._hung.discard(fut)
                self.faults.release(hang)
            transport = request.transport
            if transport is not None:
                transport.abort()
            raise asyncio.CancelledError  # nothing is sent: the connection is gone
        slow = self.faults.take("slow", info)
        if slow is not None:
            rec.fault = "slow"
            await asyncio.sleep(slow.delay)
        throttle = self.faults.take("throttle", info)
        if throttle is not None:
            rec.fault = "throttle"
            if throttle.delay:
                await asyncio.sleep(throttle.delay)  # APF queue-wait timeout (175)
            ra = throttle.retry_after if throttle.retry_after is not None else 1
            headers = {"Retry-After": _fmt(ra)}
            if throttle.limiter == "apf":
                headers.update(APF_HEADERS)
            return _http.text_response("Too many requests, please try again later.\n", 429,
                                       headers)
        err = self.faults.take("error", info)
        if err is not None:
            rec.fault = "error"
            reason, default = _ERROR_TEXT.get(err.code, (None, f"injected fault {err.code}"))
            headers = {"Retry-After": _fmt(err.retry_after)} if err.retry_after is not None else {}
            if err.plain:  # a gateway's or kube-aggregator's answer: no Status
                return _http.text_response(f"{err.message or default}\n", err.code, headers)
            details = {"retryAfterSeconds": int(err.retry_after)} if err.retry_after else None
            return _http.status_response(
                _status.status(err.code, reason, err.message or default, details), headers)
        return None

    def _non_resource(self, request: web.Request, user: User) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        attrs = Attributes(user=user, verb=request.method.lower(), path=path)
        decision = self.rbac.authorize(attrs)
        if not decision.allowed:
            return _http.forbidden_response(self.rbac.forbidden(attrs, decision.reason))
        if path == "/version":
            return _http.json_response(VERSION_INFO)
        if path in HEALTH_PATHS:
            return _http.text_response(health_text(path, request.query), 200)
        doc = serve_document(request, path, list(self.store.types.values()),
                             f"{self.host}:{self.port}")
        return doc if doc is not None else _http.page_not_found()

    def _webhook_configurations(self, mutating: bool) -> list[JSON]:
        """The stored Mutating- or ValidatingWebhookConfigurations (admission reads them on
        every write, so a new one applies at once; a real server's informer takes ~1 s)."""
        plural = "mutatingwebhookconfigurations" if mutating else \
            "validatingwebhookconfigurations"
        rt = self.store.lookup("admissionregistration.k8s.io", "v1", plural)
        return [] if rt is None else self.store.objects(rt)

    def _namespace_labels(self, name: str) -> JSON | None:
        ns = self.store.peek(self.registry.ns_type(), "", name)
        return None if ns is None else dict((ns.get("metadata") or {}).get("labels") or {})

    async def _token_request(self, request: web.Request, route: Route, namespace: str,
                             verb: str) -> web.StreamResponse:
        """POST .../serviceaccounts/{name}/token (TokenRequest): the only verb it serves."""
        if verb != "create":
            return _http.status_response(_status.method_not_allowed())
        raw = await self.handlers.read_body(request)
        body = _http.decode_write_body(request, raw, "TokenRequest")
        return _http.json_response(self.tokens.request(namespace, route.name, body), 201)

    # ---- admin endpoint --------------------------------------------------------------------

    async def _admin(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/")
        method = request.method
        try:
            if path == "/_sim/faults" and method == "GET":
                return _http.json_response({"faults": self.faults.describe()})
            if path == "/_sim/faults" and method == "POST":
                spec = await request.json()
                if not isinstance(spec, dict) or spec.get("kind") not in KINDS:
                    return _http.json_response(
                        {"error": f"'kind' must be one of {', '.join(KINDS)}"}, 400)
                kind = spec.pop("kind")
                self._admin_transport = request.transport
                try:
                    fault = self.faults.add(kind, **spec)
                finally:
                    self._admin_transport = None
                return _http.json_response(fault.describe(), 201)
            if path == "/_sim/faults" and method == "DELETE":
                self.faults.clear()
                return _http.json_response({"faults": []})
            if path.startswith("/_sim/faults/") and method == "DELETE":
                self.faults.remove(int(path.rsplit("/", 1)[1]))
                return _http.json_response({"faults": self.faults.describe()})
            if path == "/_sim/compact" and method == "POST":
                self.compact()
                return _http.json_response({"resourceVersion": str(self.store.rv)})
            if path == "/_sim/stop-watches" and method == "POST":
                self.stop_all_watches(request.query.get("path_prefix"))
                return _http.json_response({})
            if path == "/_sim/reset-watches" and method == "POST":
                self.reset_watches(request.query.get("path_prefix"))
                return _http.json_response({})
            if path == "/_sim/requests" and method == "GET":
                return _http.json_response({"requests": [vars(r) for r in self.requests]})
        except (ValueError, TypeError) as exc:
            return _http.json_response({"error": str(exc)}, 400)
        return _http.json_response({"error": f"no admin route {method} {path}"}, 404)


def _fmt(seconds: float) -> str:
    return str(int(seconds)) if float(seconds).is_integer() else str(seconds)


SEED_OBJECTS: tuple[JSON, ...] = (
    {"apiVersion": "v1", "kind": "ConfigMap",
     "metadata": {"name": "demo-config", "namespace": "default", "labels": {"app": "demo"}},
     "data": {"greeting": "hello"}},
    {"apiVersion": "v1", "kind": "Secret",
     "metadata": {"name": "demo-secret", "namespace": "default", "labels": {"app": "demo"}},
     "type": "Opaque", "data": {"password": "czNjcjN0"}},
    {"apiVersion": "apps/v1", "kind": "Deployment",
     "metadata": {"name": "demo", "namespace": "default", "labels": {"app": "demo"}},
     "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "demo"}},
              "template": {"metadata": {"labels": {"app": "demo"}},
                           "spec": {"containers": [{"name": "app", "image": "nginx:1.25"}]}}}},
)


async def run_simulator(
    host: str = "127.0.0.1",
    port: int = 8001,
    kubeconfig_out: str | None = None,
    seed_objects: bool = True,
    *,
    ready: Callable[[ApiServer], None] | None = None,
    stop: asyncio.Event | None = None,
    **options: Any,
) -> None:
    """Run an ApiServer (``watchkeeper sim``) until cancelled or ``stop`` is set; writes a
    kubeconfig if asked, then calls ``ready`` (the port is chosen by then)."""
    options.setdefault("request_log_limit", 100_000)
    options.setdefault("root_ca_configmaps", True)
    options.setdefault("initial_events_end_delay", 1.0)  # the apiserver's bookmark tick
    srv = ApiServer(host=host, port=port, **options)
    if seed_objects:
        for obj in SEED_OBJECTS:
            srv.create_object(obj)
    async with srv:
        if kubeconfig_out:
            srv.kubeconfig(kubeconfig_out)
        # never the token itself: the kubeconfig (or ApiServer.token) carries it
        log.info("simulator serving at %s (admin credentials in %s)", srv.url,
                 kubeconfig_out or "no kubeconfig: use --kubeconfig-out")
        if ready is not None:
            ready(srv)
        await (stop or asyncio.Event()).wait()
