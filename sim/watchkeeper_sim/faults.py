"""Fault injection for the simulator, switchable at run time.

Each fault is a standing rule: it fires on every matching request (optionally only ``count``
times, or for ``duration`` seconds) until removed. Kinds:

- ``refuse``   the listening socket is closed (connections refused; the port is kept and
               reopened when the fault goes). With ``count_refused=True`` the server instead
               accepts and resets each connection at once, so attempts can be counted.
- ``error``    answer with an HTTP error code and a Status body (default 500). With
               ``plain=True`` the body is plain text instead, no Status: as a gateway or
               load balancer answers for an apiserver it cannot reach (502, 504), or as
               kube-aggregator answers for an aggregated API that is down (503,
               "service unavailable").
- ``throttle`` answer 429 with ``Retry-After`` and the apiserver's plain-text body: as API
               Priority and Fairness does (``limiter="apf"``, with X-Kubernetes-Pf-* headers;
               174, or after ``delay`` seconds in a queue: 175) or as the legacy max-in-flight
               filter does (``limiter="max-inflight"``: no Pf headers; 176).
- ``hang``     accept the request and never answer it; the connection is dropped when the
               fault is removed or cleared, when its ``duration`` ends, or when the server
               stops. With ``count=N`` the first N matching requests hang (later ones are
               served) and stay hung after the count is used up, until one of those.
- ``slow``     delay the request by ``delay`` seconds, then serve it normally.
- ``reset``    abort the connection of matching watch streams after ``after_events`` events.
- ``stall``    matching open watch streams stop sending but stay open.
- ``garbage``  write ``data`` (not JSON) as a line into matching watch streams.
- ``truncate`` write half of the next event line into matching watch streams, then abort.

Requests are matched on method, path prefix, user and whether they are watches. Over HTTP the
same API is at ``/_sim/faults`` (see ApiServer).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

KINDS = ("refuse", "error", "throttle", "hang", "slow", "reset", "stall", "garbage", "truncate")
STREAM_KINDS = ("reset", "stall", "garbage", "truncate")
LIMITERS = ("apf", "max-inflight")


@dataclass(frozen=True)
class RequestInfo:
    """What a fault can match on."""

    method: str
    path: str
    user: str | None
    is_watch: bool


@dataclass(frozen=True)
class Match:
    """Which requests a fault applies to; None matches anything."""

    method: str | None = None
    path_prefix: str | None = None
    user: str | None = None
    watch: bool | None = None

    def matches(self, info: RequestInfo) -> bool:
        return (
            (self.method is None or self.method.upper() == info.method.upper())
            and (self.path_prefix is None or info.path.startswith(self.path_prefix))
            and (self.user is None or self.user == info.user)
            and (self.watch is None or self.watch == info.is_watch)
        )


_ids = itertools.count(1)


@dataclass(eq=False)
class Fault:
    kind: str
    match: Match = field(default_factory=Match)
    count: int | None = None  # how many more times it may fire; None = unlimited
    expires_at: float | None = None  # time.monotonic() deadline; None = until removed
    code: int = 500
    message: str = ""
    retry_after: float | None = None
    delay: float = 0.0
    data: bytes = b"this is not json\n"
    after_events: int = 0
    count_refused: bool = False
    plain: bool = False  # error: a plain-text body, no Status
    limiter: str = "apf"  # throttle: "apf" or "max-inflight"
    fired: int = 0
    id: int = field(default_factory=lambda: next(_ids))
    removed: bool = False  # set by remove()/clear(): requests held by it are let go

    @property
    def timed_out(self) -> bool:
        return self.expires_at is not None and time.monotonic() >= self.expires_at

    @property
    def expired(self) -> bool:
        return (self.count is not None and self.count <= 0) or self.timed_out

    @property
    def holding(self) -> bool:
        """A request this fault hangs stays hung: a used-up ``count`` does not end it (only
        new requests stop matching); removal, clearing and ``duration`` do."""
        return not (self.removed or self.timed_out)

    def describe(self) -> dict[str, Any]:
        d = asdict(self)
        d["data"] = self.data.decode("utf-8", "replace")
        return d


class Faults:
    """The active faults; ``on_change`` lets the server react (e.g. close the listener)."""

    def __init__(self) -> None:
        self._faults: list[Fault] = []
        self._held: set[Fault] = set()  # hang faults with requests hanging on them now
        self.on_change: Callable[[], None] = lambda: None
        self.on_compact: Callable[[], None] = lambda: None
        self._changed = asyncio.Event()

    # ---- adding ----------------------------------------------------------------------------

    def add(
        self,
        kind: str,
        *,
        count: int | None = None,
        duration: float | None = None,
        method: str | None = None,
        path_prefix: str | None = None,
        user: str | None = None,
        watch: bool | None = None,
        **params: Any,
    ) -> Fault:
        """Add a fault of ``kind`` (see module docstring); returns it (for ``remove``)."""
        if kind not in KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; known: {', '.join(KINDS)}")
        if params.get("limiter", "apf") not in LIMITERS:
            raise ValueError(f"unknown limiter {params['limiter']!r}; known: "
                             f"{', '.join(LIMITERS)}")
        if "data" in params and isinstance(params["data"], str):
            params["data"] = params["data"].encode()
        fault = Fault(
            kind=kind,
            match=Match(method, path_prefix, user, watch),
            count=count,
            expires_at=None if duration is None else time.monotonic() + duration,
            **params,
        )
        self._faults.append(fault)
        if duration is not None:
            self._later(duration)
        self._notify()
        return fault

    def refuse(self, *, duration: float | None = None, count_refused: bool = False,
               count: int | None = None) -> Fault:
        """Refuse connections (``count`` only applies with ``count_refused``)."""
        return self.add("refuse", duration=duration, count_refused=count_refused, count=count)

    def error(self, code: int = 500, message: str = "", *, plain: bool = False,
              **match: Any) -> Fault:
        """``code`` with a Status body, or with ``message`` as plain text (``plain``)."""
        return self.add("error", code=code, message=message, plain=plain, **match)

    def throttle(self, retry_after: float = 1, *, delay: float = 0.0, limiter: str = "apf",
                 **match: Any) -> Fault:
        """429s; ``delay`` holds each request first, like APF's queue-wait limit (175)."""
        return self.add("throttle", retry_after=retry_after, delay=delay, limiter=limiter,
                        **match)

    def hang(self, **match: Any) -> Fault:
        return self.add("hang", **match)

    def slow(self, delay: float, **match: Any) -> Fault:
        return self.add("slow", delay=delay, **match)

    def reset(self, after_events: int = 0, **match: Any) -> Fault:
        return self.add("reset", after_events=after_events, **match)

    def stall(self, **match: Any) -> Fault:
        return self.add("stall", **match)

    def garbage(self, data: bytes | str = b"this is not json\n", **match: Any) -> Fault:
        return self.add("garbage", data=data, **match)

    def truncate(self, **match: Any) -> Fault:
        return self.add("truncate", **match)

    def compact(self) -> None:
        """Drop the store's whole history now (older resourceVersions become 410 Gone)."""
        self.on_compact()

    # ---- removing --------------------------------------------------------------------------

    def remove(self, fault: Fault | int) -> None:
        fid = fault if isinstance(fault, int) else fault.id
        for f in (*self._faults, *self._held):
            if f.id == fid:
                f.removed = True
        if isinstance(fault, Fault):
            fault.removed = True
        self._faults = [f for f in self._faults if f.id != fid]
        self._notify()

    def clear(self, kind: str | None = None) -> None:
        """Remove every fault (or every fault of one kind)."""
        for f in (*self._faults, *self._held):
            if kind is None or f.kind == kind:
                f.removed = True
        self._faults = [f for f in self._faults if kind is not None and f.kind != kind]
        self._notify()

    def hold(self, fault: Fault) -> None:
        """Note that a request hangs on ``fault`` (so removing it later lets it go even
        after its count is used up and it left the active list)."""
        self._held.add(fault)

    def release(self, fault: Fault) -> None:
        self._held.discard(fault)

    # ---- querying --------------------------------------------------------------------------

    def __iter__(self) -> Any:
        return iter(list(self._faults))

    def describe(self) -> list[dict[str, Any]]:
        self._prune()
        return [f.describe() for f in self._faults]

    def find(self, kind: str, info: RequestInfo | None = None) -> Fault | None:
        """The first live fault of ``kind`` matching ``info``, without consuming it."""
        self._prune()
        for f in self._faults:
            if f.kind == kind and (info is None or f.match.matches(info)):
                return f
        return None

    def take(self, kind: str, info: RequestInfo | None = None) -> Fault | None:
        """Like ``find`` but counts one firing (and drops the fault when its count is used)."""
        f = self.find(kind, info)
        if f is not None:
            f.fired += 1
            if f.count is not None:
                f.count -= 1
                if f.count <= 0:
                    self._prune()
                    self._notify()
        return f

    @property
    def any_active(self) -> bool:
        """Cheap check for hot paths: False means no fault can apply to anything."""
        return bool(self._faults)

    @property
    def refusing(self) -> Fault | None:
        return self.find("refuse")

    async def wait_change(self, timeout: float | None = None) -> None:
        """Sleep until the set of faults changes (or ``timeout``)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout)

    # ---- internals -------------------------------------------------------------------------

    def _prune(self) -> None:
        if any(f.expired for f in self._faults):
            self._faults = [f for f in self._faults if not f.expired]
            self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()
        self.on_change()

    def _later(self, delay: float) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        loop.call_later(delay + 0.001, self._prune)
