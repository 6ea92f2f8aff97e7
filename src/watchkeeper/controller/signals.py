"""SIGTERM/SIGINT for everything that stops on a signal in one event loop: the first
signal drains, a second forces. ``watchkeeper.run`` owns the signals of its controllers;
a controller run on its own (a script) registers here itself."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import signal
import threading
from collections.abc import Callable

log = logging.getLogger("watchkeeper.controller")

signals_handled_by_caller: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "watchkeeper_signals_handled_by_caller", default=False
)
"""True inside ``watchkeeper.run``: the runtime owns SIGTERM/SIGINT, controllers install
nothing (a ContextVar, so that only the runtime's own tasks see it)."""


class _SignalFanout:
    """One SIGTERM/SIGINT handler per event loop, shared by everything that stops on a
    signal: the first signal sets every registered ``stop`` (drain), a signal arriving
    once a ``stop`` is set sets its ``force``. Without it, the last ``add_signal_handler``
    wins and the other controllers of the loop never see the signal."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.pairs: list[tuple[asyncio.Event, asyncio.Event]] = []
        self.installed: list[signal.Signals] = []

    def on_signal(self) -> None:
        draining = [stop for stop, _ in self.pairs if not stop.is_set()]
        if draining:
            log.info("signal received: draining (a second signal forces)")
        if len(draining) < len(self.pairs):
            log.warning("second signal: stopping at once")
        for stop, force in self.pairs:
            if stop.is_set():
                force.set()
            else:
                stop.set()


_fanouts: dict[asyncio.AbstractEventLoop, _SignalFanout] = {}


def nothing() -> None:
    """The unregister function of a registration that installed nothing."""
    return None


def install_signal_handlers(
    loop: asyncio.AbstractEventLoop, stop: asyncio.Event, force: asyncio.Event
) -> Callable[[], None]:
    """Register ``stop``/``force`` with the loop's shared SIGTERM/SIGINT handler (installed
    by the first registration, removed after the last); return the unregister function.
    Outside the main thread (where signals cannot be handled) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        return nothing
    fan = _fanouts.get(loop)
    if fan is None:
        fan = _fanouts[loop] = _SignalFanout(loop)
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, fan.on_signal)
                fan.installed.append(sig)
    pair = (stop, force)
    fan.pairs.append(pair)

    def restore() -> None:
        assert fan is not None
        with contextlib.suppress(ValueError):
            fan.pairs.remove(pair)
        if fan.pairs or _fanouts.get(loop) is not fan:
            return
        del _fanouts[loop]
        while fan.installed:
            sig = fan.installed.pop()
            with contextlib.suppress(Exception):  # a loop already closed: nothing to undo
                loop.remove_signal_handler(sig)

    return restore
