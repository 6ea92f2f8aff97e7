"""``Client``: configuration + one HTTP session + discovery cache, and the ``api()`` factory."""

from __future__ import annotations

from types import TracebackType
from typing import TypeVar, overload

from watchkeeper.client.api import DEFAULT_MAX_EVENT_BYTES, Api
from watchkeeper.client.circuit import Circuit
from watchkeeper.client.config import ClientConfig
from watchkeeper.client.discovery import Discovery
from watchkeeper.client.resource import Resource, parse_spec
from watchkeeper.client.server_warnings import WarningHandler
from watchkeeper.client.transport import Timeouts, Transport
from watchkeeper.client.typed_api import Identified, TypedApi

_DEFAULT = object()
_T = TypeVar("_T", bound=Identified)


class Client:
    """One connection pool to one API server. Close it (or use ``async with``) when done."""

    def __init__(
        self,
        config: ClientConfig,
        *,
        timeouts: Timeouts | None = None,
        on_warning: WarningHandler | None = None,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    ) -> None:
        """``timeouts``: connect, request and exec-plugin limits (``Timeouts``).
        ``on_warning`` receives the text of each warning the server sends (deprecated
        API versions, unknown fields it dropped); by default each distinct text is logged
        once at WARNING on the ``watchkeeper.client`` logger.

        ``max_event_bytes`` (16 MiB by default) is the longest watch event line accepted:
        a longer one is an ``InvalidResponse`` (retried by a watcher), so a broken server
        cannot make the client buffer without limit. Objects are far smaller (etcd stores
        at most 1.5 MiB per request by default)."""
        if max_event_bytes < 1:
            raise ValueError(f"max_event_bytes must be >= 1, got {max_event_bytes}")
        self.max_event_bytes = max_event_bytes
        self.config = config
        self.transport = Transport(config, timeouts, on_warning)
        # Shared by all of this client's watchers: one probe per backoff step while the
        # server is unreachable, everyone back within about a second once it answers.
        self.circuit = Circuit()
        self.transport.circuit = self.circuit
        self.discovery = Discovery(self.transport)

    @classmethod
    async def from_env(
        cls,
        kubeconfig: str | None = None,
        context: str | None = None,
        *,
        timeouts: Timeouts | None = None,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    ) -> Client:
        """kubectl's rules: explicit file, KUBECONFIG, ~/.kube/config, then in-cluster."""
        from watchkeeper.client.config import load_config

        return cls(load_config(kubeconfig, context), timeouts=timeouts,
                   max_event_bytes=max_event_bytes)

    @property
    def default_namespace(self) -> str:
        return self.config.namespace

    @overload
    def api(self, resource: Resource | str, namespace: str | object | None = _DEFAULT) -> Api: ...

    @overload
    def api(self, resource: type[_T], namespace: str | object | None = _DEFAULT) -> TypedApi[_T]:
        ...

    def api(
        self, resource: Resource | str | type[_T], namespace: str | object | None = _DEFAULT
    ) -> Api | TypedApi[_T]:
        """An ``Api`` for ``resource`` (a Resource, "configmaps", "deployments.apps", a CRD's
        "widgets.example.com"...). ``namespace=None`` means all namespaces; omitted, the
        kubeconfig context's namespace. Given a class with an ``identity()`` (a
        ``wk.CustomResource``), a ``TypedApi`` whose objects are instances of it."""
        if isinstance(resource, type):
            typed = self.api(resource.identity().resource, namespace)
            return TypedApi(typed, resource)
        if isinstance(resource, str):
            parse_spec(resource)  # a malformed name is the caller's bug: fail now, not later
        ns = self.config.namespace if namespace is _DEFAULT else namespace
        if ns is not None and not isinstance(ns, str):
            raise TypeError("namespace must be a string or None (all namespaces)")
        return Api(self, resource, ns)

    async def close(self) -> None:
        await self.transport.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"Client(server={self.config.server!r}, context={self.config.context!r})"
