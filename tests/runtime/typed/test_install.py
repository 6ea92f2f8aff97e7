"""``wk.install_crds`` against the simulator: server-side apply, a bounded wait for
Established, a name conflict reported at once (the naming controller's verdict is set on
the CRD's status here, as kube-apiserver's own controller would)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import watchkeeper as wk
from watchkeeper_sim import ApiServer

from .website import Website

CRD_API = "apiextensions.k8s.io/v1"
NAME = "websites.example.com"


class Spec(wk.Schema):
    size: int = 1


@wk.custom_resource(group="example.com", version="v1", short_names=["gz"])
class Gizmo(wk.CustomResource):
    spec: Spec


def set_conditions(srv: ApiServer, name: str, **conditions: tuple[str, str, str]) -> None:
    """What the apiextensions controllers would write: ``type=(status, reason, message)``."""
    crd = srv.get_object(CRD_API, "CustomResourceDefinition", name, namespace="")
    crd["status"]["conditions"] = [
        {"type": t, "status": s, "reason": r, "message": m,
         "lastTransitionTime": "2024-01-01T00:00:00Z"} for t, (s, r, m) in conditions.items()]
    srv.update_object(crd, subresource="status")


async def test_several_resources_and_an_edited_manifest(apiserver: ApiServer) -> None:
    manifest = wk.crd(Website)
    manifest["metadata"]["labels"] = {"team": "web"}  # a manifest dict installs as it is
    async with apiserver.client() as client:
        got = await wk.install_crds(client, manifest, Gizmo, field_manager="my-operator")
        assert [c["metadata"]["name"] for c in got] == ["gizmos.example.com", NAME]
        assert got[1]["metadata"]["labels"] == {"team": "web"}
        for crd in got:
            managers = {m["manager"] for m in crd["metadata"]["managedFields"]}
            assert "my-operator" in managers
        # both are served
        await client.api("gizmos.example.com", namespace="default").create(
            {"apiVersion": "example.com/v1", "kind": "Gizmo", "metadata": {"name": "g"},
             "spec": {}})
        assert (await client.api("ws").resource()).kind == "Website"


@pytest.mark.looptime
async def test_a_name_conflict_is_an_error_at_once(apiserver: ApiServer) -> None:
    apiserver.create_object(wk.crd(Website))
    set_conditions(apiserver, NAME,
                   NamesAccepted=("False", "ShortNamesConflict", '"ws" is already in use'),
                   Established=("False", "NotAccepted", "not all names are accepted"))
    loop = asyncio.get_running_loop()
    async with apiserver.client() as client:
        start = loop.time()
        with pytest.raises(wk.CRDNotEstablished) as err:
            await wk.install_crds(client, Website, timeout=60)
    assert loop.time() - start < 1  # not the timeout
    assert (err.value.name, err.value.reason, err.value.message) == (
        NAME, "ShortNamesConflict", '"ws" is already in use')
    assert str(err.value) == (
        'CustomResourceDefinition websites.example.com is not established: ShortNamesConflict: '
        '"ws" is already in use; another CRD of the same group holds that name (kubectl get crd)')


@pytest.mark.looptime
async def test_a_refusal_in_the_apply_answer_is_about_the_old_spec(apiserver: ApiServer) -> None:
    """The apply fixes the conflict; its answer still carries the old verdict until the
    naming controller runs: that is not an error, the next read decides."""
    apiserver.create_object(wk.crd(Website))
    set_conditions(apiserver, NAME,
                   NamesAccepted=("False", "ShortNamesConflict", '"ws" is already in use'),
                   Established=("False", "NotAccepted", "not all names are accepted"))

    async def naming_controller() -> None:
        await asyncio.sleep(0.01)
        set_conditions(apiserver, NAME, NamesAccepted=("True", "NoConflicts", ""),
                       Established=("True", "InitialNamesAccepted", ""))

    async with apiserver.client() as client:
        fixer = asyncio.create_task(naming_controller())
        [crd] = await wk.install_crds(client, Website, timeout=60)
        await fixer
    assert {c["type"]: c["status"] for c in crd["status"]["conditions"]} == {
        "NamesAccepted": "True", "Established": "True"}


@pytest.mark.looptime
async def test_the_wait_is_bounded_and_gentle(apiserver: ApiServer) -> None:
    apiserver.create_object(wk.crd(Website))
    set_conditions(apiserver, NAME, NamesAccepted=("True", "NoConflicts", ""),
                   Established=("False", "Installing", "the CRD is being installed"))
    loop = asyncio.get_running_loop()
    async with apiserver.client() as client:
        gets = apiserver.count("GET")
        start = loop.time()
        with pytest.raises(wk.CRDNotEstablished, match=r"websites.example.com is not "
                           r"established: Timeout: not Established within 10 s") as err:
            await wk.install_crds(client, Website, timeout=10)
        assert 10 <= loop.time() - start < 10.5
        polls = apiserver.count("GET") - gets
    assert err.value.reason == "Timeout"
    assert 8 <= polls <= 16, polls  # 0.05 s doubling to 1 s: not a hot loop


@pytest.mark.looptime
async def test_names_the_server_has_not_accepted_yet_are_waited_for(
    apiserver: ApiServer,
) -> None:
    """Established from before, but the accepted names are still the old ones (an update
    that adds a short name): ready only once they match."""
    apiserver.create_object(wk.crd(Website))
    crd = apiserver.get_object(CRD_API, "CustomResourceDefinition", NAME, namespace="")
    crd["status"]["acceptedNames"] = {**crd["status"]["acceptedNames"], "shortNames": []}
    apiserver.update_object(crd, subresource="status")

    async def naming_controller() -> None:
        await asyncio.sleep(0.5)
        live: dict[str, Any] = apiserver.get_object(CRD_API, "CustomResourceDefinition", NAME,
                                                    namespace="")
        live["status"]["acceptedNames"] = live["spec"]["names"]
        apiserver.update_object(live, subresource="status")

    loop = asyncio.get_running_loop()
    async with apiserver.client() as client:
        fixer = asyncio.create_task(naming_controller())
        start = loop.time()
        [got] = await wk.install_crds(client, Website, timeout=60)
        await fixer
    assert loop.time() - start >= 0.5
    assert got["status"]["acceptedNames"]["shortNames"] == ["ws"]
