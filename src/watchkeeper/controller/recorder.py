"""Publish ``events.k8s.io/v1`` Events about objects, deduplicated like client-go does:
the same (object, type, reason, action, note) bumps ``series.count`` instead of adding
another Event. As in client-go, a series idle for ``SERIES_IDLE`` (6 min) is finished (the
next occurrence is a new Event), and at most ``MAX_SERIES`` are remembered (the least
recently used forgotten), so a long-running operator's memory stays bounded."""

from __future__ import annotations

import datetime as dt
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Literal

from watchkeeper import meta
from watchkeeper.client import ApiError, Client, NotFound

log = logging.getLogger("watchkeeper.recorder")

JSON = dict[str, Any]

SERIES_IDLE = 360.0  # seconds: client-go's finishTime
MAX_SERIES = 4096  # client-go's event cache size


def _micro_time() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Recorder:
    """``await recorder.publish(obj, reason="Reconciled", note="...")``; failures are logged,
    never raised: an event is a courtesy, not part of the reconcile's result."""

    def __init__(
        self, client: Client, controller: str, instance: str | None = None, *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.controller = controller
        self.instance = instance or f"{controller}-{uuid.uuid4().hex[:8]}"
        self.clock = clock
        self.max_series = MAX_SERIES
        # -> (namespace, name, count, when last seen): the series this recorder posted
        self._seen: OrderedDict[tuple[str, ...], tuple[str, str, int, float]] = OrderedDict()

    async def publish(
        self,
        regarding: JSON,
        *,
        reason: str,
        note: str = "",
        type: Literal["Normal", "Warning"] = "Normal",
        action: str = "Reconcile",
        api_version: str | None = None,
        kind: str | None = None,
    ) -> None:
        """Objects of a LIST of a built-in type (what a controller's cache mostly holds)
        carry no apiVersion and kind: pass ``api_version`` and ``kind`` for those, or
        ``kubectl describe`` (which selects Events by the object's kind) does not show it."""
        api_version = api_version or regarding.get("apiVersion")
        kind = kind or regarding.get("kind")
        if not api_version or not kind:
            log.warning("event %s for %s names no %s (pass api_version= and kind=): kubectl "
                        "describe will not show it", reason, meta.ref(regarding),
                        "kind" if api_version else "apiVersion")
        ns = meta.namespace(regarding) or "default"
        key = (meta.uid(regarding) or meta.ref(regarding), type, reason, action, note)
        api = self.client.api("events.k8s.io/v1/events", namespace=ns)
        now = _micro_time()
        seen = self._seen.pop(key, None)
        if seen is not None and self.clock() - seen[3] > SERIES_IDLE:
            seen = None  # a finished series: a new Event
        try:
            if seen is not None:
                ev_ns, ev_name, count, _ = seen
                try:
                    await api.patch(
                        ev_name,
                        {"series": {"count": count + 1, "lastObservedTime": now}},
                        type="merge", namespace=ev_ns,
                    )
                    self._remember(key, (ev_ns, ev_name, count + 1, self.clock()))
                    return
                except NotFound:
                    pass  # expired on the server: create a new one
            name = f"{meta.name(regarding)}.{uuid.uuid4().hex[:16]}"
            await api.create({
                "apiVersion": "events.k8s.io/v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": ns},
                "eventTime": now,
                "reportingController": self.controller,
                "reportingInstance": self.instance,
                "action": action,
                "reason": reason,
                "note": note[:1024],
                "type": type,
                "regarding": {
                    "apiVersion": api_version,
                    "kind": kind,
                    "name": meta.name(regarding),
                    "namespace": meta.namespace(regarding),
                    "uid": meta.uid(regarding),
                    "resourceVersion": meta.resource_version(regarding),
                },
            })
            self._remember(key, (ns, name, 1, self.clock()))
        except ApiError as exc:
            if seen is not None and key not in self._seen:
                self._remember(key, seen)  # the series goes on at the next occurrence
            log.warning("could not record event %s for %s: %s", reason, meta.ref(regarding), exc)

    def _remember(self, key: tuple[str, ...], series: tuple[str, str, int, float]) -> None:
        self._seen[key] = series  # popped before: now the most recently used
        while len(self._seen) > self.max_series:
            self._seen.popitem(last=False)
