"""``reflector``: keep a Store in step with a watcher while passing its events on."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator

from watchkeeper.cache.store import Writer
from watchkeeper.watcher import Event, Watcher


async def reflector(writer: Writer, events: AsyncIterable[Event]) -> AsyncIterator[Event]:
    """Apply each event to the store, then yield it; after a relist, also yield ``Delete``
    for every cached object that vanished while disconnected (just before ``InitDone``)."""
    if isinstance(events, Watcher):
        writer.bind_health(events.health)
    async for event in events:
        for out in writer.apply(event):
            yield out
