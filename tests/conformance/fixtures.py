"""The recorded transcripts (one JSON file per scenario) and the readable diff of two."""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

from conformance.steps import Scenario

DIR = Path(__file__).parent / "fixtures"


def path(scenario: Scenario) -> Path:
    return DIR / f"{scenario.name}.json"


def load(scenario: Scenario) -> list[dict[str, Any]] | None:
    """The real server's transcript of ``scenario``, None if never recorded."""
    file = path(scenario)
    if not file.exists():
        return None
    steps: list[dict[str, Any]] = json.loads(file.read_text())["steps"]
    return steps


def save(scenario: Scenario, steps: list[dict[str, Any]], server: str) -> None:
    doc = {"scenario": scenario.name, "area": scenario.area, "server": server,
           "steps": steps}
    path(scenario).write_text(render(doc) + "\n")


def render(value: Any) -> str:
    """Sorted keys (key order is not compared), one value per line for line diffs."""
    return json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False)


def diff(expected: list[dict[str, Any]], actual: list[dict[str, Any]],
         expected_name: str, actual_name: str) -> str:
    """A unified diff, one hunk per difference, each preceded by the step it is in."""
    if expected == actual:
        return ""
    lines: list[str] = []
    for i in range(max(len(expected), len(actual))):
        want = render(expected[i]).splitlines() if i < len(expected) else []
        got = render(actual[i]).splitlines() if i < len(actual) else []
        if want == got:
            continue
        title = _title(expected[i] if i < len(expected) else actual[i])
        lines.append(f"--- step {i + 1}: {title}")
        lines.extend(list(difflib.unified_diff(want, got, expected_name, actual_name,
                                               lineterm="", n=4))[2:])
    return "\n".join(lines)


def _title(record: dict[str, Any]) -> str:
    for key in ("request", "kubectl", "watch", "poll"):
        if key in record:
            return f"{'kubectl ' if key == 'kubectl' else ''}{record[key]}"
    return "?"
