"""``ControllerConfig``: the knobs of one controller, checked once at construction."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class ControllerConfig:
    """``concurrency``: reconciles at once (each object at most one); ``debounce``: delay
    after a change so bursts merge; ``reconcile_timeout``: a reconcile running longer counts
    as stuck (unhealthy); ``rate_limit``: reconciles per second at most (None = no bound).

    Readiness fails by the reconcile rule once no reconcile succeeded for
    ``failure_window`` seconds while at least ``failure_min_attempts`` failed since, on at
    least two objects (None: never); the first success makes it ready again.

    With an elector (``run(elector=...)``), readiness fails once the elector's attempts to
    reach its lease have failed for longer than ``elector_unready_after`` seconds (None:
    never); past ``max_unhealthy``, ``run()`` raises ``ControllerUnhealthy`` naming
    "leader election".

    ``ready_condition``: after each reconcile, set the object's ``Ready`` condition
    (``Reconciled``, or ``ReconcileFailed``/``ReconcileFailedPermanently`` with the error)
    with a status patch, only when it changed; the resource needs a status subresource.

    ``summary_interval``: every so many seconds with reconciles, one INFO line counting
    them (None: only the DEBUG line of each)."""

    concurrency: int = 4
    debounce: float = 0.0
    max_unhealthy: float | None = 300.0
    reconcile_timeout: float | None = None
    shutdown_timeout: float = 30.0
    rate_limit: float | None = None
    handle_signals: bool = True
    on_leadership_lost: Literal["exit", "reacquire"] = "exit"
    failure_window: float | None = 300.0
    failure_min_attempts: int = 5
    elector_unready_after: float | None = 30.0
    ready_condition: bool = False
    summary_interval: float | None = None

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {self.concurrency}")
        if self.failure_min_attempts < 1:
            raise ValueError(
                f"failure_min_attempts must be >= 1, got {self.failure_min_attempts}"
            )
        for name in ("debounce", "shutdown_timeout"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0 seconds")
        for name in ("max_unhealthy", "reconcile_timeout", "rate_limit", "failure_window",
                     "elector_unready_after", "summary_interval"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be > 0 or None, got {value}")
