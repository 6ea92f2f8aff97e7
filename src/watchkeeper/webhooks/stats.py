"""Per-handler counters the metrics collector reads at scrape time (plain numbers: the
request path never touches prometheus_client)."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

#: Histogram bucket bounds (seconds) for review latency.
BUCKETS: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass
class HandlerStats:
    """Requests, denials, errors (raised or timed out) and a latency histogram."""

    requests: int = 0
    denials: int = 0
    errors: int = 0
    latency_sum: float = 0.0
    buckets: list[int] = field(default_factory=lambda: [0] * len(BUCKETS))

    def record(self, seconds: float, *, denied: bool = False, error: bool = False) -> None:
        self.requests += 1
        self.denials += denied
        self.errors += error
        self.latency_sum += seconds
        i = bisect.bisect_left(BUCKETS, seconds)
        if i < len(BUCKETS):
            self.buckets[i] += 1

    def cumulative(self) -> list[tuple[str, int]]:
        """Buckets as Prometheus wants them: cumulative counts, ``+Inf`` last."""
        out, total = [], 0
        for bound, n in zip(BUCKETS, self.buckets, strict=True):
            total += n
            out.append((repr(bound), total))
        out.append(("+Inf", self.requests))
        return out
