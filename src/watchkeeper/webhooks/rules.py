"""What an admission handler's registration says besides its path: which requests the API
server sends it (rules, selectors) and how it treats it (side effects, match policy,
reinvocation). Plain data read by ``watchkeeper webhooks`` to print the configurations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["OPERATIONS", "Rules"]

OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT", "*")


@dataclass(frozen=True)
class Rules:
    """The webhook entry of one handler. ``resources``, ``api_groups`` and ``api_versions``
    default to the handler's ``model`` (a ``wk.CustomResource`` or ``wk.k8s`` kind);
    ``name`` (the webhook's name, a domain of three or more parts) defaults to one made
    of the path and the configuration's name."""

    name: str | None = None
    operations: tuple[str, ...] = ("CREATE", "UPDATE")
    resources: tuple[str, ...] = ()
    api_groups: tuple[str, ...] | None = None
    api_versions: tuple[str, ...] | None = None
    scope: Literal["*", "Namespaced", "Cluster"] = "*"
    object_selector: Mapping[str, Any] | None = None
    namespace_selector: Mapping[str, Any] | None = None
    side_effects: Literal["None", "NoneOnDryRun"] = "None"
    match_policy: Literal["Equivalent", "Exact"] = "Equivalent"
    reinvocation_policy: Literal["Never", "IfNeeded"] = "Never"

    def __post_init__(self) -> None:
        bad = [op for op in self.operations if op not in OPERATIONS]
        if bad or not self.operations:
            raise ValueError(f"operations must be some of {', '.join(OPERATIONS)}, not "
                             f"{list(self.operations)}")
        for field, value, allowed in (
            ("scope", self.scope, ("*", "Namespaced", "Cluster")),
            ("side_effects", self.side_effects, ("None", "NoneOnDryRun")),
            ("match_policy", self.match_policy, ("Equivalent", "Exact")),
            ("reinvocation_policy", self.reinvocation_policy, ("Never", "IfNeeded")),
        ):
            if value not in allowed:
                raise ValueError(f"{field} must be one of {', '.join(allowed)}, not {value!r}")


def _tuple(value: Sequence[str] | str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    return (value,) if isinstance(value, str) else tuple(value)


def rules(*, name: str | None = None, operations: Sequence[str] | str = ("CREATE", "UPDATE"),
          resources: Sequence[str] | str = (), api_groups: Sequence[str] | str | None = None,
          api_versions: Sequence[str] | str | None = None, **rest: Any) -> Rules:
    """``Rules`` from the decorators' keywords (a single string is one item)."""
    return Rules(name=name, operations=_tuple(operations) or (),
                 resources=_tuple(resources) or (), api_groups=_tuple(api_groups),
                 api_versions=_tuple(api_versions), **rest)
