"""watchkeeper-sim's pytest plugin, used as a user's test suite uses it: the k8s_* fixtures
against the session's shared simulator (or a test's own), the fault API by name, CRDs from
files, operators in the background, waiting for an object."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

import watchkeeper as wk
from watchkeeper_sim.pytest_plugin import Waiter
from watchkeeper_sim.testing import (
    OperatorFailed,
    ServerThread,
    Simulator,
    WaitTimeout,
    load_crds,
)

Start = Any  # k8s_operator's starter


def configmap(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def crd(plural: str, kind: str, versions: tuple[str, ...] = ("v1",)) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.plugin.example.com"},
        "spec": {"group": "plugin.example.com", "scope": "Namespaced",
                 "names": {"plural": plural, "kind": kind},
                 "versions": [{"name": v, "served": True, "storage": v == versions[0],
                               "schema": {"openAPIV3Schema": {
                                   "type": "object",
                                   "x-kubernetes-preserve-unknown-fields": True}}}
                              for v in versions]},
    }


# ---- the simulator, its namespaces, and what a test leaves behind ------------------------


async def test_a_test_gets_a_namespace_of_its_own_on_the_shared_server(
        k8s_sim: Simulator, k8s_sim_session: ServerThread, k8s_namespace: str,
        k8s_client: wk.Client) -> None:
    assert k8s_sim.thread is k8s_sim_session
    assert k8s_namespace == k8s_sim.namespace
    assert "-test-a-test-gets-a-namespace" in k8s_namespace and len(k8s_namespace) <= 63
    assert k8s_client.default_namespace == k8s_namespace
    ns = await k8s_client.api("namespaces").get(k8s_namespace)
    assert ns["status"]["phase"] == "Active"
    cms = k8s_client.api("configmaps", namespace=k8s_namespace)
    await cms.create(configmap("mine", a="1"))
    assert k8s_sim.get("v1", "ConfigMap", "mine") is not None  # the namespace is the default


async def test_closing_a_simulator_view_undoes_its_faults_grants_and_namespace(
        k8s_sim_session: ServerThread) -> None:
    """What a test did to the shared server goes at its end, objects held by finalizers too
    (the operator that would have removed them is stopped by then)."""
    view = Simulator(k8s_sim_session, "undo-me")
    view.create({**configmap("held"), "metadata": {"name": "held",
                                                    "finalizers": ["example.com/never"]}})
    view.add_user("undo-user")
    view.grant("undo-user", verbs=["get"], resources=["configmaps"])
    view.server_error(503, path_prefix="/api/v1/namespaces/undo-me")
    assert k8s_sim_session.call(lambda srv: (len(srv.faults.describe()),
                                             len(srv.rbac.rules("undo-user")))) == (1, 1)
    view.close()
    other = Simulator(k8s_sim_session, "after-undo")
    try:
        assert k8s_sim_session.call(lambda srv: (srv.faults.describe(),
                                                 srv.rbac.rules("undo-user"))) == ([], [])
        deadline = time.monotonic() + 5
        while other.get("v1", "Namespace", "undo-me", namespace="") is not None:
            assert time.monotonic() < deadline, "the namespace stayed"
            await asyncio.sleep(0.02)
        assert other.get("v1", "ConfigMap", "held", namespace="undo-me") is None
    finally:
        other.close()


@pytest.mark.k8s_sim(garbage_collector=False)
async def test_the_marker_gives_a_test_a_server_of_its_own(
        k8s_sim: Simulator, k8s_sim_session: ServerThread) -> None:
    assert k8s_sim.thread is not k8s_sim_session and k8s_sim.url != k8s_sim_session.url
    assert k8s_sim.call(lambda srv: srv.registry.gc) is None
    assert k8s_sim_session.call(lambda srv: srv.registry.gc) is not None


# ---- faults by name ---------------------------------------------------------------------


async def test_an_outage_refuses_connections_until_it_ends(k8s_sim: Simulator) -> None:
    async with k8s_sim.client() as client:
        cms = client.api("configmaps")
        await cms.create(configmap("before"))
        with k8s_sim.outage() as outage:
            with pytest.raises(wk.ConnectionFailed):
                await cms.get("before")
            assert repr(outage) == "<Injected outage>"
        assert (await cms.get("before"))["metadata"]["name"] == "before"


async def test_hung_requests_time_out_and_are_let_go(k8s_sim: Simulator) -> None:
    client = wk.Client(k8s_sim.client_config(), timeouts=wk.Timeouts(request=0.3))
    async with client:
        cms = client.api("configmaps")
        with k8s_sim.hang(method="GET", watch=False) as hang:
            started = time.monotonic()
            with pytest.raises(wk.Timeout):
                await cms.list()
            assert 0.25 < time.monotonic() - started < 5
            assert hang.fired == 1
        assert (await cms.list()).items == []


async def test_server_errors_and_throttling_are_what_a_client_sees(
        k8s_sim: Simulator, k8s_client: wk.Client) -> None:
    cms = k8s_client.api("configmaps")
    with k8s_sim.server_error(503, count=1):
        with pytest.raises(wk.ServerError) as err:
            await cms.list()
        assert err.value.code == 503
    with k8s_sim.throttle(retry_after=2, method="POST") as throttled:
        await cms.list()  # only POSTs are throttled
        with pytest.raises(wk.TooManyRequests) as tmr:
            await cms.create(configmap("x"))
        assert tmr.value.retry_after == 2 and throttled.fired == 1
    await cms.create(configmap("x"))


async def test_an_expired_history_makes_a_resumed_watch_gone(
        k8s_sim: Simulator, k8s_client: wk.Client) -> None:
    cms = k8s_client.api("configmaps")
    old = (await cms.list()).resource_version
    await cms.create(configmap("newer"))
    k8s_sim.expire_history()
    with pytest.raises(wk.Gone):
        async with cms.watch(resource_version=old) as stream:
            async for _ in stream:
                pass


async def test_revoking_a_grant_forbids_what_it_allowed(k8s_sim: Simulator) -> None:
    k8s_sim.add_user("reader")
    k8s_sim.grant("reader", verbs=["list", "get"], resources=["configmaps"])
    k8s_sim.grant("reader", verbs=["list"], resources=["secrets"])
    async with k8s_sim.client("reader") as client:
        await client.api("configmaps").list()
        k8s_sim.revoke("reader", resources="configmaps")
        with pytest.raises(wk.Forbidden):
            await client.api("configmaps").list()
        await client.api("secrets").list()  # the other grant stays
        k8s_sim.revoke("reader")
        with pytest.raises(wk.Forbidden):
            await client.api("secrets").list()


# ---- CRDs ---------------------------------------------------------------------------------


async def test_crds_install_from_yaml_files_established(
        k8s_crds: Any, k8s_client: wk.Client, tmp_path: Path) -> None:
    import yaml

    both = tmp_path / "crds.yaml"
    both.write_text(yaml.safe_dump_all([crd("gizmos", "Gizmo"), crd("gadgets", "Gadget")]))
    names = await k8s_crds(both)
    assert names == ["gizmos.plugin.example.com", "gadgets.plugin.example.com"]
    gizmos = k8s_client.api("gizmos.plugin.example.com")
    await gizmos.create({"apiVersion": "plugin.example.com/v1", "kind": "Gizmo",
                         "metadata": {"name": "g"}, "spec": {"size": 3}})
    # installed again (the next test's call on a shared server), and then changed
    assert await k8s_crds(both) == names
    await k8s_crds(crd("gizmos", "Gizmo", versions=("v1", "v2")))
    await k8s_client.api("gizmos.v2.plugin.example.com").get("g")


def test_only_crds_are_installed(tmp_path: Path) -> None:
    other = tmp_path / "other.yaml"
    other.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    with pytest.raises(ValueError, match=r"other\.yaml: expected CustomResourceDefinition "
                                         r"documents, found ConfigMap"):
        load_crds(other)


# ---- waiting --------------------------------------------------------------------------------


async def test_wait_for_returns_on_the_change_and_says_what_it_saw_on_timeout(
        k8s_client: wk.Client, k8s_wait_for: Waiter) -> None:
    cms = k8s_client.api("configmaps")

    async def later() -> None:
        await asyncio.sleep(0.1)
        await cms.create(configmap("c", state="new"))
        await asyncio.sleep(0.1)
        await cms.patch("c", {"data": {"state": "done"}})

    writer = asyncio.ensure_future(later())
    started = time.monotonic()
    obj = await k8s_wait_for(cms, "c", lambda o: o["data"]["state"] == "done")
    assert obj["data"] == {"state": "done"} and time.monotonic() - started < 2
    await writer

    def finished(o: dict[str, Any]) -> bool:
        return bool(o["status"]["phase"] == "Finished")  # a ConfigMap has no status

    with pytest.raises(WaitTimeout) as err:
        await k8s_wait_for(cms, "c", finished, timeout=0.3)
    text = str(err.value)
    assert f"configmaps {k8s_client.default_namespace}/c: finished not true after 0.3 s" in text
    assert "last seen: metadata" in text and "finished last raised KeyError" in text
    assert "done" not in text  # data is never quoted, only metadata and status

    await cms.delete("c")
    await k8s_wait_for.deletion(cms, "c", timeout=5)


async def test_wait_for_rides_out_an_outage(k8s_sim: Simulator, k8s_client: wk.Client,
                                            k8s_wait_for: Waiter) -> None:
    cms = k8s_client.api("configmaps")
    outage = k8s_sim.outage()
    loop = asyncio.get_running_loop()
    loop.call_later(0.3, outage.end)
    loop.call_later(0.4, lambda: k8s_sim.create(configmap("after-outage")))
    await k8s_wait_for(cms, "after-outage", timeout=10)


# ---- operators ------------------------------------------------------------------------------


def mirror(client: wk.Client, namespace: str, **config: Any) -> wk.Operator:
    """Each ConfigMap ``x`` gets a copy ``x-copy`` (not of copies)."""
    cms = client.api("configmaps", namespace=namespace)

    async def reconcile(obj: dict[str, Any], _ctx: Any) -> wk.Action:
        name = obj["metadata"]["name"]
        if not name.endswith("-copy"):
            await cms.patch(f"{name}-copy", {**configmap(f"{name}-copy"),
                                             "data": obj.get("data") or {}},
                            type="apply", field_manager="mirror", force=True)
        return wk.Action.await_change()

    return wk.Operator(wk.Controller(cms, config=wk.ControllerConfig(**config)), reconcile)


async def test_an_operator_runs_until_the_end_of_the_test(
        k8s_operator: Start, k8s_client: wk.Client, k8s_namespace: str,
        k8s_wait_for: Waiter) -> None:
    op = await k8s_operator(lambda client: mirror(client, k8s_namespace))
    cms = k8s_client.api("configmaps")
    await cms.create(configmap("a", v="1"))
    copy = await k8s_wait_for(cms, "a-copy")
    assert copy["data"] == {"v": "1"} and not op.done and op.failure is None


async def test_a_dying_operator_ends_the_wait_with_its_error(
        k8s_sim: Simulator, k8s_operator: Start, k8s_client: wk.Client, k8s_namespace: str,
        k8s_wait_for: Waiter) -> None:
    """An outage longer than the controller's max_unhealthy ends its run with
    ControllerUnhealthy: the wait fails with that at once, not after its own timeout."""
    op = await k8s_operator(lambda client: mirror(client, k8s_namespace, max_unhealthy=0.5))
    await k8s_wait_for(k8s_client.api("namespaces"), k8s_namespace)
    k8s_sim.outage()
    started = time.monotonic()
    with pytest.raises(OperatorFailed, match="ControllerUnhealthy") as failed:
        await k8s_wait_for(k8s_client.api("configmaps"), "never", timeout=30)
    assert time.monotonic() - started < 10
    assert isinstance(failed.value.__cause__, wk.ControllerUnhealthy)
    assert op.reported  # so the end of the test does not report it again
    k8s_sim.clear_faults()


async def test_a_kubeconfig_for_the_tests_namespace_and_the_request_log(
        k8s_sim: Simulator, k8s_namespace: str, tmp_path: Path) -> None:
    since = time.monotonic()
    path = k8s_sim.kubeconfig(tmp_path / "kubeconfig")
    config = wk.ClientConfig.from_kubeconfig(path)
    assert config.namespace == k8s_namespace and config.server == k8s_sim.url
    async with wk.Client(config) as client:
        await client.api("configmaps").list()
    prefix = f"/api/v1/namespaces/{k8s_namespace}/configmaps"
    assert k8s_sim.count("GET", path_prefix=prefix, since=since) == 1
