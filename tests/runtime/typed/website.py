"""The example resource (examples/website.py) for the tests, and the same class in
another API group: a real cluster is shared, so each run installs its own group."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path
from typing import Any

import watchkeeper as wk

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "website.py"


def _load() -> Any:
    if "website" in sys.modules:
        return sys.modules["website"]
    spec = importlib.util.spec_from_file_location("website", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["website"] = module
    spec.loader.exec_module(module)
    return module


example = _load()
Website: type[wk.CustomResource] = example.Website


def in_group(cls: type[wk.CustomResource], group: str) -> type[wk.CustomResource]:
    """``cls`` as a resource of ``group``: the same schema, names and columns."""
    identity = cls.identity()
    given = {f.name: getattr(identity, f.name) for f in dataclasses.fields(identity)}
    sub = type(cls.__name__, (cls,), {"__doc__": cls.__doc__, "__module__": cls.__module__})
    return wk.custom_resource(**{**given, "group": group})(sub)
