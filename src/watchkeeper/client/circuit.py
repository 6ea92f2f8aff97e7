"""One circuit per API server: what a Client's watchers learn about reachability, shared.

While the server is unreachable the circuit is *open*: one caller at a time is the probe,
sent on the prober's own backoff but, while other callers wait on it, at least every
``probe_max`` seconds (jittered), and never before the server's Retry-After; every other
caller waits. Any answer from the server closes it (a successful response on the client,
any verb, or an error response about one resource, below), and the callers that were
waiting are released spread over ``release_spread`` seconds with jitter, so recovery is no
thundering herd.

What counts as unreachable (``is_reachability_error``). Only evidence about the *server*
may hold other resources back, because the circuit makes every watcher of the Client wait
on one probe: a resource that fails for its own reasons would keep the probe turn forever
and starve the others (measured before: a watcher of a healthy resource, its connection
reset, waited 295 s for ``max_unhealthy``). So:

- Evidence: no answer at all. ``ConnectionFailed`` (refused, reset, cut mid-response, TLS
  handshake failure, DNS) and a ``Timeout`` raised here (``code`` None: no response in time,
  a silent stream).
- Evidence too: a 502 or 504 whose body is not a Kubernetes ``Status`` (``error.status`` is
  None): an HTTP gateway or load balancer speaking for an apiserver it cannot reach (as
  nginx, Go's ReverseProxy and cloud load balancers do), where every resource fails alike.
- Not evidence: a 5xx or 429 from one resource is not evidence that the server is
  unreachable. A ``Status`` 5xx/429 is the apiserver's own answer about one resource, one
  webhook or one priority level (a failing conversion webhook: 500; its timeout filter:
  504). A plain-text 429 is API Priority and Fairness, a plain-text 500 a handler that
  panicked, and a plain-text 503 kube-aggregator's "service unavailable" for an aggregated
  API that is down (its ``proxyError``): the very case that starved the others, so a
  Status-less 503 is no gateway evidence here, unlike 502/504.

An answer that is not evidence closes an open circuit (the server answered, whatever it
said about that resource, 401, 403, 404, 410, 422 and 5xx/429 alike), so a probe that gets
one keeps nobody waiting, and it stays the caller's own business: its own backoff and its
own Retry-After. A server that sheds load tells each caller itself when to come back (APF
answers per priority level, with Retry-After), and a watcher always honours that. A
failure that is neither (undecodable bytes) says nothing: it neither opens nor closes, and
a probe that reports one gives up its turn so that another caller probes. The price: behind
an HTTP proxy that answers 503 for a down apiserver, each watcher backs off on its own (a
few attempts a minute each) instead of one probe for all; a guess the other way would
starve healthy resources for minutes.

A caller released when the circuit closes goes after a jittered part of
``release_spread``, but never later than its own probe turn: the prober whose step was
about to end when another caller's answer closed the circuit goes at its step, not up to
half a second after it.

Why a cap on the probe step: the time from the server's return to everyone working again
is the wait for the next probe plus the release. A watcher's backoff grows to 30-60 s, so
the next probe came up to a minute late; capped at 7-8 s the process makes at most 10
connection attempts in an outage's first minute (default backoff: 0.8, 1.6, 3.2, then
7-8 s steps) and waits about 4 s on average for the next probe after the server returns.
A lone caller keeps its backoff exactly (at most 7 attempts in a minute, the hardening
bound): the cap spends only what sharing saves. No schedule does much better on both:
with N probes a minute, a server back at a random moment waits at least 30/N s for the
next one on average (median too), however they are spaced; 10 a minute means 3 s.

No task is started: waiters sleep on an ``asyncio.Event`` replaced at each change.
"""

from __future__ import annotations

import asyncio
import enum
import random
from collections.abc import Callable

from watchkeeper.client.errors import ApiError, ConnectionFailed, Timeout

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
# What a gateway or load balancer answers for an upstream it cannot reach (bad gateway,
# gateway timeout). Not 503: kube-aggregator answers a down aggregated API with a plain-text
# 503, which is about that API alone.
GATEWAY_CODES = frozenset({502, 504})


class CircuitState(enum.Enum):
    CLOSED = "closed"
    OPEN = "open"


def is_reachability_error(error: BaseException) -> bool:
    """True for evidence that the server itself (not one resource) is unreachable: no
    answer at all, or a gateway's 502/504 without a Kubernetes Status (module docstring)."""
    if isinstance(error, ConnectionFailed):
        return True
    if not isinstance(error, ApiError):
        return False
    if error.code is None:
        return isinstance(error, Timeout)  # no response in time: ours, not the server's
    return _from_gateway(error)


def _from_gateway(error: ApiError) -> bool:
    """A 502/504 whose body was no Kubernetes Status (``error.status`` None): a proxy's
    answer for an apiserver behind it, not the apiserver's about one resource."""
    return error.code in GATEWAY_CODES and error.status is None


def _answered(error: BaseException) -> bool:
    """The server answered (any HTTP status but a gateway's): it is reachable, whatever it
    said about one resource."""
    return (isinstance(error, ApiError) and isinstance(error.code, int)
            and not is_reachability_error(error))


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
        """A request failed. Only reachability errors open the circuit; any other answer
        (4xx, or a 5xx/429 about one resource) proves the server reachable and closes it.
        The failure that opens the circuit, or the probe's, schedules the next probe
        ``delay`` seconds on (the caller's backoff; the fallback schedule when None), at
        most ``probe_max`` (jittered) and never before Retry-After, and gives its caller
        first claim on it."""
        if _answered(error):
            self.record_success()
            return
        task = asyncio.current_task()
        from_probe = self._probe is not None and self._probe is task
        if not is_reachability_error(error):
            # Says nothing about the server: no probe result either. A probe that ends so
            # gives up its turn (and its first claim), so that it cannot keep the others
            # waiting on a failure of its own.
            if from_probe and task is not None:
                task.remove_done_callback(self._release_probe)
                self._probe, self._prober = None, None
                self._notify()
            return
        if self.state is CircuitState.CLOSED:
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
        own: float | None = None  # when this caller was to go as the probe
        while True:
            now = self.now()
            if latest is not None and now >= latest - SLACK:
                return False
            if self.state is CircuitState.CLOSED:
                if waited_open and self.release_spread > 0:
                    # Recovery: staggered, so the server is not hit by all at once, but
                    # never later than this caller's own probe turn would have gone (the
                    # circuit closed by another caller's answer just before it).
                    spread = self._rng.uniform(0.0, self.release_spread)
                    if own is not None:
                        spread = min(spread, max(0.0, own - self.now()))
                    await asyncio.sleep(spread)
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
                at = own = max(self._next_probe_at, not_before)
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
