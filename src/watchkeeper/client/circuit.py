"""One circuit per API server: what a Client's watchers learn about reachability, shared.

While the server is unreachable (connection refused or reset, TLS handshake failure, a
timeout, 5xx, 429) the circuit is *open*: one caller at a time is the probe, sent on the
prober's own backoff but, while other callers wait on it, at least every ``probe_max``
seconds (jittered), and never before the server's Retry-After; every other caller waits.
The first successful response on the client, any verb, closes it, and the callers that
were waiting are released spread over ``release_spread`` seconds with jitter, so recovery
is no thundering herd.

Why a cap on the probe step: the time from the server's return to everyone working again
is the wait for the next probe plus the release. A watcher's backoff grows to 30-60 s, so
the next probe came up to a minute late; capped at 7-8 s the process makes at most 10
connection attempts in an outage's first minute (default backoff: 0.8, 1.6, 3.2, then
7-8 s steps) and waits about 4 s on average for the next probe after the server returns.
A lone caller keeps its backoff exactly (at most 7 attempts in a minute, the hardening
bound): the cap spends only what sharing saves. No schedule does much better on both:
with N probes a minute, a server back at a random moment waits at least 30/N s for the
next one on average (median too), however they are spaced; 10 a minute means 3 s.

Errors about one resource (401, 403, 404, 410, 422...) prove the server answers: they
close it too and stay the caller's own business.

No task is started: waiters sleep on an ``asyncio.Event`` replaced at each change.
"""

from __future__ import annotations

import asyncio
import enum
import random
from collections.abc import Callable

from watchkeeper.client.errors import (
    ConnectionFailed,
    ServerError,
    Timeout,
    TooManyRequests,
)

__all__ = ["Circuit", "CircuitState", "is_reachability_error"]

MAX_RETRY_AFTER = 60.0  # seconds: no server parks the circuit longer per answer
# A wait shorter than this counts as done: a near-zero remainder below the clock's resolution
# would otherwise spin (the watcher's THRESHOLD_SLACK, for the same reason).
SLACK = 0.005
PROBE_GRACE = 1.0  # seconds the last prober keeps first claim on the next probe turn
# Longest probe step: 7 s plus 0-15 % jitter keeps the first minute of an outage at <= 10
# probes after the default backoff's 0.8 + 1.6 + 3.2 s ramp (0.8 + 1.6 + 3.2 + 6.4 + 7 * 7
# = 61 s for the 11th at the earliest).
PROBE_MAX = 7.0
PROBE_JITTER = 0.15
RELEASE_SPREAD = 0.5  # seconds over which waiting callers are released when it closes


class CircuitState(enum.Enum):
    CLOSED = "closed"
    OPEN = "open"


def is_reachability_error(error: BaseException) -> bool:
    """True for an error that says the server (not one resource) is unavailable."""
    if isinstance(error, ConnectionFailed | Timeout | ServerError | TooManyRequests):
        return True
    code = getattr(error, "code", None)
    return isinstance(code, int) and code >= 500


def _answered(error: BaseException) -> bool:
    """A 4xx other than 429: the server is there and answered about one resource."""
    code = getattr(error, "code", None)
    return isinstance(code, int) and 400 <= code < 500 and code != 429


class Circuit:
    """Shared reachability of one API server (see the module docstring).

    The probe schedule is the prober's own, capped: a watcher reports its failure with the
    delay its own backoff chose (``record_failure(error, delay)``) and keeps first claim on
    the next probe, so ten watchers retry as one, on the opening watcher's backoff. A step
    longer than ``probe_max`` becomes ``probe_max`` plus a random 0..``probe_jitter``
    fraction (``None``: no cap, the backoff alone). A failure reported without a delay uses
    the circuit's fallback schedule, watchkeeper's exponential backoff: ``initial *
    factor**n`` capped at ``max_delay``, plus a random 0..``jitter`` fraction. A server's
    Retry-After (at most ``MAX_RETRY_AFTER``) always wins over a shorter step. ``clock``
    defaults to the running loop's clock. ``probe_timeout`` frees the probe turn if its
    holder never reports back.
    """

    def __init__(
        self,
        *,
        initial: float = 0.8,
        max_delay: float = 10.0,
        factor: float = 2.0,
        jitter: float = 0.5,
        release_spread: float = RELEASE_SPREAD,
        probe_max: float | None = PROBE_MAX,
        probe_jitter: float = PROBE_JITTER,
        probe_timeout: float = 60.0,
        clock: Callable[[], float] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        if initial <= 0 or max_delay < initial or factor < 1 or jitter < 0:
            raise ValueError("need 0 < initial <= max_delay, factor >= 1 and jitter >= 0")
        if release_spread < 0 or probe_timeout <= 0:
            raise ValueError("need release_spread >= 0 and probe_timeout > 0")
        if (probe_max is not None and probe_max <= 0) or probe_jitter < 0:
            raise ValueError("need probe_max > 0 (or None) and probe_jitter >= 0")
        self.probe_max, self.probe_jitter = probe_max, probe_jitter
        self.initial, self.max_delay, self.factor, self.jitter = initial, max_delay, factor, jitter
        self.release_spread, self.probe_timeout = release_spread, probe_timeout
        self._clock, self._rng = clock, rng or random.Random()
        self.state = CircuitState.CLOSED
        self._attempt = 0
        self._next_probe_at = 0.0
        self._probe: asyncio.Task[object] | None = None  # the task holding the probe turn
        self._prober: asyncio.Task[object] | None = None  # first claim on the next turn
        self._probe_since = 0.0
        self._changed: asyncio.Event | None = None
        self.opened = 0  # times the circuit opened (for tests, metrics and repr)
        self.probes = 0  # probe turns handed out
        self._waiting = 0  # callers inside wait_turn: whom the next probe serves

    def now(self) -> float:
        return self._clock() if self._clock else asyncio.get_running_loop().time()

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    def _step(self) -> float:
        n, self._attempt = self._attempt, self._attempt + 1
        base = min(self.initial * self.factor ** min(n, 64), self.max_delay)
        return base + base * self.jitter * self._rng.random()

    def _capped(self, step: float) -> float:
        """The probe step: ``step``, or ``probe_max`` plus jitter when ``step`` is longer
        and other callers wait on the probe (jittered so processes that lost the server
        together do not probe in step). A lone caller keeps its own backoff exactly: the
        cap spends what sharing saves (ten watchers' attempts become one probe's)."""
        cap = self.probe_max
        if cap is None or step <= cap or self._waiting == 0:
            return step
        return cap + cap * self.probe_jitter * self._rng.random()

    def record_success(self) -> None:
        """Any successful response: the server is back; release everyone waiting."""
        if self.state is CircuitState.OPEN:
            self.state = CircuitState.CLOSED
            if self._probe is not None:
                self._probe.remove_done_callback(self._release_probe)
            self._attempt, self._probe, self._prober = 0, None, None
            self._notify()

    def record_failure(self, error: BaseException, delay: float | None = None) -> None:
        """A request failed. Only reachability errors open the circuit; a 4xx answer
        proves the server reachable and closes it. The failure that opens the circuit, or
        the probe's, schedules the next probe ``delay`` seconds on (the caller's backoff;
        the fallback schedule when None), at most ``probe_max`` (jittered) and never before
        Retry-After, and gives its caller
        first claim on it."""
        if _answered(error):
            self.record_success()
            return
        task = asyncio.current_task()
        from_probe = self._probe is not None and self._probe is task
        if self.state is CircuitState.CLOSED:
            if not is_reachability_error(error):
                return
            self.state, self.opened = CircuitState.OPEN, self.opened + 1
            self._attempt = 0
        elif not from_probe:
            # A straggler (its request was out before the circuit opened): it says
            # nothing new, but its Retry-After still counts for the circuit.
            self._honour_retry_after(error)
            return
        if from_probe and task is not None:
            task.remove_done_callback(self._release_probe)
        self._probe, self._prober = None, task
        step = self._capped(delay if delay is not None and delay >= 0 else self._step())
        self._next_probe_at = self.now() + step
        self._honour_retry_after(error)
        self._notify()

    def _honour_retry_after(self, error: BaseException) -> None:
        after = getattr(error, "retry_after", None)
        if isinstance(after, int | float) and after > 0 and self.state is CircuitState.OPEN:
            self._next_probe_at = max(self._next_probe_at,
                                      self.now() + min(float(after), MAX_RETRY_AFTER))

    def expected_wait(self, not_before: float = 0.0) -> float:
        """Seconds a caller asking now would wait at least (0 when closed)."""
        now = self.now()
        if self.state is CircuitState.CLOSED:
            return max(0.0, not_before - now)
        return max(0.0, not_before - now, self._next_probe_at - now)

    def _release_probe(self, task: asyncio.Task[object]) -> None:
        if self._probe is task:  # it ended without reporting: let another probe
            self._probe = None
            self._notify()

    async def wait_turn(self, not_before: float = 0.0, latest: float | None = None) -> bool:
        """Wait until this caller may send its next request, never before ``not_before``
        (the caller's own spacing and Retry-After), never after ``latest`` (its deadline).

        Closed: go (after ``not_before``). Open: one caller at a time becomes the probe at
        the circuit's next step; the others wait for the circuit to close and are then
        released spread over ``release_spread`` seconds. Returns True when the caller
        goes as the probe."""
        self._waiting += 1
        try:
            return await self._wait_turn(not_before, latest)
        finally:
            self._waiting -= 1

    async def _wait_turn(self, not_before: float, latest: float | None) -> bool:
        waited_open = False
        while True:
            now = self.now()
            if latest is not None and now >= latest - SLACK:
                return False
            if self.state is CircuitState.CLOSED:
                if waited_open and self.release_spread > 0:
                    # Recovery: staggered, so the server is not hit by all at once.
                    await asyncio.sleep(self._rng.uniform(0.0, self.release_spread))
                left = not_before - self.now()
                if latest is not None:
                    left = min(left, latest - self.now())
                if left > 0:
                    await asyncio.sleep(left)
                return False
            wake: float | None
            if self._probe is not None and now - self._probe_since >= self.probe_timeout:
                self._probe = None  # lost: its holder never reported back
            me = asyncio.current_task()
            prober = self._prober
            if prober is not None and (prober.done() or prober is me):
                prober = None
            if self._probe is None and prober is not None and (
                now < self._next_probe_at + PROBE_GRACE
            ):
                wake = max(self._next_probe_at + PROBE_GRACE, not_before)  # the prober's turn
            elif self._probe is None:
                at = max(self._next_probe_at, not_before)
                if now >= at - SLACK:
                    if me is not None:
                        self._probe, self._probe_since = me, now
                        me.add_done_callback(self._release_probe)
                    self.probes += 1
                    return True
                wake = at
            else:
                wake = self._probe_since + self.probe_timeout
            if latest is not None:
                wake = min(wake, latest)
            waited_open = True
            if self._changed is None:
                self._changed = asyncio.Event()
            changed = self._changed
            try:
                async with asyncio.timeout(max(SLACK, wake - now)):
                    await changed.wait()
            except TimeoutError:
                pass

    def __repr__(self) -> str:
        return (f"Circuit({self.state.value}, opened={self.opened}, probes={self.probes}, "
                f"{self.initial:g}s -> {self.max_delay:g}s)")
