"""Leader election on a ``coordination.k8s.io/v1`` Lease, with client-go's semantics.

Expiry is judged on our own clock from when we last *saw* the lease change (never by
comparing the holder's timestamps with ours), so clock skew between replicas cannot cause
two leaders. A leader that cannot renew within ``renew_deadline`` (shorter than the lease)
steps down before anyone else may take over: no split brain.

The elector never dies of an error: every failure (5xx, 429, resets, refused connections,
an answer that does not come, a malformed Lease) is logged with its type and text, shown in
``elector.health`` and retried every jittered ``retry_period``, as client-go does. Only
cancellation ends ``run()`` early.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import enum
import logging
import math
import os
import random
import socket
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from watchkeeper.client import AlreadyExists, Api, ApiError, Conflict, NotFound
from watchkeeper.controller import LeadershipLost
from watchkeeper.supervisor import start_task

log = logging.getLogger("watchkeeper.leader")

JSON = dict[str, Any]
T = TypeVar("T")

__all__ = [
    "ElectorHealth",
    "ElectorState",
    "LeaderElector",
    "LeadershipLost",
    "default_identity",
    "describe_error",
]

_EPSILON = 0.001  # a leader steps down this much before its renew deadline, never later

#: A follower looks at a lease this long (up to twice, jittered) after it may have expired.
EXPIRY_MARGIN = 0.05

#: Repeats of the same failure while not leading are logged at most this often (seconds).
REPEAT_LOG_INTERVAL = 60.0


def default_identity() -> str:
    """POD_NAME (from the downward API) or the hostname, plus a random suffix."""
    base = os.environ.get("POD_NAME") or socket.gethostname()
    return f"{base}_{uuid.uuid4().hex[:8]}"


def _micro_time(now: dt.datetime | None = None) -> str:
    now = now or dt.datetime.now(dt.UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def describe_error(exc: BaseException, timeout: float | None = None) -> str:
    """``"Type: text"``, never an empty text (``TimeoutError()`` prints as nothing, which
    once left a log line ending in "renewal failed: ")."""
    text = str(exc).strip()
    if not text and isinstance(exc, TimeoutError) and timeout is not None:
        text = f"no answer within {timeout:.3g} s"
    if not text:
        text = repr(exc)
    return f"{type(exc).__name__}: {text}"


async def _bounded(coro: Coroutine[Any, Any, T], timeout: float) -> T:
    """Await ``coro`` for at most ``timeout`` seconds (TimeoutError past it).

    It runs in a child task awaited with ``asyncio.wait``, never under ``asyncio.timeout``:
    a cancellation of the elector that arrives as the deadline passes was seen turned into
    TimeoutError there (the cancel swallowed: a cancelled elector re-acquired the lease)."""
    attempt = start_task(coro, name="leader election attempt", awaited=True)
    try:
        done, _ = await asyncio.wait({attempt}, timeout=max(0.0, timeout))
    finally:
        if not attempt.done():
            attempt.cancel()
            await asyncio.wait({attempt})
    if not done:
        raise TimeoutError(f"no answer within {timeout:.3g} s")
    return attempt.result()


class ElectorState(enum.Enum):
    """``starting``: no answer from the API yet; ``following``: the API answers and another
    replica holds the lease; ``leading``: we hold it and renew it; ``degraded``: the last
    attempt failed and is being retried (``last_error`` says why; ``is_leader`` still tells
    whether we lead until the renew deadline passes)."""

    STARTING = "starting"
    FOLLOWING = "following"
    LEADING = "leading"
    DEGRADED = "degraded"


@dataclass
class ElectorHealth:
    """Live health of one elector, for probes, metrics and ``watchkeeper status``.

    ``since`` is when the current state began (event-loop clock), ``since_wall`` the same
    as a Unix time. ``functioning_since`` is the last time an attempt succeeded (or the
    start), so ``non_functioning_for(now)`` says how long the API has been out of reach."""

    lease: str
    identity: str
    state: ElectorState = ElectorState.STARTING
    since: float = 0.0
    since_wall: float = field(default_factory=time.time)
    holder: str | None = None  # the holder we last saw ("" or None: nobody)
    last_error: str | None = None  # "ServerError: GET ...: ... (503 ...)"
    last_error_at: float | None = None
    consecutive_failures: int = 0
    failures: int = 0  # in total
    functioning_since: float | None = None
    errors: dict[str, int] = field(default_factory=dict)  # by error class name

    def non_functioning_for(self, now: float) -> float:
        """Seconds since the last successful attempt (0 while attempts succeed)."""
        if self.consecutive_failures == 0 or self.functioning_since is None:
            return 0.0
        return max(0.0, now - self.functioning_since)

    def summary(self) -> str:
        err = f": {self.last_error}" if self.state is ElectorState.DEGRADED else ""
        return f"lease {self.lease} {self.state.value}{err}"


class LeaderElector:
    """Acquire and hold one Lease. Run ``await elector.run()`` in a task; read ``is_leader``
    or await ``leading.wait()``; ``lost`` is set when leadership ends; ``health`` says
    whether the elector can talk to the API and why not."""

    def __init__(
        self,
        api: Api,
        name: str,
        *,
        identity: str | None = None,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        release_on_stop: bool = True,
        clock: Callable[[], float] | None = None,
        rng: random.Random | None = None,
        labels: dict[str, str] | None = None,
    ) -> None:
        if not 0 < retry_period < renew_deadline < lease_duration:
            raise ValueError(
                "need 0 < retry_period < renew_deadline < lease_duration, got "
                f"{retry_period} / {renew_deadline} / {lease_duration}"
            )
        self.api, self.name = api, name
        self.identity = identity or default_identity()
        self.lease_duration, self.renew_deadline = lease_duration, renew_deadline
        self.retry_period, self.release_on_stop = retry_period, release_on_stop
        self._clock = clock
        self._rng = rng or random.Random()
        self.labels = dict(labels or {})  # on the Lease when we create it (shard membership)
        self.leading = asyncio.Event()
        self.lost = asyncio.Event()
        self._observed: JSON | None = None  # last lease record we saw
        self._observed_at = 0.0  # our clock when the record last changed
        self._last_renew = 0.0  # our clock when the last successful write was *sent*
        self._last_logged: tuple[str, float] | None = None  # (error text, when)
        self._repeats = 0
        self.transitions = 0
        self.health = ElectorHealth(lease=name, identity=self.identity)

    def reset(self) -> None:
        """Fresh events for another term (after ``run`` returned)."""
        self.leading, self.lost = asyncio.Event(), asyncio.Event()

    @property
    def is_leader(self) -> bool:
        return self.leading.is_set() and not self.lost.is_set()

    def __repr__(self) -> str:
        return f"LeaderElector(lease={self.name!r}, identity={self.identity!r})"

    def _now(self) -> float:
        return (self._clock or asyncio.get_running_loop().time)()

    def _jittered(self) -> float:
        """client-go's JitterUntil(retry_period, 1.0): uniform in [retry, 2 * retry)."""
        return self.retry_period * (1 + self._rng.random())

    # -- health and logging --------------------------------------------------------------

    def _set_state(self, state: ElectorState) -> None:
        h = self.health
        if h.state is not state:
            h.state, h.since, h.since_wall = state, self._now(), time.time()

    def _succeeded(self, leading: bool) -> None:
        h = self.health
        now = self._now()
        if h.consecutive_failures:
            down = now - (now if h.functioning_since is None else h.functioning_since)
            log.info(
                "lease %s: the API answers again after %d unsuccessful attempts (%.1f s)",
                self.name, h.consecutive_failures, down,
                extra=self._fields("recovered"),
            )
        h.consecutive_failures, h.functioning_since = 0, now
        self._last_logged, self._repeats = None, 0
        h.holder = self._holder(self._observed) if self._observed is not None else None
        self._set_state(ElectorState.LEADING if leading else ElectorState.FOLLOWING)

    def _failed(self, exc: BaseException, timeout: float) -> str:
        """Record a failed attempt; returns its description (type and text)."""
        h = self.health
        now = self._now()
        text = describe_error(exc, timeout)
        if h.functioning_since is None:
            h.functioning_since = now
        h.consecutive_failures += 1
        h.failures += 1
        h.errors[type(exc).__name__] = h.errors.get(type(exc).__name__, 0) + 1
        h.last_error, h.last_error_at = text, now
        self._set_state(ElectorState.DEGRADED)
        return text

    def _fields(self, state: str, exc: BaseException | None = None) -> dict[str, Any]:
        fields: dict[str, Any] = {"lease": self.name, "identity": self.identity,
                                  "state": state}
        if exc is not None:
            fields["error_class"] = type(exc).__name__
        return fields

    def _log_acquire_failure(self, exc: BaseException, text: str, retry_in: float) -> None:
        """One line for a new failure, then a summary at most every REPEAT_LOG_INTERVAL:
        a follower retries every few seconds through an outage, and must not flood."""
        now = self._now()
        last = self._last_logged
        if last is not None and last[0] == text and now - last[1] < REPEAT_LOG_INTERVAL:
            self._repeats += 1
            log.debug("lease %s: acquiring failed again: %s", self.name, text)
            return
        again = f" ({self._repeats + 1} times since the last report)" if self._repeats else ""
        log.warning(
            "lease %s: acquiring or checking the lease failed%s, retrying in %.1f s: %s",
            self.name, again, retry_in, text, extra=self._fields("degraded", exc),
        )
        self._last_logged, self._repeats = (text, now), 0

    # -- running -------------------------------------------------------------------------

    async def run(self) -> None:
        """Acquire, then renew until renewal fails for ``renew_deadline`` or another holder
        is seen. Every error is retried; only cancellation ends it early.

        Returns when leadership is lost (``lost`` is set); cancelling releases the lease."""
        h = self.health
        if h.functioning_since is None:  # first run: the clock of "not working yet" starts
            h.since = h.functioning_since = self._now()
        try:
            await self._acquire()
            self.transitions += 1
            log.info("became leader of lease %s as %s", self.name, self.identity,
                     extra=self._fields("leading"))
            self.leading.set()
            await self._renew_loop()
        except asyncio.CancelledError:
            if self.is_leader and self.release_on_stop:
                # Bounded: a stopping replica must not hang on an unreachable API.
                with contextlib.suppress(Exception):
                    await _bounded(self.release(), self.retry_period)
            raise
        finally:
            if self.leading.is_set():
                self.lost.set()
                if self.health.state is ElectorState.LEADING:
                    self._set_state(ElectorState.FOLLOWING)

    async def _acquire(self) -> None:
        """Try every jittered retry period until we hold the lease."""
        while True:
            started = self._now()
            try:
                ok = await _bounded(self._try_acquire_or_renew(), self.renew_deadline)
            except Exception as exc:  # every error is retried: the elector must not die
                delay = self._jittered()
                retry_after = exc.retry_after if isinstance(exc, ApiError) else None
                if retry_after:  # 429: honoured, but never past one lease duration
                    delay = max(delay, min(float(retry_after), self.lease_duration))
                text = self._failed(exc, self.renew_deadline)
                self._log_acquire_failure(exc, text, delay)
            else:
                self._succeeded(leading=ok)
                if ok:
                    self._last_renew = started
                    return
                delay = min(self._jittered(), self._until_expiry())
            await asyncio.sleep(delay)

    def _until_expiry(self) -> float:
        """Seconds until the lease we last saw may be taken (its holder stopped renewing),
        plus a small jittered margin; infinity when we have seen none. Trying then instead
        of on the next jittered tick takes a dead leader's place up to 2 retry periods
        sooner and costs one request per expiry: a renewed lease moves the moment away."""
        if self._observed is None:
            return math.inf
        margin = EXPIRY_MARGIN * (1 + self._rng.random())
        return max(margin, self._expires_at(self._observed) - self._now() + margin)

    def _expires_at(self, lease: JSON) -> float:
        """Our clock when ``lease`` (as last seen) may be taken if it does not change."""
        spec = lease.get("spec") or {}
        return self._observed_at + float(spec.get("leaseDurationSeconds") or self.lease_duration)

    async def _renew_loop(self) -> None:
        """Renew every ``retry_period``; step down once ``renew_deadline`` has passed since
        the last successful renewal was *sent* (a follower counts the lease duration from
        when it *saw* that write, which is later), so we stop before anyone may take over."""
        while True:
            remaining = self._last_renew + self.renew_deadline - self._now()
            await asyncio.sleep(max(0.0, min(self.retry_period, remaining)))
            remaining = self._last_renew + self.renew_deadline - self._now()
            if remaining < _EPSILON:  # (a clock of finite resolution may never reach 0.0)
                why = self.health.last_error or "only conflicting writes to the lease"
                log.warning(
                    "lost leadership of lease %s: not renewed within the renew deadline "
                    "(%g s), stepping down; last error: %s", self.name, self.renew_deadline,
                    why, extra=self._fields("lost"),
                )
                return
            started = self._now()
            try:
                ok = await _bounded(self._try_acquire_or_renew(), remaining)
            except Exception as exc:  # every error is retried until the deadline
                text = self._failed(exc, remaining)
                left = self._last_renew + self.renew_deadline - self._now()
                log.warning(
                    "lease %s renewal failed (stepping down in %.1f s unless renewed): %s",
                    self.name, max(0.0, left), text, extra=self._fields("degraded", exc),
                )
                continue
            if ok:
                self._last_renew = started
                self._succeeded(leading=True)
                continue
            holder = self._holder(self._observed) if self._observed is not None else ""
            self._succeeded(leading=holder == self.identity)
            if holder != self.identity:
                log.warning("lost leadership of lease %s to %s", self.name, holder or "nobody",
                            extra=self._fields("lost"))
                return
            # A conflicting write on our own lease: look again next round (deadline holds).

    @staticmethod
    def _holder(lease: JSON) -> str:
        return str((lease.get("spec") or {}).get("holderIdentity") or "")

    def _record(self, lease: JSON) -> None:
        if self._observed is None or self._observed.get("spec") != lease.get("spec"):
            self._observed_at = self._now()
        self._observed = lease

    async def _try_acquire_or_renew(self) -> bool:
        now_wall = _micro_time()
        try:
            lease = await self.api.get(self.name)
        except NotFound:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.api.namespace,
                             **({"labels": self.labels} if self.labels else {})},
                "spec": self._spec(now_wall, now_wall, 0),
            }
            try:
                self._record(await self.api.create(body))
            except (AlreadyExists, Conflict):
                return False
            return True
        self._record(lease)
        spec = lease.get("spec") or {}
        holder = self._holder(lease)
        expired = self._now() > self._expires_at(lease)
        if holder and holder != self.identity and not expired:
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        acquire = spec.get("acquireTime") or now_wall
        if holder != self.identity:
            transitions, acquire = transitions + 1, now_wall
        updated = dict(lease)
        updated["spec"] = self._spec(acquire, now_wall, transitions)
        try:
            self._record(await self.api.replace(self.name, updated))
        except Conflict:
            return False  # someone else wrote first; look again next round
        return True

    def _spec(self, acquire: str, renew: str, transitions: int) -> JSON:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": math.ceil(self.lease_duration),
            "acquireTime": acquire,
            "renewTime": renew,
            "leaseTransitions": transitions,
        }

    async def release(self) -> None:
        """Give the lease up at once so another replica need not wait for it to expire."""
        if self._observed is None or self._holder(self._observed) != self.identity:
            return
        updated = dict(self._observed)
        spec = dict(updated.get("spec") or {})
        spec.update(holderIdentity="", leaseDurationSeconds=1, renewTime=_micro_time())
        updated["spec"] = spec
        with contextlib.suppress(Conflict, NotFound):
            await self.api.replace(self.name, updated)
            log.info("released lease %s", self.name)
        self.lost.set()
