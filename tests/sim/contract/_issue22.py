"""The issue 22 reference files (tests/fixtures/apiserver-1.28-issue22): loading, the
simulator set up like the capture, and the normalisation the comparisons need."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

from watchkeeper_sim import ApiServer

from .test_contract import norm, replay

REF22 = Path(__file__).resolve().parents[2] / "fixtures" / "apiserver-1.28-issue22"
CURL = "curl/7.88.1"
GROUP = "cases.example.com"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

World = tuple[ApiServer, aiohttp.ClientSession]


def load22(number: int) -> dict[str, Any]:
    (path,) = REF22.glob(f"{number:03d}-*.json")
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def want(number: int) -> Any:
    """The response body (or watch lines) of a reference file."""
    response = load22(number)["response"]
    return response.get("lines", response.get("body"))


def norm22(text: str) -> str:
    """``norm`` plus Go pointer addresses, which differ on every request."""
    return norm(re.sub(r"0xc[0-9a-f]+", "0xPTR", text))


def conditions(obj: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    return [(c["type"], c["status"], c.get("reason", ""), c.get("message", ""))
            for c in (obj.get("status") or {}).get("conditions") or []]


async def world(*namespaces: str, **options: Any) -> AsyncIterator[World]:
    """A simulator with the capture's namespaces, spoken to as curl (pretty JSON)."""
    async with ApiServer(**options) as srv, \
            aiohttp.ClientSession(headers={"User-Agent": CURL}) as session:
        for ns in namespaces:
            srv.create_object({"apiVersion": "v1", "kind": "Namespace",
                               "metadata": {"name": ns}})
        yield srv, session


async def send(srv: ApiServer, session: aiohttp.ClientSession, number: int,
               **override: Any) -> tuple[int, Any, Any]:
    """Replay reference file ``number`` against the simulator."""
    return await replay(srv, session, load22(number), **override)


def crd(plural: str, kind: str, properties: dict[str, Any], status: bool = False
        ) -> dict[str, Any]:
    """The CRDs scripts/capture_issue22.py made."""
    version: dict[str, Any] = {"name": "v1", "served": True, "storage": True, "schema": {
        "openAPIV3Schema": {"type": "object", "properties": properties}}}
    if status:
        version["subresources"] = {"status": {}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Namespaced", "versions": [version],
                     "names": {"plural": plural, "singular": kind.lower(), "kind": kind}}}
