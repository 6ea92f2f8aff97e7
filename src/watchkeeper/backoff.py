"""How long to wait before the next retry.

A backoff is any object with ``next() -> float | None`` (seconds; ``None`` = give up) and
``reset()``. The watcher calls ``next()`` once per failure and ``reset()`` only on real
progress, so a schedule written by a user behaves exactly as written.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable

__all__ = [
    "Backoff",
    "ConstantBackoff",
    "DefaultBackoff",
    "ExponentialBackoff",
    "ResetTimerBackoff",
]


@runtime_checkable
class Backoff(Protocol):
    def next(self) -> float | None:
        """Seconds to wait before the next attempt, or None to stop retrying."""
        ...

    def reset(self) -> None:
        """Start the schedule over (called after real progress)."""
        ...


class ExponentialBackoff:
    """``initial * factor**n`` capped at ``max_delay``, plus a random 0..jitter fraction of it.

    With ``jitter=1.0`` (client-go's Jitter 1.0) the n-th delay lies in [d, 2d), where
    d = min(initial * factor**n, max_delay). ``max_retries`` gives up after that many delays.
    """

    def __init__(
        self,
        initial: float = 0.8,
        max_delay: float = 30.0,
        factor: float = 2.0,
        jitter: float = 1.0,
        max_retries: int | None = None,
        rng: random.Random | None = None,
    ) -> None:
        if initial <= 0 or max_delay < initial or factor < 1 or jitter < 0:
            raise ValueError(
                "need 0 < initial <= max_delay, factor >= 1 and jitter >= 0; got "
                f"initial={initial}, max_delay={max_delay}, factor={factor}, jitter={jitter}"
            )
        self.initial, self.max_delay, self.factor, self.jitter = initial, max_delay, factor, jitter
        self.max_retries = max_retries
        self._rng = rng or random.Random()
        self._attempt = 0

    def next(self) -> float | None:
        if self.max_retries is not None and self._attempt >= self.max_retries:
            return None
        n, self._attempt = self._attempt, self._attempt + 1
        base = min(self.initial * self.factor ** min(n, 64), self.max_delay)
        return base + base * self.jitter * self._rng.random()

    def reset(self) -> None:
        self._attempt = 0

    def __repr__(self) -> str:
        return (
            f"ExponentialBackoff(initial={self.initial}, max_delay={self.max_delay}, "
            f"factor={self.factor}, jitter={self.jitter}, max_retries={self.max_retries})"
        )


class ConstantBackoff:
    """The same delay every time; ``max_retries`` gives up after that many."""

    def __init__(self, delay: float, max_retries: int | None = None) -> None:
        if delay < 0:
            raise ValueError(f"delay must be >= 0, got {delay}")
        self.delay, self.max_retries, self._attempt = delay, max_retries, 0

    def next(self) -> float | None:
        if self.max_retries is not None and self._attempt >= self.max_retries:
            return None
        self._attempt += 1
        return self.delay

    def reset(self) -> None:
        self._attempt = 0

    def __repr__(self) -> str:
        return f"ConstantBackoff(delay={self.delay}, max_retries={self.max_retries})"


class ResetTimerBackoff:
    """Resets ``inner`` by itself when no failure was seen for ``reset_after`` seconds.

    This is what makes a flapping connection back off properly: an explicit ``reset()`` is
    honoured too, but a long quiet period alone also counts as health.
    """

    def __init__(
        self,
        inner: Backoff,
        reset_after: float = 120.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.inner, self.reset_after, self._clock = inner, reset_after, clock
        self._last_failure: float | None = None

    def next(self) -> float | None:
        now = self._clock()
        if self._last_failure is not None and now - self._last_failure >= self.reset_after:
            self.inner.reset()
        self._last_failure = now
        return self.inner.next()

    def reset(self) -> None:
        self.inner.reset()

    def __repr__(self) -> str:
        return f"ResetTimerBackoff({self.inner!r}, reset_after={self.reset_after})"


class DefaultBackoff(ResetTimerBackoff):
    """Jittered 0.8 s -> 30 s, factor 2, reset after 120 s quiet: client-go's schedule."""

    def __init__(
        self, rng: random.Random | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__(ExponentialBackoff(0.8, 30.0, 2.0, 1.0, rng=rng), 120.0, clock)

    def __repr__(self) -> str:
        return "DefaultBackoff(0.8s -> 30s, factor 2, jitter 1.0, reset after 120s)"
