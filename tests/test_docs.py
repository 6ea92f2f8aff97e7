"""docs/errors.md says it lists every error class: hold it to that for every exception class
`watchkeeper` exports, so a new one cannot ship undocumented."""

from __future__ import annotations

import re
from pathlib import Path

import watchkeeper as wk

ERRORS_MD = Path(__file__).resolve().parents[1] / "docs" / "errors.md"


def exported_exceptions() -> set[str]:
    """Every exception class reachable as ``wk.<name>``."""
    return {
        name for name in dir(wk)
        if isinstance(obj := getattr(wk, name), type) and issubclass(obj, BaseException)
    }


def documented_names(markdown: str) -> set[str]:
    """Class names in backticks (``Name`` or ``wk.Name``) in a heading or in the first
    column of a table row: a mention in passing does not count as documenting it."""
    names: set[str] = set()
    for line in markdown.splitlines():
        if line.startswith("#"):
            where = line
        elif line.startswith("|") and not re.fullmatch(r"[|\s:-]+", line):
            where = line.split("|")[1]
        else:
            continue
        names.update(re.findall(r"`(?:wk\.)?([A-Za-z_][A-Za-z0-9_]*)`", where))
    return names


def test_every_exported_exception_class_is_documented_in_errors_md() -> None:
    exported = exported_exceptions()
    # the walk itself works: it finds classes from every layer that exports them
    assert {"ApiError", "BadRequest", "ConfigError", "WatcherUnhealthy",
            "ControllerUnhealthy"} <= exported
    missing = sorted(exported - documented_names(ERRORS_MD.read_text()))
    assert not missing, (
        f"exported from watchkeeper but not documented in docs/errors.md (a heading or a "
        f"table row naming it in backticks, saying what raises it and what the user does): "
        f"{', '.join(missing)}"
    )


def test_the_documentation_check_rejects_a_mention_in_passing() -> None:
    """Only headings and first table cells count, so prose that names a class in passing
    (as errors.md's introduction names `wk.ApiError`) does not hide a missing entry."""
    text = "Every failure is a `wk.ApiError`.\n\n| class | when |\n|---|---|\n| `Gone` | 410 |\n"
    assert documented_names(text) == {"Gone"}
    assert documented_names("## `wk.LeadershipLost`\n") == {"LeadershipLost"}
