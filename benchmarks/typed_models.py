"""msgspec Structs or pydantic v2 models for typed custom resources: what each costs.

One Website (examples/website.py) as the API server returns it (defaults filled, 3 ports,
2 conditions, managedFields: ~1.3 KB of JSON), and the same classes written with
pydantic v2 (camelCase aliases, the same constraints). Per object, best of ``--repeat``:

- JSON bytes -> validated object (a GET, a LIST item);
- dict -> validated object (the watch stream has decoded it already);
- validated object -> JSON bytes;

and, in fresh interpreters, the import time of each library (best of 5), and the size of
each library as installed (its files, with its own dependencies).

    pip install '.[bench]'    # pydantic is a benchmark-only dependency
    python -m benchmarks.typed_models [--objects 20000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from benchmarks._common import markdown_table, save_results

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "website.py"
_spec = importlib.util.spec_from_file_location("website", EXAMPLE)
assert _spec is not None and _spec.loader is not None
website = importlib.util.module_from_spec(_spec)
sys.modules["website"] = website
_spec.loader.exec_module(website)


# -- the same resource with pydantic v2 --------------------------------------------------------


class _P(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class PPort(_P):
    name: Annotated[str, Field(pattern=website.PORT_NAME, max_length=15)]
    port: Annotated[int, Field(ge=1, le=65535)]
    protocol: Literal["TCP", "UDP"] = "TCP"


class PSpec(_P):
    image: Annotated[str, Field(pattern=website.IMAGE, max_length=255)]
    replicas: Annotated[int, Field(ge=1, le=10)] = 1
    min_replicas: Annotated[int, Field(ge=1, le=10)] = 1
    tier: Literal["free", "standard", "premium"] = "standard"
    labels: Annotated[dict[str, str], Field(max_length=16)] = {}
    ports: Annotated[list[PPort], Field(max_length=8)] = []
    max_unavailable: int | str = "25%"
    memory: int | str = "128Mi"
    domain: str | None = None


class PCondition(_P):
    type: Annotated[str, Field(max_length=316)]
    status: Literal["True", "False", "Unknown"]
    last_transition_time: datetime
    reason: Annotated[str, Field(min_length=1, max_length=1024)]
    message: Annotated[str, Field(max_length=32768)] = ""
    observed_generation: Annotated[int, Field(ge=0)] | None = None


class PStatus(_P):
    observed_generation: int | None = None
    replicas: int = 0
    selector: str | None = None
    conditions: list[PCondition] = []


class PWebsite(_P):
    api_version: str = ""
    kind: str = ""
    metadata: dict[str, Any] = {}
    spec: PSpec
    status: PStatus | None = None


def sample() -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1", "kind": "Website",
        "metadata": {
            "name": "site", "namespace": "default", "uid": "7c6a1f7e-1f2b-4c7e-9d1e-3f1a2b3c4d5e",
            "resourceVersion": "123456", "generation": 3,
            "creationTimestamp": "2024-01-01T00:00:00Z", "labels": {"app": "site"},
            "managedFields": [{"manager": "kubectl", "operation": "Update",
                               "apiVersion": "example.com/v1", "time": "2024-01-01T00:00:00Z",
                               "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:spec": {".": {}, "f:image": {}}}}]},
        "spec": {"image": "registry.example.com/team/site:2.0", "replicas": 3,
                 "minReplicas": 2, "tier": "premium", "labels": {"app": "site", "team": "web"},
                 "ports": [{"name": n, "port": p, "protocol": "TCP"}
                           for n, p in (("http", 80), ("https", 443), ("metrics", 9090))],
                 "maxUnavailable": "25%", "memory": "256Mi", "domain": "site.example.com"},
        "status": {"observedGeneration": 3, "replicas": 3, "selector": "app=site",
                   "conditions": [
                       {"type": t, "status": "True", "reason": "AsExpected", "message": m,
                        "lastTransitionTime": "2024-01-01T00:00:00Z", "observedGeneration": 3}
                       for t, m in (("Ready", "all replicas serve"),
                                    ("Progressing", "rollout complete"))]},
    }


def per_object(fn: Callable[[], Any], n: int, repeat: int) -> float:
    """Best-of-``repeat`` microseconds per call of ``fn`` (``n`` calls per round)."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, time.perf_counter() - t0)
    return best / n * 1e6


IMPORTS = {"msgspec": "import msgspec",
           "pydantic": "import pydantic; pydantic.BaseModel"}  # pydantic imports lazily


def import_ms(statement: str, repeat: int = 5) -> float:
    code = ("import time; t = time.perf_counter(); " + statement +
            "; print(time.perf_counter() - t)")
    return min(float(subprocess.run([sys.executable, "-c", code], check=True,
                                    capture_output=True, text=True).stdout) * 1000
               for _ in range(repeat))


def installed_kib(*dists: str) -> float:
    total = 0
    for dist in dists:
        for f in importlib.metadata.files(dist) or ():
            path = Path(str(f.locate()))
            if path.is_file():
                total += path.stat().st_size
    return total / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    obj = sample()
    body = json.dumps(obj).encode()
    ms_decode = msgspec.json.Decoder(website.Website).decode
    ms_obj = ms_decode(body)
    p_obj = PWebsite.model_validate_json(body)
    assert ms_obj.spec.replicas == p_obj.spec.replicas == 3
    assert json.loads(msgspec.json.encode(ms_obj))["spec"]["minReplicas"] == 2
    assert json.loads(p_obj.model_dump_json(by_alias=True, exclude_defaults=True))[
        "spec"]["minReplicas"] == 2
    n, r = args.objects, args.repeat
    rows = {
        "msgspec": {
            "json_to_object_us": per_object(lambda: ms_decode(body), n, r),
            "dict_to_object_us": per_object(lambda: msgspec.convert(obj, website.Website), n, r),
            "object_to_json_us": per_object(lambda: msgspec.json.encode(ms_obj), n, r),
            "import_ms": import_ms(IMPORTS["msgspec"]),
            "installed_kib": installed_kib("msgspec"),
        },
        "pydantic": {
            "json_to_object_us": per_object(lambda: PWebsite.model_validate_json(body), n, r),
            "dict_to_object_us": per_object(lambda: PWebsite.model_validate(obj), n, r),
            "object_to_json_us": per_object(
                lambda: p_obj.model_dump_json(by_alias=True, exclude_defaults=True), n, r),
            "import_ms": import_ms(IMPORTS["pydantic"]),
            "installed_kib": installed_kib("pydantic", "pydantic-core", "annotated-types",
                                           "typing-inspection"),
        },
    }
    data = {"object_bytes": len(body), "objects": n, "repeat": r,
            "versions": {d: importlib.metadata.version(d) for d in ("msgspec", "pydantic",
                                                                      "pydantic-core")},
            "results": rows}
    headers = ["library", "JSON -> object (us)", "dict -> object (us)", "object -> JSON (us)",
               "import (ms)", "installed (KiB)"]
    print(f"one Website, {len(body)} bytes of JSON; best of {r} x {n}")
    print(markdown_table(headers, [
        [name, f"{v['json_to_object_us']:.2f}", f"{v['dict_to_object_us']:.2f}",
         f"{v['object_to_json_us']:.2f}", f"{v['import_ms']:.1f}", f"{v['installed_kib']:.0f}"]
        for name, v in rows.items()]))
    print(f"\nresults: {save_results('typed-models', data)}", file=sys.stderr)


if __name__ == "__main__":
    main()
