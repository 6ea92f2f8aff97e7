"""The cache: a Store kept in step with a watcher by a reflector; shared watches."""

from watchkeeper.cache.reflector import reflector
from watchkeeper.cache.shared import SharedWatches, Subscription, WatchHandle
from watchkeeper.cache.store import Store, Writer
from watchkeeper.cache.typed import TypedStore

__all__ = [
    "SharedWatches", "Store", "Subscription", "TypedStore", "WatchHandle", "Writer", "reflector",
]
