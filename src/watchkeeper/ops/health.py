"""One small HTTP server for the kubelet and Prometheus: /healthz, /readyz, /metrics.

/healthz (liveness) fails only once something is past its ``max_unhealthy``: restarting
the pod is the loud signal of last resort. /readyz fails as soon as a cache is not ready
or a watch is degraded, with the reason in the body.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from watchkeeper.cache import Store
from watchkeeper.controller import Controller
from watchkeeper.ops.metrics import Sources, WatchkeeperCollector
from watchkeeper.watcher import WatchHealth, WatchState


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

    def add_controller(self, controller: Controller) -> HealthServer:
        self.sources.controllers.append(controller)
        return self

    def add_watch(
        self, health: WatchHealth, store: Store | None = None, max_unhealthy: float | None = None
    ) -> HealthServer:
        self.sources.watches.append((health, store, max_unhealthy))
        return self

    def add_elector(self, elector: Any) -> HealthServer:
        self.sources.electors.append(elector)
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
            stuck = c.health(now).problems.get("reconcile")
            limit = c.config.max_unhealthy
            timeout = c.config.reconcile_timeout
            if stuck and limit is not None and timeout is not None:
                ref_age = c._stuck(now)
                if ref_age and ref_age[1] > timeout + limit:
                    problems.append(stuck)
        return not problems, problems

    def readiness(self) -> tuple[bool, list[dict[str, Any]]]:
        ok, details = True, []
        wall, now = time.time(), self._now()
        for health, store, _limit in self.sources.all_watches():
            ready = health.state is WatchState.HEALTHY and (store is None or store.ready)
            ok = ok and ready
            details.append({
                "resource": health.resource,
                "ready": ready,
                "state": health.state.value,
                "since": wall - (now - health.since),
                "consecutive_failures": health.consecutive_failures,
                "last_error": str(health.last_error) if health.last_error else None,
                "objects": len(store) if store is not None else None,
            })
        for c in self.sources.controllers:
            problem = c.health(now).problems.get("reconcile")
            if problem:
                ok = False
                details.append({"resource": "reconcile", "ready": False, "last_error": problem})
        return ok, details

    # -- HTTP ----------------------------------------------------------------------------

    async def _healthz(self, request: web.Request) -> web.Response:
        ok, problems = self.liveness()
        body = "ok\n" if ok else "".join(f"[-] {p}\n" for p in problems)
        return web.Response(status=200 if ok else 503, text=body)

    async def _readyz(self, request: web.Request) -> web.Response:
        ok, details = self.readiness()
        if "verbose" in request.query:
            return web.json_response({"ready": ok, "watches": details}, status=200 if ok else 503)
        lines = [
            f"[{'+' if d['ready'] else '-'}] {d['resource']}"
            + ("" if d["ready"] else f": {d.get('state', '')} {d.get('last_error') or ''}")
            for d in details
        ]
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
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        if self.port == 0:
            self.port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"
