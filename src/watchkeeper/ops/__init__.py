"""Operating a controller: probes, metrics."""

from watchkeeper.ops.health import HealthServer
from watchkeeper.ops.metrics import Sources, WatchkeeperCollector

__all__ = ["HealthServer", "Sources", "WatchkeeperCollector"]
