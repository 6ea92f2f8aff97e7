"""Install CRDs: server-side apply, then wait until the API server serves them.

Applying is idempotent (the same manifest again changes nothing, not even the
resourceVersion). A CRD is ready when ``Established`` is True and the names the server
accepted are the ones asked for; ``NamesAccepted`` False (another CRD of the group holds a
name) is an error at once, not a wait."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from watchkeeper.client import Api, Client
from watchkeeper.typed.crd import crds
from watchkeeper.typed.errors import CRDNotEstablished, SchemaError
from watchkeeper.typed.models import CustomResource

__all__ = ["install_crds"]

JSON = dict[str, Any]

CRDS = "customresourcedefinitions.apiextensions.k8s.io"
POLL_FIRST, POLL_MAX = 0.05, 1.0


async def install_crds(
    client: Client,
    *resources: type[CustomResource] | Mapping[str, Any],
    field_manager: str = "watchkeeper",
    timeout: float = 60.0,
) -> list[JSON]:
    """Apply the CRDs of ``resources`` (resource classes, versions of one resource merged,
    or CRD manifests such as ``wk.crd(...)`` returns) with server-side apply as
    ``field_manager``, forcing ownership of the fields it sets, and wait up to ``timeout``
    seconds for each to be Established with its names accepted. Returns the CRDs as the
    server has them. Raises ``CRDNotEstablished`` on a name conflict or the timeout."""
    classes = [r for r in resources if isinstance(r, type)]
    manifests = crds(*classes) + [dict(m) for m in resources if not isinstance(m, type)]
    api = client.api(CRDS)
    latest: dict[str, JSON] = {}
    for manifest in manifests:
        name = (manifest.get("metadata") or {}).get("name")
        if not name:
            raise SchemaError("a CRD manifest needs metadata.name (plural.group)")
        latest[name] = await api.patch(name, manifest, type="apply",
                                       field_manager=field_manager, force=True)
    try:
        async with asyncio.timeout(timeout):
            for name in latest:
                await _established(api, name, latest)
    except TimeoutError:
        pending = [n for n, c in latest.items() if _state(c)[0] is not True]
        raise CRDNotEstablished(", ".join(pending), "Timeout",
                                f"not Established within {timeout:g} s") from None
    return list(latest.values())


def _condition(crd: JSON, kind: str) -> JSON:
    for cond in (crd.get("status") or {}).get("conditions") or ():
        if isinstance(cond, dict) and cond.get("type") == kind:
            return cond
    return {}


def _names_match(crd: JSON) -> bool:
    """The server accepted every name asked for (a CRD's update may change names)."""
    want = (crd.get("spec") or {}).get("names") or {}
    got = (crd.get("status") or {}).get("acceptedNames") or {}
    return all(got.get(k) == want[k] for k in ("kind", "plural")) and all(
        sorted(got.get(k) or ()) == sorted(want.get(k) or ())
        for k in ("shortNames", "categories"))


def _state(crd: JSON) -> tuple[bool | None, JSON]:
    """True: served as asked; False: refused (the condition says why); None: not yet."""
    names = _condition(crd, "NamesAccepted")
    if names.get("status") == "False":
        return False, names
    if _condition(crd, "Established").get("status") == "True" and _names_match(crd):
        return True, {}
    return None, {}


async def _established(api: Api, name: str, latest: dict[str, JSON]) -> None:
    """Poll ``name`` until it is served (``latest`` keeps what was last read). A refusal in
    the apply's own answer may be about the spec before it, so only a later read counts."""
    delay, fresh = POLL_FIRST, False
    while True:
        ok, why = _state(latest[name])
        if ok:
            return
        if ok is False and fresh:
            raise CRDNotEstablished(name, str(why.get("reason") or "NamesNotAccepted"),
                                    str(why.get("message") or ""))
        await asyncio.sleep(delay)
        delay = min(delay * 2, POLL_MAX)
        latest[name], fresh = await api.get(name), True
