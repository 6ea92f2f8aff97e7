"""Publish ``events.k8s.io/v1`` Events about objects, deduplicated like client-go does:
the same (object, type, reason, action, note) bumps ``series.count`` instead of adding
another Event."""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from typing import Any, Literal

from watchkeeper import meta
from watchkeeper.client import ApiError, Client, NotFound

log = logging.getLogger("watchkeeper.recorder")

JSON = dict[str, Any]


def _micro_time() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Recorder:
    """``await recorder.publish(obj, reason="Reconciled", note="...")``; failures are logged,
    never raised: an event is a courtesy, not part of the reconcile's result."""

    def __init__(self, client: Client, controller: str, instance: str | None = None) -> None:
        self.client = client
        self.controller = controller
        self.instance = instance or f"{controller}-{uuid.uuid4().hex[:8]}"
        self._seen: dict[tuple[str, ...], tuple[str, str, int]] = {}  # -> (ns, name, count)

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
        try:
            seen = self._seen.get(key)
            if seen is not None:
                ev_ns, ev_name, count = seen
                try:
                    await api.patch(
                        ev_name,
                        {"series": {"count": count + 1, "lastObservedTime": now}},
                        type="merge", namespace=ev_ns,
                    )
                    self._seen[key] = (ev_ns, ev_name, count + 1)
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
            self._seen[key] = (ns, name, 1)
        except ApiError as exc:
            log.warning("could not record event %s for %s: %s", reason, meta.ref(regarding), exc)
