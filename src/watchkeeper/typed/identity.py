"""Who a custom resource is, apart from its schema: group, version, names, scope, and what
the version shows and serves (printer columns, status and scale subresources).

Checked when declared, with the API server's own rules for names, so a typo fails at
import time with the field's name, not as a 422 at install time."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from watchkeeper.client.resource import Resource
from watchkeeper.typed.errors import SchemaError

__all__ = ["ColumnType", "PrinterColumn", "ResourceIdentity", "Scale", "Scope"]

Scope = Literal["Namespaced", "Cluster"]
ColumnType = Literal["integer", "number", "string", "boolean", "date"]

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_KIND = re.compile(r"^[A-Z][A-Za-z0-9]*$")


@dataclass(frozen=True)
class PrinterColumn:
    """A column of ``kubectl get`` (``additionalPrinterColumns``). ``type`` and
    ``description`` default to the field's, when ``json_path`` is a plain field path
    (``.spec.replicas``); a path the schema does not have is an error. With columns,
    kubectl shows no Age unless a column names ``.metadata.creationTimestamp``."""

    name: str
    json_path: str
    type: ColumnType | None = None
    description: str | None = None
    format: str | None = None
    priority: int = 0
    """0: shown by ``kubectl get``; higher: only with ``-o wide``."""


@dataclass(frozen=True)
class Scale:
    """The ``scale`` subresource (``kubectl scale``, the HorizontalPodAutoscaler): where
    the desired and observed replica counts, and optionally a label selector string, are."""

    spec_replicas_path: str = ".spec.replicas"
    status_replicas_path: str = ".status.replicas"
    label_selector_path: str | None = None


@dataclass(frozen=True)
class ResourceIdentity:
    """One version of a custom resource as ``@wk.custom_resource(...)`` declared it; the
    name defaults follow Kubernetes (plural: lowercase kind + "s", check it for kinds like
    Policy)."""

    group: str
    version: str
    kind: str
    plural: str
    singular: str
    list_kind: str
    scope: Scope = "Namespaced"
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    served: bool = True
    storage: bool | None = None
    """None: the storage version if it is the only version of the CRD."""
    deprecated: bool = False
    deprecation_warning: str | None = None
    printer_columns: tuple[PrinterColumn, ...] = ()
    status_subresource: bool | None = None
    """None: on when the class has a ``status`` field."""
    scale: Scale | None = None

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{self.group}"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def resource(self) -> Resource:
        """What ``client.api(...)`` takes to reach these objects."""
        return Resource(self.group, self.version, self.kind, self.plural,
                        self.scope == "Namespaced")

    def check(self, where: str) -> None:
        """SchemaError naming every name that Kubernetes would refuse."""
        problems: list[str] = []
        if not _DNS_SUBDOMAIN.match(self.group) or "." not in self.group:
            problems.append(f"group {self.group!r} must be a DNS subdomain with a dot "
                            "(example.com)")
        if not _DNS_LABEL.match(self.version):
            problems.append(f"version {self.version!r} must be a DNS label (v1, v1beta1)")
        if not _KIND.match(self.kind):
            problems.append(f"kind {self.kind!r} must be CamelCase letters and digits")
        if not _KIND.match(self.list_kind):
            problems.append(f"list_kind {self.list_kind!r} must be CamelCase")
        for what, name in (("plural", self.plural), ("singular", self.singular),
                           *(("short name", s) for s in self.short_names),
                           *(("category", c) for c in self.categories)):
            if not _DNS_LABEL.match(name):
                problems.append(f"{what} {name!r} must be a lowercase DNS label")
        if self.scope not in ("Namespaced", "Cluster"):
            problems.append(f"scope {self.scope!r} must be Namespaced or Cluster")
        if self.deprecation_warning is not None and not self.deprecated:
            problems.append("deprecation_warning needs deprecated=True")
        if self.storage and not self.served:
            problems.append("a storage version that is not served cannot be read back")
        for col in self.printer_columns:
            if not col.json_path.startswith("."):
                problems.append(f"printer column {col.name!r}: json_path must start with "
                                f"'.', got {col.json_path!r}")
        if problems:
            raise SchemaError(f"{where}: " + "; ".join(problems))
