"""OpenAPI v3 schemas copied verbatim from kube-apiserver 1.28.7 (file 019).

The simulator's other kinds have minimal schemas that accept unknown fields; a kind listed here
is described exactly as the real server describes it, so ``kubectl explain`` and clients that
read the schema see the real fields and descriptions.
"""

from __future__ import annotations

from typing import Any

_CONVENTIONS = "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md"
_OBJECT_META = "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_KEYS = "Each key must consist of alphanumeric characters, '-', '_' or '.'."

CONFIGMAP: dict[str, Any] = {
    "description": "ConfigMap holds configuration data for pods to consume.",
    "type": "object",
    "properties": {
        "apiVersion": {
            "description": "APIVersion defines the versioned schema of this representation of "
            "an object. Servers should convert recognized schemas to the latest internal value, "
            f"and may reject unrecognized values. More info: {_CONVENTIONS}#resources",
            "type": "string",
        },
        "binaryData": {
            "description": f"BinaryData contains the binary data. {_KEYS} BinaryData can "
            "contain byte sequences that are not in the UTF-8 range. The keys stored in "
            "BinaryData must not overlap with the ones in the Data field, this is enforced "
            "during validation process. Using this field will require 1.10+ apiserver and "
            "kubelet.",
            "type": "object",
            "additionalProperties": {"type": "string", "format": "byte"},
        },
        "data": {
            "description": f"Data contains the configuration data. {_KEYS} Values with "
            "non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data "
            "must not overlap with the keys in the BinaryData field, this is enforced during "
            "validation process.",
            "type": "object",
            "additionalProperties": {"type": "string", "default": ""},
        },
        "immutable": {
            "description": "Immutable, if set to true, ensures that data stored in the "
            "ConfigMap cannot be updated (only object metadata can be modified). If not set to "
            "true, the field can be modified at any time. Defaulted to nil.",
            "type": "boolean",
        },
        "kind": {
            "description": "Kind is a string value representing the REST resource this object "
            "represents. Servers may infer this from the endpoint the client submits requests "
            f"to. Cannot be updated. In CamelCase. More info: {_CONVENTIONS}#types-kinds",
            "type": "string",
        },
        "metadata": {
            "description": f"Standard object's metadata. More info: {_CONVENTIONS}#metadata",
            "default": {},
            "allOf": [{"$ref": _OBJECT_META}],
        },
    },
    "x-kubernetes-group-version-kind": [{"group": "", "kind": "ConfigMap", "version": "v1"}],
}

REAL_SCHEMAS: dict[str, dict[str, Any]] = {"io.k8s.api.core.v1.ConfigMap": CONFIGMAP}
