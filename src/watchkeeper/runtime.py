"""``watchkeeper.run``: the composition root. One call runs one or several operators with
the probe and metrics server, leader election and signal handling, every background task
under one ``Supervisor``, so a process has one place that decides when it stops::

    await wk.run(
        wk.Operator(widgets, reconcile_widget),
        wk.Operator(gadgets, reconcile_gadget),
        probes=wk.HealthServer("0.0.0.0", 8080),
        leader_election=wk.LeaderElector(leases, "my-operator-leader"),
        webhooks=hooks,  # a wk.webhooks.WebhookServer: admission and conversion
    )

Signals are handled here and only here: the first SIGTERM or SIGINT stops the intake of
every controller and drains them all concurrently (each within its own
``ControllerConfig.shutdown_timeout``); a second signal cancels the reconciles still
running in all of them. Controllers run under ``run`` install no handler of their own.

``run`` returns once every controller has stopped after a signal (or ``stop``). It raises
the first failure, after draining the other controllers: a controller's own error
(``ControllerUnhealthy``, ``LeadershipLost``) as it is, or ``TaskDied`` naming the probe
server or the webhook server (after 5 failed restarts) or the leader elector.

The webhook server runs on every replica, whatever the leader election or sharding: the
API server calls any replica behind the Service. On the first signal it stops accepting
connections and finishes the reviews in flight (``WebhookServer.drain_timeout``) while the
controllers drain. With webhooks, ``run`` needs no operator (a webhook-only process).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from watchkeeper.backoff import ExponentialBackoff
from watchkeeper.controller import Operator
from watchkeeper.controller.signals import install_signal_handlers, signals_handled_by_caller
from watchkeeper.leader import ElectorHealth, LeaderElector
from watchkeeper.ops import HealthServer
from watchkeeper.sharding import ShardReplica
from watchkeeper.supervisor import Supervisor, TaskHandle

if TYPE_CHECKING:  # (wk.webhooks is imported on first use: most operators serve none)
    from watchkeeper.webhooks import WebhookServer

__all__ = ["Operator", "run"]

log = logging.getLogger("watchkeeper.run")


class _SharedLease:
    """What each controller sees of a lease the runtime holds for all of them: the
    elector runs once (in the runtime's supervisor), not once per controller, and all of
    them lead, and stop leading, together."""

    def __init__(self, elector: LeaderElector) -> None:
        self._elector = elector
        # One term only (never reset: losing a shared lease ends the run).
        self.leading, self.lost = elector.leading, elector.lost

    @property
    def health(self) -> ElectorHealth:
        return self._elector.health

    @property
    def name(self) -> str:
        return self._elector.name

    @property
    def identity(self) -> str:
        return self._elector.identity

    @property
    def is_leader(self) -> bool:
        return self._elector.is_leader

    async def run_elector(self) -> None:
        """The one term, run by the runtime's supervisor."""
        await self._elector.run()

    async def run(self) -> None:
        """A controller's view of the term: it ends when the shared term ends."""
        await self._elector.lost.wait()

    def reset(self) -> None:  # pragma: no cover - only "exit" is allowed with a shared lease
        raise RuntimeError("a lease shared by several controllers cannot be reacquired")


async def run(
    *operators: Operator,
    probes: HealthServer | None = None,
    leader_election: LeaderElector | None = None,
    stop: asyncio.Event | None = None,
    handle_signals: bool = True,
    probe_check_interval: float = 5.0,
    webhooks: WebhookServer | None = None,
) -> None:
    """Run ``operators`` until a signal (or ``stop``) drained them all, or raise the first
    failure once the others have drained.

    ``probes``: a ``HealthServer`` reporting every controller, the elector and the runtime's
    tasks; started here if it is not serving yet (a busy port raises ``OSError`` at once)
    and stopped at the end if it was started here; if it stops listening it is restarted
    (1 s doubling to 30 s), and after 5 failed restarts the run ends with ``TaskDied``.
    ``leader_election``: one lease for the whole process: caches stay warm everywhere, only
    the leader reconciles. With one operator its ``ControllerConfig.on_leadership_lost``
    applies; with several, losing the lease ends the run with ``LeadershipLost`` (each
    must keep the default ``"exit"``). ``stop``: set it to drain and return, as a signal
    does. ``handle_signals=False``: no signal handler at all (the caller stops the run
    with ``stop``). ``probe_check_interval``: seconds between checks that the probe server
    (and the webhook server) still listens. ``webhooks``: a ``WebhookServer``, started
    here (a busy port raises ``OSError`` at once), restarted as the probe server is, and
    drained on the first signal; its ``CertificateManager``, if it was given one, is run
    here too."""
    if not operators and webhooks is None:
        raise ValueError("run() needs at least one Operator (or webhooks)")
    for op in operators:
        if not isinstance(op, Operator):
            raise TypeError(
                f"run() takes watchkeeper.Operator values, not {type(op).__name__} "
                "(wrap a Controller: Operator(controller, reconcile))"
            )
    if len({id(op.controller) for op in operators}) < len(operators):
        raise ValueError("the same Controller was given twice")
    shared: _SharedLease | None = None
    if leader_election is not None and len(operators) > 1:
        reacquiring = [op.controller.name for op in operators
                       if op.controller.config.on_leadership_lost != "exit"]
        if reacquiring:
            raise ValueError(
                "with several controllers on one lease, losing it ends the run: "
                f"on_leadership_lost must be 'exit' (not for {', '.join(reacquiring)})"
            )
        shared = _SharedLease(leader_election)
    # Sharded controllers (Controller(sharding=wk.Sharding(...))): each holds its own
    # membership lease as its elector, and its ring view and sharder run here.
    shards: dict[int, ShardReplica] = {}
    for op in operators:
        if op.controller.sharding is None:
            continue
        if leader_election is not None:
            raise ValueError("a sharded controller runs on every replica: do not combine it "
                             "with leader_election (each shard holds its own lease)")
        if op.controller.config.on_leadership_lost != "exit":
            raise ValueError(
                f"sharded controller {op.controller.name}: on_leadership_lost must be 'exit' "
                "(a replica that lost its shard lease restarts as a new shard)")
        shards[id(op.controller)] = ShardReplica(op.controller)

    loop = asyncio.get_running_loop()
    stop = stop or asyncio.Event()
    force = asyncio.Event()
    sup = Supervisor("watchkeeper run")
    started_probes = False
    if probes is not None and webhooks is not None:
        probes.add_webhooks(webhooks)
    if probes is not None:
        for op in operators:
            probes.add_controller(op.controller)
        probes.add_supervisor(sup)
        if leader_election is not None and shared is None:
            probes.add_elector(leader_election)  # (a shared lease: through its controllers)
        for replica in shards.values():
            probes.add_shards(replica)
        if not probes.serving:
            await probes.start()
            started_probes = True
    restore = install_signal_handlers(loop, stop, force) if handle_signals else None
    token = signals_handled_by_caller.set(True)  # the tasks spawned below inherit it
    try:
        if webhooks is not None and not webhooks.serving:
            await webhooks.start()
        async with sup:
            serving: list[TaskHandle] = []  # the webhook server: drained like a controller
            if webhooks is not None:
                certs = webhooks.certificates
                if certs is not None:
                    certs.start(sup, "webhook certificates")
                serving.append(sup.spawn(
                    "webhook server",
                    functools.partial(webhooks.serve, stop, probe_check_interval),
                    restart="backoff", forever=False,
                    backoff=ExponentialBackoff(1.0, 30.0, 2.0, 0.0, max_retries=5)))
            if probes is not None:
                sup.spawn("probe server", functools.partial(probes.serve, probe_check_interval),
                          restart="backoff",
                          backoff=ExponentialBackoff(1.0, 30.0, 2.0, 0.0, max_retries=5))
            if shared is not None:
                sup.spawn("leader elector", shared.run_elector, forever=False)
            elector = shared if shared is not None else leader_election
            for replica in shards.values():
                ring = replica.sharding.ring
                sup.spawn(f"shard ring {ring}", replica.view.run, restart="backoff")
                sup.spawn(f"sharder {ring}", replica.sharder.run, restart="backoff")
            handles = [
                sup.spawn(name, functools.partial(
                    _run_one, sup, op, stop, force,
                    shards[id(op.controller)].elector if id(op.controller) in shards
                    else elector), forever=False)
                for name, op in zip(_task_names(operators), operators, strict=True)
            ]
            await _until_all_stopped(sup, [*handles, *serving], stop)
            failure = sup.failure
            if failure is not None:
                raise failure
    finally:
        signals_handled_by_caller.reset(token)
        if restore is not None:
            restore()  # after every drain, so that a second signal can force them
        if started_probes and probes is not None:
            await probes.stop()
        if webhooks is not None:
            await webhooks.stop()  # (a no-op once its task drained it)


async def _run_one(
    sup: Supervisor, op: Operator, stop: asyncio.Event, force: asyncio.Event,
    elector: LeaderElector | _SharedLease | None,
) -> None:
    """One controller; its own error fails the runtime as it is (not wrapped in TaskDied),
    so callers and the CLI see ``ControllerUnhealthy`` or ``LeadershipLost`` themselves."""
    try:
        await op.controller.run(op.reconcile, op.error_policy, op.context,
                                on_watch_error=op.on_watch_error, stop=stop, force=force,
                                elector=elector)
    except Exception as exc:
        sup.fail(exc)


async def _until_all_stopped(
    sup: Supervisor, handles: Sequence[TaskHandle], stop: asyncio.Event
) -> None:
    """Wait for every controller to return; the first failure anywhere (a controller, the
    probe server, the elector) sets ``stop`` so the others drain before the run ends."""
    pending: set[asyncio.Future[Any]] = {h.task for h in handles}
    failed: asyncio.Future[Any] = sup.failed_future
    while pending:
        waits = pending | ({failed} if not stop.is_set() else set())
        done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        pending -= done
        if failed in done and not stop.is_set():
            log.info("stopping every controller: %s", sup.failure)
            stop.set()


def _task_names(operators: Sequence[Operator]) -> list[str]:
    """``controller <resource>``, numbered when two controllers watch the same resource."""
    names: list[str] = []
    for op in operators:
        base = name = f"controller {op.controller.name}"
        n = 2
        while name in names:
            name, n = f"{base} #{n}", n + 1
        names.append(name)
    return names

