"""Installing CustomResourceDefinitions in a test: ``install_crds``.

From the YAML files an operator ships (several documents per file, as ``kubectl apply -f``
takes them) or from dicts, through the API as a user would install them, and only once they
are Established: before that their resources are not served, and an operator started too
early would see 404s. They are applied (server-side apply): a CRD that is there already is
updated if it differs, so a session's shared server serves what the test asked for.
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

import watchkeeper as wk
from watchkeeper_sim.model import JSON
from watchkeeper_sim.testing.wait import wait_for

CRD_RESOURCE = "customresourcedefinitions.apiextensions.k8s.io"
CRD_KIND = "CustomResourceDefinition"
MANAGER = "watchkeeper-sim-tests"  # the field manager of the CRDs a test installs


def load_crds(source: str | Path | JSON) -> list[JSON]:
    """The CRDs of a YAML file (every document must be one) or of a dict."""
    if isinstance(source, dict):
        docs: list[object] = [source]
        where = "the CRD given"
    else:
        path = Path(source)
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        where = str(path)
        if not docs:
            raise ValueError(f"{where} holds no document")
    crds: list[JSON] = []
    for doc in docs:
        if not isinstance(doc, dict) or doc.get("kind") != CRD_KIND:
            kind = doc.get("kind") if isinstance(doc, dict) else type(doc).__name__
            raise ValueError(f"{where}: expected CustomResourceDefinition documents, "
                             f"found {kind}")
        crds.append(copy.deepcopy(doc))
    return crds


def established(crd: JSON) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True"
               for c in conditions)


async def install_crds(client: wk.Client, *sources: str | Path | JSON,
                       timeout: float = 10.0) -> list[str]:
    """Create (or update to match) the CRDs of ``sources`` and wait until each is
    Established; returns their names."""
    api = client.api(CRD_RESOURCE)
    crds = [crd for source in sources for crd in load_crds(source)]
    for crd in crds:  # server-side apply: created, updated, or left as it is in one request
        await api.patch(crd["metadata"]["name"], crd, type="apply", field_manager=MANAGER,
                        force=True)
    names = [crd["metadata"]["name"] for crd in crds]
    for name in names:
        await wait_for(api, name, established, timeout)
    return names
