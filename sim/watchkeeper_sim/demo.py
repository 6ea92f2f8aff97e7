"""``make demo``: the simulator, two watchers, and a scripted sequence of faults.

A person sees the backoff grow during an outage, each error explained (who lacks which
RBAC rule; which CRD is missing), and recovery without a restart; the summary shows how
few requests were sent during the outage and that no change was missed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import click

import watchkeeper as wk
from watchkeeper_sim.manifests import crd_manifest
from watchkeeper_sim.server import ApiServer

NS = "demo"
CRD: dict[str, Any] = crd_manifest()


def configmap(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": NS}, "data": data}


def widget(name: str, size: int) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": name, "namespace": NS}, "spec": {"size": size}}


@dataclass
class Tracked:
    """One watcher's view: its cache (kept by the reflector), and what it saw."""

    label: str
    store: wk.Store = field(default_factory=wk.Store)
    events: int = 0
    errors: int = 0
    last_error: tuple[str, str] = ("", "")

    @property
    def objects(self) -> dict[str, str]:
        """name -> resourceVersion of what the cache holds."""
        return {wk.meta.name(o): wk.meta.resource_version(o) or "" for o in self.store}


class Demo:
    def __init__(self, fast: bool, operator: str | None = None) -> None:
        self.fast = fast
        self.operator = operator
        self.t0 = time.monotonic()

    def say(self, text: str, color: str | None = None) -> None:
        stamp = f"{time.monotonic() - self.t0:6.1f}s"
        click.echo(f"{click.style(stamp, dim=True)}  {click.style(text, fg=color)}")

    def step(self, text: str) -> None:
        click.echo()
        self.say(f"== {text}", "cyan")

    async def follow(self, api: wk.Api, tracked: Tracked) -> None:
        config = wk.WatchConfig(max_unhealthy=None, server_timeout=60)
        tracked.store, writer = wk.Store.new()
        async for ev in wk.reflector(writer, wk.watcher(api, config)):
            match ev:
                case wk.InitDone():
                    self.say(f"{tracked.label}: listed {len(tracked.store)} objects", "green")
                case wk.Apply(obj):
                    tracked.events += 1
                    self.say(f"{tracked.label}: applied {wk.meta.name(obj)}")
                case wk.Delete(obj):
                    tracked.events += 1
                    self.say(f"{tracked.label}: deleted {wk.meta.name(obj)}")
                case wk.WatchError(error, retry_in):
                    tracked.errors += 1
                    kind = type(error).__name__
                    self.say(f"{tracked.label}: {kind}: {error.message} "
                             f"-> retrying in {retry_in:.1f} s", "yellow")
                    hint = error.hint()
                    if hint and (kind, hint) != tracked.last_error:
                        self.say(f"{'':11}what to do: {hint}", "magenta")
                    tracked.last_error = (kind, hint)

    async def run(self) -> int:
        # The demo narrates every error itself; the library's log lines would repeat them.
        logging.getLogger("watchkeeper").setLevel(logging.CRITICAL)
        outage = 8.0 if self.fast else 20.0
        pause = 12.0 if self.fast else 15.0
        async with ApiServer(bookmark_interval=30.0) as srv:
            srv.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
            for i in range(3):
                srv.create_object(configmap(f"settings-{i}", level=str(i)))
            srv.create_object(CRD)
            for i in range(2):
                srv.create_object(widget(f"gear-{i}", i + 1))
            srv.add_user("operator")
            srv.rbac.grant("operator", verbs=["get", "list", "watch"],
                           resources=["configmaps"], namespaces=[NS])
            srv.rbac.grant("operator", verbs=["get", "list", "watch"], resources=["widgets"],
                           groups=["example.com"], namespaces=[NS])
            self.step(f"simulator on {srv.url}; watching as user 'operator'")
            cms, wgs = Tracked("configmaps"), Tracked("widgets")
            async with srv.client("operator") as client:
                sup = wk.Supervisor("demo")
                sup.spawn("follow configmaps",
                          lambda: self.follow(client.api("configmaps", namespace=NS), cms))
                sup.spawn("follow widgets",
                          lambda: self.follow(client.api("widgets.example.com", namespace=NS), wgs))
                try:
                    attempts = await self.script(srv, outage, pause)
                    # Backoff may still be waiting out its last delay: give it a bounded while.
                    async with asyncio.timeout(60):
                        while any(  # noqa: ASYNC110 (polls two independent sides)
                            t.objects != self.truth(srv)[t.label] for t in (cms, wgs)
                        ):
                            await asyncio.sleep(0.2)
                except TimeoutError:
                    pass
                finally:
                    await sup.aclose()
            code = self.summary(srv, cms, wgs, attempts, outage)
            if sup.failure is not None:  # a watch that died is a failed demo, said out loud
                self.say(str(sup.failure), "red")
                code = max(code, 1)
            if self.operator:
                code = max(code, await self.operator_act(srv, outage / 2))
            return code

    async def script(self, srv: ApiServer, outage: float, pause: float) -> int:
        await asyncio.sleep(1.5)
        self.step("normal operation: a few changes")
        srv.create_object(configmap("feature-flags", beta="on"))
        obj = srv.get_object("v1", "ConfigMap", "settings-1", namespace=NS)
        obj["data"] = {"level": "11"}
        srv.update_object(obj)
        await asyncio.sleep(1.5)

        self.step(f"OUTAGE: the API server refuses every connection for {outage:g} s")
        srv.faults.refuse(count_refused=True)
        srv.reset_watches()
        before = srv.connection_attempts
        await asyncio.sleep(outage / 2)
        self.say("(meanwhile, on the server: settings-0 changes, settings-2 is deleted)")
        obj = srv.get_object("v1", "ConfigMap", "settings-0", namespace=NS)
        obj["data"] = {"level": "changed during the outage"}
        srv.update_object(obj)
        srv.delete_object("v1", "ConfigMap", "settings-2", namespace=NS)
        await asyncio.sleep(outage / 2)
        attempts = srv.connection_attempts - before
        srv.faults.clear()
        self.step("the server is back: the watchers resume from their resourceVersion")
        await asyncio.sleep(pause)

        self.step("RBAC: an administrator revokes 'operator's access to configmaps")
        srv.rbac.revoke("operator", resources=["configmaps"])
        # A real apiserver lets an open watch run to its timeout; cut it to show it now.
        for w in list(srv.handlers.watches):
            if "/configmaps" in w.info.path:
                w.abort()
        await asyncio.sleep(pause)
        self.step("RBAC: access restored; the watcher recovers by itself")
        srv.rbac.grant("operator", verbs=["get", "list", "watch"],
                       resources=["configmaps"], namespaces=[NS])
        srv.create_object(configmap("after-rbac-fix", ok="yes"))
        await asyncio.sleep(pause)

        self.step("CRD: widgets.example.com is deleted")
        srv.delete_object("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                          "widgets.example.com", namespace="")
        await asyncio.sleep(pause)
        self.step("CRD: re-created, with one widget")
        srv.create_object(CRD)
        srv.create_object(widget("gear-new", 7))
        await asyncio.sleep(pause)
        return attempts

    @staticmethod
    def truth(srv: ApiServer) -> dict[str, dict[str, str]]:
        """What the server holds, per watcher label: name -> resourceVersion."""
        return {
            label: {wk.meta.name(o): wk.meta.resource_version(o) or ""
                    for o in srv.store.objects(srv.resource(api_version, plural), NS)}
            for label, api_version, plural in (("configmaps", "v1", "configmaps"),
                                               ("widgets", "example.com/v1", "widgets"))
        }

    def summary(
        self, srv: ApiServer, cms: Tracked, wgs: Tracked, attempts: int, outage: float
    ) -> int:
        self.step("summary")
        truth = self.truth(srv)
        ok = True
        for tracked in (cms, wgs):
            same = tracked.objects == truth[tracked.label]
            ok = ok and same
            verdict = "matches the server: nothing missed" if same else "DIFFERS from the server"
            click.echo(f"  {tracked.label:<11} {tracked.events} change events, "
                       f"{tracked.errors} errors surfaced; final state {verdict}")
        lists = srv.count(is_list=True, user="operator")
        watches = srv.count(is_watch=True, user="operator")
        click.echo(f"  connection attempts by both watchers during the {outage:g} s outage: "
                   f"{attempts} (a naive retry loop makes thousands)")
        relists = lists - 2
        click.echo(f"  requests by 'operator' in all: {lists} LIST, {watches} WATCH; "
                   + ("every reconnect resumed from its resourceVersion, no relist"
                      if relists == 0 else f"{relists} relists (after 410 Gone)"))
        return 0 if ok else 1


    async def operator_act(self, srv: ApiServer, outage: float) -> int:
        """The operator (``module:setup`` returning a wk.Operator over widgets that owns
        ConfigMaps named widget-<name>) reconciling through an outage and a CRD re-creation."""
        from watchkeeper._runner import load_target

        self.step(f"OPERATOR: {self.operator} reconciles widgets into ConfigMaps")
        setup = load_target(self.operator or "")
        async with srv.client() as client:
            op = setup(client)
            op.controller.config = wk.ControllerConfig(handle_signals=False, max_unhealthy=None)
            sup = wk.Supervisor("demo operator")
            sup.spawn("operator", lambda: op.controller.run(op.reconcile, op.error_policy,
                                                            op.context), forever=False)
            cm_type = srv.resource("v1", "ConfigMap")

            def missing() -> list[str]:
                widgets = srv.store.objects(srv.resource("example.com/v1", "widgets"), NS)
                return [wk.meta.name(w) for w in widgets
                        if srv.store.peek(cm_type, NS, f"widget-{wk.meta.name(w)}") is None]

            async def converge(label: str) -> bool:
                try:
                    async with asyncio.timeout(60):
                        while missing():  # noqa: ASYNC110 (polls the server)
                            await asyncio.sleep(0.2)
                except TimeoutError:
                    self.say(f"{label}: still missing ConfigMaps for {missing()}", "red")
                    return False
                self.say(f"{label}: every widget has its ConfigMap", "green")
                return True

            ok = await converge("start")
            self.step(f"OPERATOR: outage of {outage:g} s while two widgets are created")
            srv.faults.refuse(count_refused=True)
            srv.reset_watches()
            srv.create_object(widget("made-in-outage-1", 1))
            srv.create_object(widget("made-in-outage-2", 2))
            await asyncio.sleep(outage)
            srv.faults.clear()
            ok = await converge("after the outage") and ok
            self.step("OPERATOR: the CRD is deleted and re-created with a new widget")
            srv.delete_object("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                              "widgets.example.com", namespace="")
            await asyncio.sleep(3)
            srv.create_object(CRD)
            srv.create_object(widget("after-crd", 3))
            ok = await converge("after the CRD came back") and ok
            results = op.controller.results
            click.echo(f"  operator: {results['success']} reconciles succeeded, "
                       f"{results['error']} failed and were retried with backoff")
            await sup.aclose()
            if sup.failure is not None:
                self.say(str(sup.failure), "red")
                ok = False
        return 0 if ok else 1


async def run_demo(fast: bool = False, operator: str | None = None) -> int:
    return await Demo(fast, operator).run()
