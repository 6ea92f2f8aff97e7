"""The cache: a Store kept in step with a watcher by a reflector."""

from watchkeeper.cache.reflector import reflector
from watchkeeper.cache.store import Store, Writer

__all__ = ["Store", "Writer", "reflector"]
