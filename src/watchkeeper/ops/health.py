"""One small HTTP server for the kubelet and Prometheus: /healthz, /readyz, /metrics.

/healthz (liveness) fails only once something is past its ``max_unhealthy``: restarting
the pod is the loud signal of last resort. /readyz fails as soon as a cache is not ready,
a watch is degraded, a supervised task crashed, a reconcile is stuck, or every reconcile
failed for ``ControllerConfig.failure_window`` seconds, with the reason in the body.
``/readyz?verbose`` is JSON: each watch, and each controller with its reconcile counts,
last error, failing and stuck objects, mapper errors and tasks, each leader elector, and
each shard ring (live shards, this replica's share, whether it is the sharder), and each
webhook server (listening or not, reviews per handler).

A leader elector fails readiness once its attempts to reach the lease have failed for
longer than ``ControllerConfig.elector_unready_after`` (the controller that runs it applies
the rule; a follower that reaches the lease stays ready: its caches are warm), and
liveness past ``max_unhealthy``.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from watchkeeper.cache import Store
from watchkeeper.controller import Controller
from watchkeeper.controller.leadership import Elector, elector_health, elector_problems
from watchkeeper.errors import WatchkeeperError
from watchkeeper.leader import LeaderElector
from watchkeeper.ops.metrics import Sources, WatchkeeperCollector
from watchkeeper.sharding import ShardReplica
from watchkeeper.supervisor import Supervisor
from watchkeeper.watcher import WatchHealth, WatchState

if TYPE_CHECKING:  # (wk.webhooks is imported on first use: most operators serve none)
    from watchkeeper.webhooks import WebhookServer


class ProbeServerDown(WatchkeeperError):
    """The probe server's listening socket stopped serving (``serve()`` raises it so that
    its supervisor restarts the server, or ends the run)."""


class HealthServer:
    """``HealthServer(port=8080).add_controller(c)``; ``await start()`` / ``await stop()``.

    Binds 127.0.0.1 by default; in a pod pass ``host="0.0.0.0"`` so the kubelet can reach it.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host, self.port = host, port
        self.sources = Sources()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(WatchkeeperCollector(self.sources))
        self._runner: web.AppRunner | None = None
        self._sock: socket.socket | None = None

    def add_controller(self, controller: Controller) -> HealthServer:
        self.sources.controllers.append(controller)
        return self

    def add_watch(
        self, health: WatchHealth, store: Store | None = None, max_unhealthy: float | None = None
    ) -> HealthServer:
        self.sources.watches.append((health, store, max_unhealthy))
        return self

    def add_elector(
        self, elector: LeaderElector, unready_after: float | None = None,
        max_unhealthy: float | None = None,
    ) -> HealthServer:
        """Report a ``LeaderElector``. The thresholds apply only if no added controller
        runs it (one that does applies its own ``ControllerConfig``): not ready once its
        attempts have failed for ``unready_after`` s, not alive past ``max_unhealthy``."""
        self.sources.electors.append(elector)
        self.sources.elector_limits[id(elector)] = (unready_after, max_unhealthy)
        return self

    def add_shards(self, replica: ShardReplica) -> HealthServer:
        """Report a sharded controller's ring and this replica's share (``wk.run`` adds
        each one it runs); not ready until its shard leases were listed once."""
        self.sources.shards.append(replica)
        return self

    def add_webhooks(self, server: WebhookServer) -> HealthServer:
        """Report a webhook server (``wk.run`` adds it): not ready unless it listens."""
        self.sources.webhooks.append(server)
        return self

    def add_supervisor(self, supervisor: Supervisor) -> HealthServer:
        """Report this supervisor's tasks too (a controller's own is reported already)."""
        self.sources.supervisors.append(supervisor)
        return self

    # -- checks --------------------------------------------------------------------------

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    def liveness(self) -> tuple[bool, list[str]]:
        now, problems = self._now(), []
        for health, _store, limit in self.sources.all_watches():
            down = health.non_functioning_for(now)
            if limit is not None and down >= limit:
                problems.append(
                    f"{health.resource}: not working for {down:.0f} s "
                    f"(max_unhealthy {limit:g} s): {health.last_error}"
                )
        for c in self.sources.controllers:
            problems.extend(f"controller {c.name}: {why}" for why in c.health(now).fatal.values())
        for e, controller in self.sources.all_electors():
            h = elector_health(e)
            if controller is None and h is not None:
                unready_after, limit = self.sources.elector_limits.get(id(e), (None, None))
                fatal = elector_problems(h, now, unready_after, limit)[1]
                if fatal is not None:
                    problems.append(f"leader election: {fatal}")
        return not problems, problems

    def readiness(self) -> tuple[bool, list[dict[str, Any]]]:
        """Every watch, then every controller (its reconciles, failing objects and tasks)."""
        ok, details = True, []
        wall, now = time.time(), self._now()

        def to_wall(t: float | None) -> float | None:
            return None if t is None else wall - (now - t)

        for health, store, _limit in self.sources.all_watches():
            ready = health.state is WatchState.HEALTHY and (store is None or store.ready)
            ok = ok and ready
            details.append({
                "resource": health.resource,
                "ready": ready,
                "state": health.state.value,
                "since": to_wall(health.since),
                "consecutive_failures": health.consecutive_failures,
                "last_error": str(health.last_error) if health.last_error else None,
                "objects": len(store) if store is not None else None,
            })
        for c in self.sources.controllers:
            h = c.health(now)
            triggers = {t.name for t in c.triggers}  # already reported as watches above
            own = {part: why for part, why in h.problems.items() if part not in triggers}
            ok = ok and not own
            details.append({
                "resource": f"controller {c.name}",
                "controller": c.name,
                "ready": not own,
                "state": "degraded" if own else "healthy",
                "problems": own,
                "reconciles": h.reconciles,
                "last_error": h.last_error,
                "last_error_object": str(h.last_error_object) if h.last_error_object else None,
                "last_error_at": to_wall(h.last_error_at),
                "failing": [
                    {"object": str(f.ref), "failures": f.failures, "since": to_wall(f.first_failed),
                     "last_error": f.last_error}
                    for f in h.failing
                ],
                "failing_objects": len(c.stats.failing),
                "stuck": [{"object": str(ref), "running_for": round(age, 1)}
                          for ref, age in h.stuck],
                "mapper_errors": {t.name: t.mapper_errors.count for t in c.triggers
                                  if t.mapper is not None},
                "tasks": [
                    {"task": t.name, "state": t.state.value, "since": to_wall(t.since),
                     "restarts": t.restarts,
                     "last_error": t.describe() or None}
                    for t in h.tasks
                ],
            })
        for e, controller in self.sources.all_electors():
            detail = self._elector_detail(e, controller, now, to_wall)
            ok = ok and detail["ready"]
            details.append(detail)
        for replica in self.sources.shards:
            st = replica.status()
            ok = ok and st.ready
            details.append({
                "resource": f"shard ring {st.ring}",
                "ready": st.ready,
                "state": "healthy" if st.ready and st.last_error is None else "degraded",
                "ring": st.ring,
                "replica": st.replica_id,
                "live_shards": st.live,
                "dead_shards": st.dead,
                "sharder": st.sharder,
                "owned_objects": st.owned,
                "draining_objects": st.draining,
                "last_error": st.last_error,
            })
        for server in self.sources.webhooks:
            detail = server.status()
            ok = ok and detail["ready"]
            details.append(detail)
        for sup in self.sources.supervisors:
            problems = sup.problems()
            ok = ok and not problems
            details.append({
                "resource": sup.name,
                "ready": not problems,
                "state": "degraded" if problems else "healthy",
                "problems": problems,
                "tasks": [
                    {"task": t.name, "state": t.state.value, "since": to_wall(t.since),
                     "restarts": t.restarts, "last_error": t.describe() or None}
                    for t in sup.statuses()
                ],
            })
        return ok, details

    def _elector_detail(
        self, elector: LeaderElector | Elector, controller: Controller | None, now: float,
        to_wall: Callable[[float | None], float | None],
    ) -> dict[str, Any]:
        """One elector for /readyz?verbose: who holds the lease, our state and since when,
        the last error and how many attempts failed in a row."""
        h = elector_health(elector)
        detail: dict[str, Any] = {
            "resource": f"lease {getattr(elector, 'name', '?')}",
            "lease": getattr(elector, "name", None),
            "identity": getattr(elector, "identity", None),
            "leader": bool(getattr(elector, "is_leader", False)),
            "run_by": f"controller {controller.name}" if controller is not None else None,
        }
        if h is None:  # an elector without health: nothing to judge it by
            detail.update(ready=True, problem=None)
            return detail
        if controller is not None:
            problem = controller.health(now).problems.get("leader election")
        else:
            unready_after, limit = self.sources.elector_limits.get(id(elector), (None, None))
            problem = elector_problems(h, now, unready_after, limit)[0]
        detail.update({
            "ready": problem is None,
            "problem": problem,
            "state": str(getattr(h.state, "value", h.state)),
            # (no time before the elector first ran: its ``since`` means nothing yet)
            "since": (to_wall(getattr(h, "since", None))
                      if getattr(h, "functioning_since", 0.0) is not None else None),
            "holder": getattr(h, "holder", None) or None,
            "last_error": h.last_error,
            "last_error_at": to_wall(getattr(h, "last_error_at", None)),
            "consecutive_failures": h.consecutive_failures,
            "failures": getattr(h, "failures", 0),
            "errors": dict(getattr(h, "errors", {})),
            "not_working_for": round(h.non_functioning_for(now), 1),
        })
        return detail

    # -- HTTP ----------------------------------------------------------------------------

    async def _healthz(self, request: web.Request) -> web.Response:
        ok, problems = self.liveness()
        body = "ok\n" if ok else "".join(f"[-] {p}\n" for p in problems)
        return web.Response(status=200 if ok else 503, text=body)

    async def _readyz(self, request: web.Request) -> web.Response:
        ok, details = self.readiness()
        if "verbose" in request.query:
            return web.json_response({
                "ready": ok,
                "watches": [d for d in details if "problems" not in d and "lease" not in d
                            and "ring" not in d and "handlers" not in d],
                "controllers": [d for d in details if "controller" in d],
                "supervisors": [d for d in details if "problems" in d and "controller" not in d],
                "electors": [d for d in details if "lease" in d],
                "shards": [d for d in details if "ring" in d],  # rings and this share
                "webhooks": [d for d in details if "handlers" in d],
            }, status=200 if ok else 503)
        lines = [f"[{'+' if d['ready'] else '-'}] {d['resource']}{_why(d)}" for d in details]
        return web.Response(status=200 if ok else 503, text="\n".join(lines) + "\n")

    async def _metrics(self, request: web.Request) -> web.Response:
        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/livez", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        family = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.create_server((self.host, self.port), family=family)
        runner = web.AppRunner(app, access_log=None)
        try:
            await runner.setup()
            await web.SockSite(runner, sock).start()
        except BaseException:
            sock.close()
            await runner.cleanup()
            raise
        self._runner, self._sock = runner, sock
        if self.port == 0:
            self.port = int(sock.getsockname()[1])

    @property
    def serving(self) -> bool:
        """Whether the listening socket is open (false before start and after stop)."""
        return self._sock is not None and self._sock.fileno() >= 0

    async def serve(self, check_interval: float = 5.0) -> None:
        """Start if needed, then serve until cancelled; raise ``ProbeServerDown`` once the
        listening socket stopped serving, so a supervisor sees it (and may restart it)."""
        if self._runner is None:
            await self.start()
        try:
            while True:
                await asyncio.sleep(check_interval)
                if not self.serving:
                    raise ProbeServerDown(f"the probe server on {self.url} stopped listening")
        except ProbeServerDown:
            await self.stop()
            raise

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


def _why(detail: dict[str, Any]) -> str:
    """Why a part is not ready, on one line (empty when it is)."""
    if detail["ready"]:
        return ""
    if "lease" in detail:  # a leader elector
        return f": {detail.get('problem')}"
    if "problems" in detail:  # a controller
        return ": " + "; ".join(f"{part}: {why}" for part, why in detail["problems"].items())
    return f": {detail.get('state', '')} {detail.get('last_error') or ''}"
