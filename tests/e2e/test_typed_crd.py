"""A custom resource written as Python classes (examples/website.py), on a real API server:
the CRD ``watchkeeper crd`` prints is accepted by ``kubectl apply``, ``wk.install_crds``
applies the same spec (the CRD's generation stays 1) and again without a write, and objects
made with kubectl are defaulted and rejected exactly as the classes declare
(website_cases.py, also run against the simulator), including the CEL rules' messages.

Each run uses its own API group and namespace (``typed-<random>``): CRDs are cluster-wide
and a deleted one lingers while its objects are cleaned up."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import watchkeeper as wk
from runtime.typed.website import Website, in_group

from .conftest import CONTEXT, KUBECONFIG, LABELS, on_simulator
from .website_cases import CASES, DOMAIN_IMMUTABLE, Case, website

TESTS = Path(__file__).resolve().parents[1]
KUBECTL = os.environ.get("WATCHKEEPER_KUBECTL", "kubectl")

pytestmark = pytest.mark.skipif(shutil.which(KUBECTL) is None, reason="needs kubectl")

SITE_MODULE = """\
import sys
sys.path.insert(0, {tests!r})
from runtime.typed.website import Website, in_group

Site = in_group(Website, {group!r})
"""


async def run(*argv: str, stdin: str | None = None, timeout: float = 120,
              env: dict[str, str] | None = None) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})})
    out, err = await asyncio.wait_for(
        proc.communicate(stdin.encode() if stdin is not None else None), timeout)
    return proc.returncode or 0, out.decode(), err.decode()


async def kubectl(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    """kubectl on the suite's cluster (KUBECONFIG may name several files, merged)."""
    assert KUBECONFIG
    context = ["--context", CONTEXT] if CONTEXT else []
    return await run(KUBECTL, *context, *args, stdin=stdin, env={"KUBECONFIG": KUBECONFIG})


async def kubectl_ok(*args: str, stdin: str | None = None) -> str:
    rc, out, err = await kubectl(*args, stdin=stdin)
    assert rc == 0, f"kubectl {' '.join(args)} failed ({rc}): {err}{out}"
    return out


def printed_causes(stderr: str) -> list[str]:
    """The causes of kubectl's ``The Website "x" is invalid: ...`` (one, or a ``*`` list)."""
    _, _, rest = stderr.partition(" is invalid: ")
    if rest.startswith("\n"):
        return [line[2:] for line in rest.splitlines() if line.startswith("* ")]
    return [rest.strip()]


@pytest.fixture
async def site() -> AsyncIterator[tuple[str, str]]:
    """(group, namespace) of this run; the CRDs of the group and the namespace go after."""
    suffix = uuid.uuid4().hex[:6]
    group, namespace = f"typed-{suffix}.example.com", f"typed-{suffix}"
    label = ",".join(f"{k}={v}" for k, v in LABELS.items())
    try:
        await kubectl_ok("create", "namespace", namespace)
        await kubectl_ok("label", "namespace", namespace, label)
        yield group, namespace
    finally:
        with contextlib.suppress(AssertionError):
            await kubectl_ok("delete", "namespace", namespace, "--wait=false",
                             "--ignore-not-found")
        for plural in ("websites", "gizmos"):
            with contextlib.suppress(AssertionError):
                await kubectl_ok("delete", "crd", f"{plural}.{group}", "--wait=false",
                                 "--ignore-not-found")


async def test_the_generated_crd_is_accepted_and_enforced(
    client: wk.Client, site: tuple[str, str], tmp_path: Path
) -> None:
    group, namespace = site
    crd_name = f"websites.{group}"
    module = tmp_path / f"site_{group.split('.')[0].replace('-', '_')}.py"
    module.write_text(SITE_MODULE.format(tests=str(TESTS), group=group))

    # 1. `watchkeeper crd` | kubectl apply: accepted, established
    code, manifest, err = await run(sys.executable, "-m", "watchkeeper.cli", "crd",
                                    f"{module}:Site")
    assert code == 0, err
    out = await kubectl_ok("apply", "-f", "-", stdin=manifest)
    assert f"customresourcedefinition.apiextensions.k8s.io/{crd_name} created" in out
    label = ",".join(f"{k}={v}" for k, v in LABELS.items())
    await kubectl_ok("label", "crd", crd_name, label)
    await kubectl_ok("wait", "--for", "condition=established", f"crd/{crd_name}",
                     "--timeout=120s")

    # 2. install_crds: the same spec (no new generation), idempotent (no write at all)
    Site = in_group(Website, group)  # what the module the command loaded holds
    [installed] = await wk.install_crds(client, Site, timeout=120)
    assert installed["metadata"]["generation"] == 1
    [again] = await wk.install_crds(client, Site, timeout=120)
    assert again["metadata"]["resourceVersion"] == installed["metadata"]["resourceVersion"]
    assert {c["type"]: c["status"] for c in again["status"]["conditions"]} == {
        "NamesAccepted": "True", "Established": "True"}
    served = again["spec"]["versions"][0]
    assert served["schema"]["openAPIV3Schema"] == wk.crd(Site)["spec"]["versions"][0][
        "schema"]["openAPIV3Schema"]  # nothing pruned: every keyword is one the server keeps

    # 3. objects made with kubectl: defaulted and rejected as declared
    simulator = await on_simulator(client)
    wrong: dict[str, Any] = {}
    for case in CASES:
        if simulator and case.sim_gap:
            continue
        obj = website(group, case, namespace)
        code, out, err = await kubectl("create", "-o", "json", "-f", "-", stdin=json.dumps(obj))
        if case.causes is None:
            got = json.loads(out)["spec"] if code == 0 else err
            if got != case.stored:
                wrong[case.name] = got
        elif code == 0 or printed_causes(err) != case.causes:
            wrong[case.name] = out if code == 0 else printed_causes(err)
    assert wrong == {}, json.dumps(wrong, indent=1)

    # a transition rule: the domain, once set, stays
    explicit: Case = CASES[1]
    code, _, err = await kubectl("patch", f"websites.{group}", explicit.name, "-n", namespace,
                                 "--type=merge", "-p", '{"spec":{"domain":"other.example.com"}}')
    assert code != 0 and printed_causes(err) == [DOMAIN_IMMUTABLE], err

    # 4. printer columns, short name, category, scale and status subresources, explain
    table = (await kubectl_ok("get", f"websites.{group}", "-n", namespace)).splitlines()
    assert table[0].split() == ["NAME", "IMAGE", "REPLICAS", "READY", "AGE"]
    assert table[1].split()[:3] == ["defaults", "nginx:1.25", "1"]
    wide = (await kubectl_ok("get", f"websites.{group}", "-n", namespace, "-o", "wide"))
    assert wide.splitlines()[0].split() == ["NAME", "IMAGE", "REPLICAS", "TIER", "READY", "AGE"]
    await kubectl_ok("scale", f"websites.{group}/defaults", "-n", namespace, "--replicas=3")
    await kubectl_ok("patch", f"websites.{group}", "defaults", "-n", namespace,
                     "--subresource=status", "--type=merge", "-p", json.dumps({"status": {
                         "replicas": 3, "selector": "app=defaults", "conditions": [{
                             "type": "Ready", "status": "True", "reason": "Serving",
                             "lastTransitionTime": "2024-01-01T00:00:00Z"}]}}))
    scale = json.loads(await kubectl_ok(
        "get", "--raw", f"/apis/{group}/v1/namespaces/{namespace}/websites/defaults/scale"))
    assert (scale["spec"], scale["status"]) == ({"replicas": 3},
                                                {"replicas": 3, "selector": "app=defaults"})
    row = (await kubectl_ok("get", f"websites.{group}", "defaults", "-n", namespace,
                            "--no-headers")).split()
    # the Ready column is a JSONPath filter ([?(@.type=="Ready")]): on both servers
    assert row[:4] == ["defaults", "nginx:1.25", "3", "True"]
    status = json.loads(await kubectl_ok("get", f"websites.{group}", "defaults", "-n",
                                         namespace, "-o", "json"))["status"]
    assert status["conditions"][0]["message"] == ""  # the Condition's default
    names = (await kubectl_ok("get", "web", "-n", namespace, "-o", "name")).split()
    assert f"website.{group}/defaults" in names  # the category (short names are per group)
    if not simulator:  # its OpenAPI documents do not carry a CRD's schema
        explain = await kubectl_ok("explain", f"websites.{group}.spec.replicas")
        assert "How many pods serve the site." in explain
        explain = await kubectl_ok("explain", f"websites.{group}")
        assert "A static website served by a pool of web server pods." in explain


class GizmoSpec(wk.Schema):
    size: int = 1


async def test_a_name_conflict_is_reported_not_waited_for(
    client: wk.Client, site: tuple[str, str]
) -> None:
    """A second CRD of the group claims the Website's short name: the API server refuses
    its names, and install_crds says so at once."""
    group, _ = site
    await wk.install_crds(client, in_group(Website, group), timeout=120)

    @wk.custom_resource(group=group, version="v1", short_names=["ws"])
    class Gizmo(wk.CustomResource):
        spec: GizmoSpec

    name = f"gizmos.{group}"
    await kubectl_ok("apply", "-f", "-", stdin=json.dumps(wk.crd(Gizmo)))
    verdict = {"reason": "ShortNamesConflict", "message": '"ws" is already in use'}
    if await on_simulator(client):  # it has no naming controller: write its verdict
        conditions = [{"type": "NamesAccepted", "status": "False", **verdict},
                      {"type": "Established", "status": "False", "reason": "NotAccepted",
                       "message": "not all names are accepted"}]
        await kubectl_ok("patch", "crd", name, "--subresource=status", "--type=merge", "-p",
                         json.dumps({"status": {"conditions": [
                             {**c, "lastTransitionTime": "2024-01-01T00:00:00Z"}
                             for c in conditions]}}))
    loop = asyncio.get_running_loop()
    start = loop.time()
    with pytest.raises(wk.CRDNotEstablished) as err:
        await wk.install_crds(client, Gizmo, timeout=120)
    assert loop.time() - start < 30  # the naming controller's verdict, not the timeout
    assert (err.value.name, err.value.reason, err.value.message) == (
        name, verdict["reason"], verdict["message"])
