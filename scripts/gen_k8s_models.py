"""Generate ``src/watchkeeper/k8s/_models.py``: msgspec Structs for built-in kinds, from the
OpenAPI v3 documents a kube-apiserver serves.

    for p in api/v1 apis/apps/v1 apis/batch/v1; do
        kubectl get --raw /openapi/v3/$p > /tmp/openapi/$(echo $p | tr / _).json
    done
    python scripts/gen_k8s_models.py /tmp/openapi/*.json > src/watchkeeper/k8s/_models.py

Only the kinds in ``KINDS`` and the types they reach are generated. ``ObjectMeta`` and
``OwnerReference`` are watchkeeper's own (``client/models.py``); ``Time`` is a datetime,
``IntOrString`` ``int | str``, ``Quantity`` a string, ``format: byte`` bytes (base64 on
the wire). A field the schema does not require is ``T | None = None``: absent and empty stay
apart, as the API server keeps them apart."""

from __future__ import annotations

import json
import keyword
import re
import sys
import textwrap
from typing import Any

SERVER_VERSION = "1.28.7"  # the server the documents came from (the header says it)

KINDS = [
    "io.k8s.api.core.v1.ConfigMap",
    "io.k8s.api.core.v1.Secret",
    "io.k8s.api.core.v1.Pod",
    "io.k8s.api.core.v1.Service",
    "io.k8s.api.apps.v1.Deployment",
    "io.k8s.api.batch.v1.Job",
]
OWN = {
    "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": "ObjectMeta",
    "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference": "OwnerReference",
}
SCALAR = {
    "io.k8s.apimachinery.pkg.apis.meta.v1.Time": "datetime",
    "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime": "datetime",
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": "int | str",
    "io.k8s.apimachinery.pkg.api.resource.Quantity": "str",
    "io.k8s.apimachinery.pkg.runtime.RawExtension": "dict[str, Any]",
}


def _ref(node: dict[str, Any]) -> str | None:
    if "$ref" in node:
        return str(node["$ref"]).rsplit("/", 1)[-1]
    for sub in node.get("allOf", []):
        if "$ref" in sub:
            return str(sub["$ref"]).rsplit("/", 1)[-1]
    return None


def _snake(name: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    s = re.sub(r"(?<=[A-Z])([A-Z][a-z])", r"_\1", s).lower().replace("-", "_")
    return s + "_" if keyword.iskeyword(s) else s


def _camel(snake: str) -> str:  # msgspec's rename="camel"
    parts = snake.rstrip("_").split("_")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


class Gen:
    def __init__(self, schemas: dict[str, Any]) -> None:
        self.schemas = schemas
        self.names: dict[str, str] = dict(OWN)
        self.order: list[str] = []

    def name(self, ref: str) -> str:
        if ref in self.names:
            return self.names[ref]
        short = ref.rsplit(".", 1)[-1]
        if short in self.names.values():
            raise SystemExit(f"two types named {short}: {ref}")
        self.names[ref] = short
        self.order.append(ref)
        self.walk(ref)
        return short

    def type_of(self, node: dict[str, Any]) -> str:
        ref = _ref(node)
        if ref is not None:
            if ref in SCALAR:
                return SCALAR[ref]
            return self.name(ref)
        t = node.get("type")
        if t == "string":
            fmt = node.get("format")
            return {"byte": "bytes", "date-time": "datetime"}.get(fmt or "", "str")
        if t == "integer":
            return "int"
        if t == "number":
            return "float"
        if t == "boolean":
            return "bool"
        if t == "array":
            return f"list[{self.type_of(node['items'])}]"
        if t == "object" or "additionalProperties" in node:
            extra = node.get("additionalProperties")
            return f"dict[str, {self.type_of(extra) if isinstance(extra, dict) else 'Any'}]"
        return "Any"

    def walk(self, ref: str) -> None:
        for prop in self.schemas[ref].get("properties", {}).values():
            self.type_of(prop)

    def emit_class(self, ref: str) -> str:
        schema = self.schemas[ref]
        name = self.names[ref]
        gvk = (schema.get("x-kubernetes-group-version-kind") or [None])[0]
        base = "Kind" if gvk and ref in KINDS else "K8sObject"
        doc = (schema.get("description") or name).split("\n\n")[0].replace("\\", "\\\\")
        doc = doc.replace('"""', "'''").strip()
        lines = [f"class {name}({base}):"]
        lines += textwrap.wrap(f'"""{doc}"""', 92, initial_indent="    ",
                               subsequent_indent="    ")
        if base == "Kind":
            api_version = f"{gvk['group']}/{gvk['version']}" if gvk["group"] else gvk["version"]
            lines += ["", f"    __wk_api_version__: ClassVar[str] = {api_version!r}",
                      f"    __wk_kind__: ClassVar[str] = {gvk['kind']!r}"]
        required = set(schema.get("required", []))
        fields: list[str] = []
        for wire, prop in sorted(schema.get("properties", {}).items(),
                                 key=lambda kv: (kv[0] not in required, kv[0])):
            if base == "Kind" and wire in ("apiVersion", "kind", "metadata"):
                continue  # in Kind
            py = _snake(wire)
            tp = self.type_of(prop)
            rename = _camel(py) != wire or py.endswith("_")
            if wire in required:
                value = f" = msgspec.field(name={wire!r})" if rename else ""
                fields.append(f"    {py}: {tp}{value}")
            else:
                value = f"msgspec.field(default=None, name={wire!r})" if rename else "None"
                fields.append(f"    {py}: {tp} | None = {value}")
        if fields:
            lines += ["", *fields]
        return "\n".join(lines)


HEADER = '''"""Built-in kinds as msgspec Structs: GENERATED by scripts/gen_k8s_models.py from the
OpenAPI v3 documents of kube-apiserver {version}; do not edit by hand."""

# ruff: noqa: E501

from __future__ import annotations

{imports}
__all__ = [{names}]
'''


def main(paths: list[str]) -> None:
    schemas: dict[str, Any] = {}
    for path in paths:
        with open(path) as f:
            schemas.update(json.load(f)["components"]["schemas"])
    gen = Gen(schemas)
    for kind in KINDS:
        gen.name(kind)
    # a class must be defined before a class that names it as a default... annotations are
    # strings (from __future__), so the order is the order found
    body = "\n\n\n".join(gen.emit_class(ref) for ref in gen.order)
    names = ", ".join(repr(gen.names[r]) for r in sorted(gen.order, key=gen.names.get))
    version = SERVER_VERSION
    used = [n for n in ("ObjectMeta", "OwnerReference") if re.search(rf"\b{n}\b", body)]
    typing = ["Any"] if re.search(r"\bAny\b", body) else []
    imports = "\n".join([
        "from datetime import datetime",
        f"from typing import {', '.join([*typing, 'ClassVar'])}", "", "import msgspec", "",
        f"from watchkeeper.client.models import {', '.join(used)}",
        "from watchkeeper.k8s._base import K8sObject, Kind", ""])
    print(HEADER.format(version=version, names=names, imports=imports) + "\n\n" + body)


if __name__ == "__main__":
    main(sys.argv[1:])
