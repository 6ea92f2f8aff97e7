"""The simulator must answer every scenario as the real kube-apiserver 1.28 did.

Offline: each scenario runs on a fresh simulator (TLS, through watchkeeper's Client and the
real kubectl) and its normalized transcript is compared with the cluster's, recorded in
fixtures/ (``make conformance-record``). A scenario with a known difference carries its
reason (``Scenario.differs``) and is a strict xfail: it must still differ, so a fixed
difference fails here until its mark goes, and docs/simulator.md lists exactly these.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from conformance import fixtures
from conformance.runner import KUBECTL, run_scenario, simulator
from conformance.scenarios import ALL
from conformance.steps import Kubectl, Scenario

DOCS = Path(__file__).resolve().parents[2] / "docs" / "simulator.md"


def _marks(scenario: Scenario) -> list[pytest.MarkDecorator]:
    marks = []
    if any(isinstance(step, Kubectl) for step in scenario.steps):
        marks += [pytest.mark.kubectl,
                  pytest.mark.skipif(shutil.which(KUBECTL) is None,
                                     reason=f"{KUBECTL} not installed")]
    if scenario.differs:
        marks.append(pytest.mark.xfail(reason=scenario.differs, strict=True))
    return marks


@pytest.mark.parametrize("scenario", [pytest.param(s, id=s.name, marks=_marks(s))
                                      for s in ALL])
async def test_the_simulator_answers_as_the_cluster(scenario: Scenario,
                                                    tmp_path: Path) -> None:
    recorded = fixtures.load(scenario)
    assert recorded is not None, f"{scenario.name}: no fixture (make conformance-record)"
    async with simulator(tmp_path) as sim:
        actual = await run_scenario(sim, scenario, workdir=tmp_path)
    text = fixtures.diff(recorded, actual, "cluster (fixture)", "simulator")
    assert not text, f"{scenario.name}: the simulator answers otherwise\n{text}"


def test_every_scenario_has_a_fixture_and_every_fixture_a_scenario() -> None:
    names = {s.name for s in ALL}
    files = {p.stem for p in fixtures.DIR.glob("*.json")}
    assert names - files == set(), "record them: make conformance-record"
    assert files - names == set(), "fixtures of scenarios that are gone"


def test_the_docs_list_exactly_the_expected_differences() -> None:
    """docs/simulator.md's table of differences names each scenario marked ``differs``."""
    text = DOCS.read_text()
    table = text[text.index("## What the simulator does not do yet"):]
    listed = set(re.findall(r"^\| `([a-z0-9-]+)` \|", table, re.M))
    assert listed == {s.name for s in ALL if s.differs}
