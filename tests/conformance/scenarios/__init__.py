"""Every scenario, by area; a scenario's name is its fixture's file name."""

from __future__ import annotations

from conformance.scenarios import apply, builtins, crds, deletion, patching
from conformance.steps import Scenario

ALL: tuple[Scenario, ...] = (
    *crds.SCENARIOS,
    *patching.SCENARIOS,
    *apply.SCENARIOS,
    *deletion.SCENARIOS,
    *builtins.SCENARIOS,
)
BY_NAME = {s.name: s for s in ALL}
assert len(BY_NAME) == len(ALL), "two scenarios share a name"
