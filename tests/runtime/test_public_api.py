"""One public API (issue 12 item 7): one object key ordered (namespace, name) everywhere,
no signature that takes both positionally in another order, one constructor for each
thing, and a ``ClientConfig`` built without private imports."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

import watchkeeper as wk
from watchkeeper.client.objects import KeyFields, RawEvent, key_fields
from watchkeeper.controller.controller import owner_mapper
from watchkeeper_sim import ApiServer


def cm(name: str, ns: str | None = "default", rv: str = "1") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "resourceVersion": rv}
    if ns is not None:
        meta["namespace"] = ns
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


# -- one key: ObjectRef(namespace, name) --------------------------------------------------


def test_object_ref_is_namespace_then_name_and_prints_like_kubectl() -> None:
    ref = wk.ObjectRef("ns", "x")
    assert (ref.namespace, ref.name) == ("ns", "x")
    assert ref == wk.ObjectRef(namespace="ns", name="x") == ("ns", "x")
    assert str(ref) == "ns/x" and str(wk.ObjectRef(None, "node-1")) == "node-1"
    assert hash(ref) == hash(("ns", "x"))  # a plain (namespace, name) tuple finds it


def test_meta_key_is_an_object_ref_and_the_stream_key_has_the_same_order() -> None:
    obj = cm("x", "ns")
    key = wk.meta.key(obj)
    assert isinstance(key, wk.ObjectRef) and key == wk.ObjectRef(namespace="ns", name="x")
    assert wk.meta.key(cm("node-1", None)) == wk.ObjectRef(None, "node-1")
    # the watch stream's key fields: namespace, name, resourceVersion, in that order
    assert KeyFields.__struct_fields__ == ("namespace", "name", "resourceVersion")
    assert msgspec.structs.astuple(key_fields(obj)) == ("ns", "x", "1")
    ev = RawEvent("ADDED", key=KeyFields("ns", "x", "7"), line=b"{}")
    assert (ev.namespace, ev.name, ev.resource_version) == ("ns", "x", "7")


def test_refs_sort_by_namespace_first() -> None:
    refs = [wk.ObjectRef("b", "a"), wk.ObjectRef("a", "z"), wk.ObjectRef("a", "b")]
    assert [str(r) for r in sorted(refs)] == ["a/b", "a/z", "b/a"]


def test_a_controller_request_finds_its_object_in_the_store() -> None:
    """The controller's refs (from an owner mapper) and the store's keys are one type, so
    a request is looked up without converting anything."""
    store, writer = wk.Store.new()
    owner = {**cm("owner", "ns"), "metadata": {"name": "owner", "namespace": "ns", "uid": "u"}}
    writer.apply(wk.Apply(owner))
    child = cm("child", "ns")
    child["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": "u"}]
    [ref] = owner_mapper(wk.Resource("", "v1", "ConfigMap", "configmaps"))(child)
    assert ref == wk.ObjectRef(namespace="ns", name="owner") and ref in store
    assert store.keys() == [ref] and isinstance(store.keys()[0], wk.ObjectRef)
    assert store.get(ref.name, namespace=ref.namespace) is owner


def _public_callables() -> Iterator[tuple[str, Callable[..., Any]]]:
    """Every public function and method reachable from ``wk`` (and the simulator's
    ``ApiServer``, which tests use the same way)."""
    owners: list[tuple[str, Any]] = [(n, getattr(wk, n)) for n in wk.__all__]
    owners += [(f"meta.{n}", getattr(wk.meta, n)) for n in dir(wk.meta) if not n.startswith("_")]
    owners.append(("watchkeeper_sim.ApiServer", ApiServer))
    for label, obj in owners:
        if inspect.isclass(obj):
            for attr, member in inspect.getmembers(obj):
                if (not attr.startswith("_") or attr == "__init__") and callable(member):
                    yield f"{label}.{attr}", member
        elif callable(obj):
            yield label, obj


def order_problems(fns: Iterator[tuple[str, Callable[..., Any]]]) -> list[str]:
    """Signatures taking both ``name`` and ``namespace`` where the namespace can be passed
    positionally after the name: the (name, namespace) order this API does not use."""
    bad = []
    for label, fn in fns:
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            continue
        if "name" in params and "namespace" in params:
            names = list(params)
            ns = params["namespace"]
            if ns.kind is not ns.KEYWORD_ONLY and names.index("namespace") > names.index("name"):
                bad.append(label)
    return bad


def test_no_public_signature_takes_name_then_namespace_positionally() -> None:
    """Values are (namespace, name); a call names the object first and the namespace by
    keyword (``api.get("x", namespace="ns")``, ``store.get("x", namespace="ns")``), so a
    swapped pair is a TypeError, never a silent miss."""
    checked = list(_public_callables())
    labels = {label for label, _ in checked}
    assert {"Store.get", "Api.get", "Api.delete", "watchkeeper_sim.ApiServer.get_object"} <= labels
    assert order_problems(iter(checked)) == []


def test_the_order_check_can_fail() -> None:
    def old_store_get(name: str, namespace: str | None = None) -> None: ...
    def fine(namespace: str | None, name: str) -> None: ...
    def keyword(name: str, *, namespace: str | None = None) -> None: ...

    assert order_problems(iter([("old", old_store_get), ("ok", fine), ("kw", keyword)])) == [
        "old"]


def test_store_get_refuses_a_positional_namespace() -> None:
    store, writer = wk.Store.new()
    writer.apply(wk.Apply(cm("a", "default")))
    assert store.get("a", namespace="default") is not None
    with pytest.raises(TypeError):
        store.get("a", "default")  # type: ignore[misc]


def test_docs_state_the_order_rule() -> None:
    guide = (Path(__file__).resolve().parents[2] / "docs" / "guide.md").read_text()
    assert "(namespace, name)" in guide and 'namespace="ns"' in guide


# -- one constructor each: wk.watcher(...), wk.Store.new() ---------------------------------


async def test_watcher_is_made_by_the_function_and_the_class_call_is_deprecated() -> None:
    async with wk.Client(wk.ClientConfig(server="http://127.0.0.1:9")) as client:
        api = client.api("configmaps", namespace="default")
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the documented way warns about nothing
            w = wk.watcher(api, wk.WatchConfig(page_size=7), resource_version="5")
        assert isinstance(w, wk.Watcher) and w.config.page_size == 7
        assert w.resource_version == "5" and w.health.resource == "configmaps in default"
        with pytest.warns(DeprecationWarning, match=r"use watcher\(\.\.\.\)"):
            old = wk.Watcher(api, wk.WatchConfig(page_size=7))
        assert old.config.page_size == 7 and old.api is api  # still works meanwhile


def test_store_is_made_by_new_and_the_bare_class_call_is_deprecated() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        store, writer = wk.Store.new()
    assert writer.store is store and len(store) == 0 and not store.ready
    with pytest.warns(DeprecationWarning, match=r"Store\.new\(\)"):
        bare = wk.Store()
    writer = wk.Writer(bare)
    writer.apply(wk.Apply(cm("a")))
    assert bare.get("a", namespace="default") is not None  # still works meanwhile


# -- ClientConfig from the public API alone --------------------------------------------------


async def test_client_config_from_kubeconfig_reaches_the_server(tmp_path: Path) -> None:
    async with ApiServer() as srv:
        path = srv.kubeconfig(tmp_path / "sim.kubeconfig")
        srv.create_object(cm("seen"))
        for config in (wk.ClientConfig.from_kubeconfig(path),
                       wk.ClientConfig.from_kubeconfig(Path(path), context="watchkeeper-sim"),
                       wk.ClientConfig.from_kubeconfig([path]),
                       wk.ClientConfig.from_env(path)):
            assert config.server == srv.url and config.context == "watchkeeper-sim"
            async with wk.Client(config) as client:
                got = await client.api("configmaps", namespace="default").get("seen")
                assert wk.meta.key(got) == wk.ObjectRef("default", "seen")
        with pytest.raises(wk.ConfigError, match="context 'nope' is not defined"):
            wk.ClientConfig.from_kubeconfig(path, context="nope")


def test_client_config_default_kubeconfig_and_in_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    with pytest.raises(wk.ConfigError, match="not running in a cluster"):
        wk.ClientConfig.in_cluster()
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "contexts: [{name: c, context: {cluster: k, namespace: team}}]\n")
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    for config in (wk.ClientConfig.from_kubeconfig(), wk.ClientConfig.from_env()):
        assert (config.server, config.namespace, config.context) == (
            "http://127.0.0.1:9", "team", "c")
