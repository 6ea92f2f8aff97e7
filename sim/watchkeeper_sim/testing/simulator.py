"""``Simulator``: what one test holds of a simulator (the pytest plugin's ``k8s_sim``).

A namespace of the test's own on a server (shared by the session, or the test's own),
clients and kubeconfigs for it, and the faults a cluster has, by name: an outage, hung
requests, 5xx, 429, an expired watch history (410), revoked permissions. Each is a thin
wrapper over ``ApiServer``, ``srv.faults`` (``watchkeeper_sim.faults``) or ``srv.rbac``,
run on the server's own loop; ``call`` reaches anything else. ``close`` undoes what the test
did to a shared server: its faults and grants go, and its namespace with everything in it.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import re
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import yaml

from watchkeeper.client import Client
from watchkeeper.client.config import ClientConfig
from watchkeeper_sim.auth.rbac import Rule
from watchkeeper_sim.faults import Fault
from watchkeeper_sim.model import JSON
from watchkeeper_sim.server import ApiServer
from watchkeeper_sim.storage.store import StoreError
from watchkeeper_sim.testing.thread import ServerThread

T = TypeVar("T")

_serial = itertools.count(1)


def namespace_name(label: str) -> str:
    """A fresh namespace name that says which test made it: ``t7-test-widget-gets-a-child``
    (a DNS label: lower case, digits and dashes, at most 63 characters)."""
    slug = re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")
    head = f"t{next(_serial)}"
    return f"{head}-{slug}"[:63].rstrip("-") if slug else head


class Injected:
    """A fault in force until ``end()``; as a context manager it ends at the block's end.
    ``fired`` counts the requests (or connections, or stream lines) it applied to."""

    def __init__(self, thread: ServerThread, fault: Fault, what: str) -> None:
        self._thread, self.fault, self.what = thread, fault, what

    def __repr__(self) -> str:
        return f"<Injected {self.what}>"

    @property
    def fired(self) -> int:
        return self._thread.call(lambda _srv: self.fault.fired)

    def end(self) -> None:
        """Remove the fault (requests it holds, like hung ones, are let go)."""
        self._thread.call(lambda srv: srv.faults.remove(self.fault))

    def __enter__(self) -> Injected:
        return self

    def __exit__(self, *exc: object) -> None:
        self.end()


def _drop_namespace(srv: ApiServer, name: str) -> None:
    """Delete ``name`` and everything in it, finalizers or not: the test's operators have
    stopped, so nobody would remove their finalizers, and the namespace (with the namespace
    controller retrying it) would stay for the rest of the session."""
    ns_type = srv.resource("v1", "Namespace")
    for rt in {t.key: t for t in srv.store.types.values() if t.namespaced}.values():
        for obj in srv.store.objects(rt, name):
            if (obj.get("metadata") or {}).get("finalizers"):
                new = copy.deepcopy(obj)
                new["metadata"]["finalizers"] = []
                with contextlib.suppress(StoreError):
                    srv.registry.update(rt, name, new["metadata"]["name"], new,
                                        manager="watchkeeper-sim")
    with contextlib.suppress(StoreError):
        srv.registry.delete(ns_type, "", name)


class Simulator:
    """One test's view of a running simulator: ``namespace`` is the test's own."""

    def __init__(self, thread: ServerThread, namespace: str) -> None:
        self.thread, self.namespace = thread, namespace
        self._grants: list[tuple[str, Rule]] = []
        self.call(lambda srv: srv.create_object(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}))

    def __repr__(self) -> str:
        return f"<Simulator {self.url} namespace={self.namespace}>"

    @property
    def url(self) -> str:
        return self.thread.url

    def call(self, fn: Callable[[ApiServer], T]) -> T:
        """``fn(srv)`` on the server's loop, for what has no wrapper here (``srv`` is the
        ``ApiServer``; read and change it only inside ``fn``)."""
        return self.thread.call(fn)

    async def call_async(self, fn: Callable[[ApiServer], Awaitable[T]]) -> T:
        """``await fn(srv)`` on the server's loop."""
        return await self.thread.call_async(fn)

    # ---- clients ---------------------------------------------------------------------------

    def client_config(self, user: str = "admin") -> ClientConfig:
        """``user``'s ClientConfig (bearer token); its default namespace is the test's."""
        return self.thread.client_config(user, self.namespace)

    def client(self, user: str = "admin") -> Client:
        """A new ``watchkeeper.Client`` as ``user``; close it (``async with``) when done."""
        return Client(self.client_config(user))

    def kubeconfig(self, path: str | Path, user: str = "admin") -> Path:
        """Write a kubeconfig for ``user`` whose context's namespace is the test's (for
        kubectl, or for ``watchkeeper run --kubeconfig``); returns its path."""
        self.call(lambda srv: srv.kubeconfig(path, user))
        target = Path(path)
        doc = yaml.safe_load(target.read_text())
        doc["contexts"][0]["context"]["namespace"] = self.namespace
        target.write_text(yaml.safe_dump(doc, sort_keys=False))
        return target

    # ---- objects, without HTTP or RBAC ---------------------------------------------------

    def create(self, obj: JSON) -> JSON:
        """Create ``obj`` as if POSTed by an admin; a namespaced object without a namespace
        goes into the test's."""
        body = copy.deepcopy(obj)
        meta = body.setdefault("metadata", {})

        def create(srv: ApiServer) -> JSON:
            if srv.resource(body["apiVersion"], body["kind"]).namespaced:
                meta.setdefault("namespace", self.namespace)
            return copy.deepcopy(srv.create_object(body))

        return self.call(create)

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None
            ) -> JSON | None:
        """The stored object (a copy) or None; ``namespace`` defaults to the test's."""
        def get(srv: ApiServer) -> JSON | None:
            try:
                obj = srv.get_object(api_version, kind, name,
                                     namespace=namespace or self.namespace)
            except StoreError:
                return None
            return copy.deepcopy(obj)

        return self.call(get)

    def count(self, method: str | None = None, *, is_watch: bool | None = None,
              is_list: bool | None = None, since: float | None = None, **more: Any) -> int:
        """Requests in the server's log that match (``ApiServer.count``: ``path_prefix``,
        ``status``, ``user`` too). A shared server's log holds earlier tests' requests:
        pass ``since=time.monotonic()`` taken at the start, or ``path_prefix``."""
        return self.call(lambda srv: srv.count(method, is_watch, is_list, since, **more))

    # ---- faults ----------------------------------------------------------------------------

    def _inject(self, what: str, add: Callable[[ApiServer], Fault]) -> Injected:
        return Injected(self.thread, self.call(add), what)

    def outage(self, duration: float | None = None) -> Injected:
        """The server goes away: connections are refused, open ones (watches too) are cut,
        until ``end()`` or after ``duration`` seconds. Clients see ``ConnectionFailed``."""
        return self._inject("outage", lambda srv: srv.faults.refuse(duration=duration))

    def hang(self, **match: Any) -> Injected:
        """Matching requests are accepted and never answered, until the fault ends (then
        their connections drop). Clients see ``Timeout`` once their own timeout fires.
        ``match``: ``method``, ``path_prefix``, ``user``, ``watch``, ``count``, ``duration``
        (docs/guide.md, Faults)."""
        return self._inject("hang", lambda srv: srv.faults.hang(**match))

    def server_error(self, code: int = 500, message: str = "", **match: Any) -> Injected:
        """Matching requests get a 5xx Status (500 by default; 502, 503, 504 have the
        apiserver's texts). Clients see ``ServerError`` (504: ``Timeout``)."""
        return self._inject(f"error {code}",
                            lambda srv: srv.faults.error(code, message, **match))

    def throttle(self, retry_after: float = 1.0, **match: Any) -> Injected:
        """Matching requests get 429 Too Many Requests with ``Retry-After``, as API Priority
        and Fairness sends it. Clients see ``TooManyRequests``."""
        return self._inject("throttle", lambda srv: srv.faults.throttle(retry_after, **match))

    def slow(self, delay: float, **match: Any) -> Injected:
        """Matching requests are served ``delay`` seconds late."""
        return self._inject("slow", lambda srv: srv.faults.slow(delay, **match))

    def inject(self, kind: str, **arguments: Any) -> Injected:
        """Any fault of ``watchkeeper_sim.faults`` by kind (``stall``, ``reset``,
        ``garbage``, ``truncate``, ...), with its arguments."""
        return self._inject(kind, lambda srv: srv.faults.add(kind, **arguments))

    def expire_history(self) -> None:
        """Compact the history now: a watch or list resumed from an older resourceVersion
        gets 410 Gone (``Gone``), and the client must list again."""
        self.call(lambda srv: srv.compact())

    def reset_watches(self, path_prefix: str | None = None) -> None:
        """Cut the connection of every open watch (or of those whose URL path starts with
        ``path_prefix``), as a crash or a proxy would; clients resume from where they were."""
        self.call(lambda srv: srv.reset_watches(path_prefix))

    def end_watches(self, path_prefix: str | None = None) -> None:
        """End open watches cleanly, as at their server-side timeout."""
        self.call(lambda srv: srv.stop_all_watches(path_prefix))

    def clear_faults(self) -> None:
        """End every fault in force."""
        self.call(lambda srv: srv.faults.clear())

    async def restart(self, keep_data: bool = True) -> None:
        """Stop and start on the same port; ``keep_data=False`` starts from an empty store
        (the test's namespace is made again; its objects and CRDs are gone)."""
        await self.call_async(lambda srv: srv.restart(keep_data))
        if not keep_data:
            self.call(lambda srv: srv.create_object(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}}))

    # ---- users and permissions -----------------------------------------------------------

    def add_user(self, name: str, groups: Iterable[str] = ()) -> str:
        """A user with a bearer token (returned) and no rights but discovery; ``grant`` some,
        then ``client(name)`` talks as that user."""
        return self.call(lambda srv: srv.add_user(name, groups=tuple(groups)))

    def grant(self, user: str, verbs: Iterable[str] | str = ("*",),
              resources: Iterable[str] | str = ("*",), groups: Iterable[str] | str = ("",),
              namespaces: Iterable[str] | str | None = None) -> Rule:
        """Allow ``user`` (or a group) ``verbs`` on ``resources`` (``"widgets/status"`` for a
        subresource) of API ``groups`` (``""``: the core group), in ``namespaces`` (None:
        everywhere). The grant ends with the test."""
        rule = self.call(lambda srv: srv.rbac.grant(user, verbs, resources, groups, namespaces))
        self._grants.append((user, rule))
        return rule

    def revoke(self, user: str, *, verbs: Iterable[str] | str | None = None,
               resources: Iterable[str] | str | None = None) -> None:
        """Take rights away: every rule of ``user`` naming any of ``verbs`` or ``resources``,
        or all of its rules when neither is given. Requests from then on get 403
        ``Forbidden``; watches already open go on until they end, as on a cluster."""
        self.call(lambda srv: srv.rbac.revoke(user, verbs=verbs, resources=resources))

    # ---- the end ---------------------------------------------------------------------------

    def close(self) -> None:
        """Undo the test's changes to the server: faults, grants, the namespace."""
        if not self.thread.running:
            return

        grants, self._grants = self._grants, []

        def undo(srv: ApiServer) -> None:
            srv.faults.clear()
            for user, rule in grants:
                srv.rbac.revoke(user, rule)
            _drop_namespace(srv, self.namespace)

        self.call(undo)
