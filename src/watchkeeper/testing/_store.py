"""The simulator's object store: kube-apiserver + etcd semantics without HTTP.

CONTRACT (the HTTP layer in apiserver.py codes against exactly this):
- One global resourceVersion counter (like etcd's revision): every write bumps it by one and
  the written object carries it as a decimal string in metadata.resourceVersion.
- Errors are raised as ``StoreError(status)`` where ``status`` is the full Kubernetes ``Status``
  dict (kind, apiVersion, metadata, status "Failure", message, reason, details, code) with the
  real apiserver's wording (see shared/reference/apiserver-1.28/*.json).
- A bounded history of events (by count and by age, on the injectable ``clock``) serves
  watches from an old resourceVersion; older than the history -> Gone.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

JSON = dict[str, Any]


class StoreError(Exception):
    """A request the store refuses; ``status`` is the Status body the server sends."""

    def __init__(self, status: JSON) -> None:
        super().__init__(status.get("message", ""))
        self.status = status

    @property
    def code(self) -> int:
        return int(self.status.get("code", 500))


@dataclass(frozen=True)
class ResourceType:
    """One served resource: enough to route, discover and validate."""

    group: str  # "" for core
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    has_status: bool = False  # a /status subresource exists (status is ignored on main writes)
    is_custom: bool = False  # custom resources: no strategic merge patch (415)
    verbs: tuple[str, ...] = (
        "create", "delete", "deletecollection", "get", "list", "patch", "update", "watch",
    )
    categories: tuple[str, ...] = ()

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"


@dataclass
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
    object: JSON
    resource_version: int


@dataclass
class ListResult:
    items: list[JSON]
    resource_version: str
    continue_token: str | None = None
    remaining_item_count: int | None = None


@dataclass
class Subscription:
    """A live watch: initial events (already selected), then live ones via ``queue``.

    The HTTP layer drains ``initial`` first, then awaits ``queue.get()``; ``None`` on the queue
    means the store ended the watch (for example its CRD was deleted). ``close()`` must be
    called when the client goes away.
    """

    initial: list[WatchEvent]
    queue: Any  # asyncio.Queue[WatchEvent | None]
    close: Callable[[], None]
    initial_events_end_rv: int | None = None  # when sendInitialEvents: the RV of the end bookmark


@dataclass
class Selectors:
    label_selector: str = ""
    field_selector: str = ""


@dataclass
class ObjectStore:
    """Objects by (group, plural, namespace, name); see module docstring for the contract."""

    history_size: int = 10_000
    history_age: float = 300.0  # seconds of event history kept for watches
    clock: Callable[[], float] = time.monotonic
    types: dict[tuple[str, str], ResourceType] = field(default_factory=dict)
