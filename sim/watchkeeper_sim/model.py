"""What the simulator serves, as plain data: the resource types and the JSON object alias.

Every layer names these (documents render them, storage keeps objects of them, the HTTP
layers route by them), so they live below all of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

JSON = dict[str, Any]
Key = tuple[str, str]  # (group, plural): storage is shared by all versions of a resource


@dataclass(frozen=True)
class PrinterColumn:
    """One additionalPrinterColumn of a CRD version (apiextensions/v1)."""

    name: str
    type: str
    json_path: str
    format: str = ""
    description: str = ""
    priority: int = 0


@dataclass(frozen=True)
class ScalePaths:
    """A CRD version's subresources.scale: where a Scale's numbers live in the object."""

    spec_replicas: str
    status_replicas: str
    label_selector: str = ""


@dataclass(frozen=True)
class ResourceType:
    """One served resource: enough to route, discover and validate."""

    group: str  # "" for core
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    has_status: bool = False  # a /status subresource exists (status is ignored on main writes)
    is_custom: bool = False  # custom resources: no strategic merge patch (415)
    verbs: tuple[str, ...] = (
        "create", "delete", "deletecollection", "get", "list", "patch", "update", "watch",
    )
    categories: tuple[str, ...] = ()
    has_generation: bool = False  # metadata.generation is maintained (spec-bearing kinds)
    # stored with another resource's objects, converted on the way in and out (the
    # events.k8s.io Events are core Events: _events.py)
    shares: tuple[str, str] | None = None
    # a custom resource's additionalPrinterColumns for this version (Table columns)
    printer_columns: tuple[PrinterColumn, ...] = ()
    # a custom resource whose CRD is being deleted: served until its objects are gone, but
    # creates are refused and discovery lists only delete/deletecollection/get/list/watch
    terminating: bool = False
    # a custom resource's /scale subresource (autoscaling/v1 Scale), when its CRD has one
    scale: ScalePaths | None = None

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def key(self) -> Key:
        return self.shares or (self.group, self.plural)
