"""``reflector``: keep a Store in step with a watcher while passing its events on."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator

from watchkeeper.cache.store import Writer
from watchkeeper.watcher import Event, HasHealth, WatchHealth


async def reflector(
    writer: Writer, events: AsyncIterable[Event], *, health: WatchHealth | None = None
) -> AsyncIterator[Event]:
    """Apply each event to the store, then yield it; after a relist, also yield ``Delete``
    for every cached object that vanished while disconnected (just before ``InitDone``).

    The store is ready once listed and while ``health`` is not degraded: ``health``, or the
    ``health`` of ``events`` when it reports one (``HasHealth``: a ``Watcher`` does, so does
    any source of your own that carries a ``WatchHealth``)."""
    if health is None and isinstance(events, HasHealth):
        health = events.health
    if isinstance(health, WatchHealth):
        writer.bind_health(health)
    async for event in events:
        for out in writer.apply(event):
            yield out
